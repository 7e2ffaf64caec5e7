"""One field list: the ResultBuilder has exactly Result's fields, and a result goes
through the builder and back unchanged (the runner's verdict starts from the worker's)."""

from __future__ import annotations

import json
from dataclasses import fields

from gputui.bench.events import Point
from gputui.bench.result import ErrorInfo, Result, ResultBuilder
from gputui.bench.stats import Spread, Throughput
from gputui.bench.throttle_window import WindowStats


def test_the_builder_has_exactly_results_fields() -> None:
    assert [f.name for f in fields(ResultBuilder)] == [
        f.name for f in fields(Result) if f.name != "schema"]


def test_every_field_survives_builder_and_back() -> None:
    doc = {
        "schema": 2, "id": "r1", "benchmark": "cnn-train", "model": "resnet18",
        "device": "cuda:0", "device_name": "NVIDIA H100 80GB HBM3", "precision": "amp",
        "batch_size": 256, "status": "ok",
        "throughput": {"value": 2310.0, "median": 2300.0, "unit": "images/s",
                       "p10": 2200.0, "p90": 2400.0},
        "trials": [2300.0, 2310.0, 2320.0],
        "latency_ms": {"p50": 1.0, "p90": 2.0, "p99": 3.0, "mean": 1.5},
        "phases_ms": {"forward": 3.0, "backward": 6.0},
        "step_time_ms": {"p50": 110.0, "p90": 120.0, "p99": 130.0, "mean": 111.0},
        "peak_memory_bytes": 123, "energy_j_per_sample": 0.25, "avg_power_w": 690.0,
        "throttle_episodes": [{"gpu_index": 0, "reasons": ["sw_power_cap"]}],
        "settings": {"world_size": 2}, "env": {"torch": "2.11.0"},
        "started_at": "2026-11-23T06:00:00.000Z", "finished_at": "2026-11-23T06:01:00.000Z",
        "duration_s": 60.0, "steps": 100, "samples": 25600,
        "points": [Point(label="8192³", batch_size=None, throughput=700.0,
                         unit="TFLOP/s").to_dict()],
        "error": None, "extra": {"reference": None},
        "window": {"readings": 4, "seconds": 2.0, "sample_hz": 2.0,
                   "throttle_reasons": [], "throttled_fraction": 0.0},
        "config": {"gpu": {"gpu_index": 0}, "topology": None},
    }
    result = Result.from_dict(doc)
    assert isinstance(result.throughput, Throughput) and isinstance(result.window, WindowStats)
    assert isinstance(result.latency_ms, Spread)
    again = ResultBuilder.from_result(result).build()
    assert again == result
    assert json.dumps(again.to_dict(), sort_keys=True) == json.dumps(result.to_dict(),
                                                                     sort_keys=True)


def test_a_new_builder_is_ok_with_empty_mutable_parts() -> None:
    b = ResultBuilder(id="x", benchmark="membw")
    b.add_point(Point(label="copy", batch_size=None, throughput=1.0, unit="GB/s"))
    b.add_counts(3, 12)
    b.settings["k"] = 1
    other = ResultBuilder(id="y", benchmark="membw")
    assert other.points == [] and other.settings == {}  # nothing shared between builders
    built = b.build()
    assert built.status == "ok" and built.steps == 3 and built.samples == 12
    assert isinstance(built.points, tuple) and len(built.points) == 1
    b.fail(ErrorInfo(kind="oom", message="out of memory"))
    assert b.build().status == "failed"
    assert Result(id="z", benchmark="membw").status == "failed"  # a bare Result is not ok
