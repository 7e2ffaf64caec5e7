"""Result documents: ids, atomic save, load errors, history, compare, export."""

from __future__ import annotations

import csv
import io
import json
import os
from pathlib import Path
from typing import Any

import pytest

from gputui.bench import results_store
from gputui.bench.compare import compare
from gputui.bench.export import CSV_COLUMNS, export_csv, export_markdown
from gputui.bench.request import RunRequest
from gputui.bench.result import Result
from gputui.bench.stats import Throughput
from gputui.errors import GputuiError, UsageError


@pytest.fixture(autouse=True)
def data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("GPUTUI_DATA_DIR", str(tmp_path))
    return tmp_path


def make_doc(result_id: str | None = None, *, throughput: float = 100.0, batch: int = 8,
             started: str = "2025-01-01T00:00:00.000Z", **kw: Any) -> dict[str, Any]:
    doc = results_store.empty_result(result_id or results_store.new_id(), RunRequest(
        "cnn-train", model="resnet18", device="cpu", precision="fp32", batch_size=batch))
    doc.update({
        "status": "ok", "device_name": "Test CPU", "started_at": started,
        "throughput": {"median": throughput, "mean": throughput, "unit": "images/s",
                       "p10": throughput * 0.9, "p90": throughput * 1.1},
        "latency_ms": {"p50": 10.0, "p90": 12.0, "p99": 15.0, "mean": 10.5},
        "step_time_ms": {"p50": 80.0, "p90": 90.0, "p99": 99.0, "median": 80.0},
        "peak_memory_bytes": 2 << 20, "energy_j_per_sample": 0.5, "avg_power_w": 200.0,
        "settings": {"batch_size": batch, "channels_last": False},
        "env": {"torch": "2.4.0", "python": "3.11"},
    })
    doc.update(kw)
    return doc


def make_result(result_id: str | None = None, **kw: Any) -> Result:
    return Result.from_dict(make_doc(result_id, **kw))


def test_data_dir_honours_env(data_dir: Path) -> None:
    assert results_store.results_dir() == data_dir / "results"


def test_ids_sort_by_time_and_are_unique() -> None:
    from datetime import UTC, datetime

    early = results_store.new_id(datetime(2024, 1, 1, tzinfo=UTC))
    late = results_store.new_id(datetime(2025, 1, 1, tzinfo=UTC))
    assert early < late
    assert len({results_store.new_id() for _ in range(200)}) == 200


def test_save_is_atomic_and_round_trips(data_dir: Path) -> None:
    doc = make_doc(energy_j_per_sample=float("nan"))
    path = results_store.save(doc)
    assert path.parent == data_dir / "results"
    assert [p.name for p in path.parent.iterdir()] == [path.name]  # no temp file left
    loaded = results_store.load(doc["id"])
    assert loaded.energy_j_per_sample is None  # NaN is not JSON: stored as null
    assert loaded.throughput == Throughput.from_dict(doc["throughput"])
    assert loaded.throughput is not None and loaded.throughput.value == 100.0


def test_write_atomic_replaces_existing_file(tmp_path: Path) -> None:
    target = tmp_path / "sub" / "out.json"
    results_store.write_atomic(target, "one")
    results_store.write_atomic(target, "two")
    assert target.read_text() == "two"
    assert sorted(p.name for p in target.parent.iterdir()) == ["out.json"]


def test_load_by_unique_prefix_and_errors() -> None:
    a = make_doc("20250101-000000-000-aaaaaa")
    b = make_doc("20250101-000000-000-bbbbbb")
    results_store.save(a)
    results_store.save(b)
    assert results_store.load("20250101-000000-000-a").id == a["id"]
    with pytest.raises(UsageError, match="ambiguous"):
        results_store.load("20250101")
    with pytest.raises(UsageError, match="no result with id 'nope'"):
        results_store.load("nope")
    with pytest.raises(UsageError):
        results_store.load("../../etc/passwd")


def test_corrupt_file_is_named_in_one_line(data_dir: Path) -> None:
    bad = data_dir / "results" / "20250101-000000-000-cccccc.json"
    bad.parent.mkdir(parents=True)
    bad.write_text('{"benchmark": "cnn-train",\n "throughput": ')
    with pytest.raises(GputuiError) as info:
        results_store.load("20250101-000000-000-cccccc")
    message = str(info.value)
    assert str(bad) in message and "corrupt" in message and "\n" not in message
    assert not isinstance(info.value, UsageError)
    (data_dir / "results" / "20250101-000000-000-dddddd.json").write_text("[1, 2]")
    with pytest.raises(GputuiError, match="not a gputui result"):
        results_store.load("20250101-000000-000-dddddd")


def test_history_is_ordered_and_skips_corrupt_files(data_dir: Path) -> None:
    newer = make_doc(started="2025-02-01T00:00:00.000Z")
    older = make_doc(started="2025-01-01T00:00:00.000Z")
    results_store.save(newer)
    results_store.save(older)
    (data_dir / "results" / "broken.json").write_text("{")
    (data_dir / "results" / ".half-written.json.tmp").write_text("{")
    hist = results_store.history()
    assert [d.id for d in hist.results] == [older["id"], newer["id"]]
    assert len(hist.warnings) == 1 and "broken.json" in hist.warnings[0]


def test_history_of_missing_dir_is_empty() -> None:
    hist = results_store.history()
    assert hist.results == [] and hist.warnings == []


def test_compare_ratios_and_setting_differences() -> None:
    a = make_result(throughput=100.0, batch=8)
    b = make_result(throughput=150.0, batch=16, energy_j_per_sample=0.25,
                    peak_memory_bytes=4 << 20)
    cmp = compare(a, b)
    by_name = {m.name: m for m in cmp.metrics}
    tp = by_name["throughput"]
    assert tp.ratio == pytest.approx(1.5) and tp.better == "b"
    energy = by_name["energy per sample"]
    assert energy.ratio == pytest.approx(0.5) and energy.better == "b"
    memory = by_name["peak memory"]
    assert memory.ratio == pytest.approx(2.0) and memory.better == "a"
    assert by_name["latency p90"].ratio == pytest.approx(1.0)
    assert by_name["latency p90"].better is None
    differing = {s.name for s in cmp.settings if s.differs}
    assert "batch_size" in differing
    assert "channels_last" not in differing
    as_json = json.loads(json.dumps(cmp.to_dict()))
    assert as_json["metrics"][0]["ratio_b_over_a"] == pytest.approx(1.5)


def test_compare_handles_missing_numbers_and_other_units() -> None:
    a = make_doc(latency_ms=None, energy_j_per_sample=None)
    b = make_doc(throughput=2.0)
    b["throughput"]["unit"] = "TFLOP/s"
    cmp = compare(Result.from_dict(a), Result.from_dict(b))
    by_name = {m.name: m for m in cmp.metrics}
    assert by_name["latency p50"].ratio is None
    assert by_name["energy per sample"].ratio is None
    assert by_name["throughput"].better is None  # not comparable across units


OLD_CSV_COLUMNS = (
    "id", "started_at", "finished_at", "status", "benchmark", "model", "device", "device_name",
    "precision", "batch_size", "steps", "samples", "duration_s",
    "throughput_median", "throughput_mean", "throughput_p10", "throughput_p90", "throughput_unit",
    "latency_p50_ms", "latency_p90_ms", "latency_p99_ms", "latency_mean_ms",
    "step_time_p50_ms", "step_time_p90_ms", "step_time_p99_ms",
    "peak_memory_bytes", "energy_j_per_sample", "avg_power_w", "throttle_episodes",
    "error_kind", "error_message", "torch", "cuda", "driver",
)


def test_export_csv_has_stable_columns() -> None:
    docs = [make_doc(throughput=100.0), make_doc(throughput=50.0, status="cancelled"),
            make_doc(status="failed", error={"kind": "oom", "message": "x"})]
    docs[2]["throughput"] = None
    text = export_csv([Result.from_dict(d) for d in docs])
    rows = list(csv.DictReader(io.StringIO(text)))
    assert tuple(rows[0].keys()) == CSV_COLUMNS
    assert CSV_COLUMNS[:34] == OLD_CSV_COLUMNS  # new columns only ever appended
    assert rows[0]["throughput_value"] == "100.0"
    assert [r["status"] for r in rows] == ["ok", "cancelled", "failed"]
    assert rows[0]["throughput_median"] == "100.0"
    assert rows[2]["throughput_median"] == "" and rows[2]["error_kind"] == "oom"


def test_export_markdown_is_a_table() -> None:
    text = export_markdown([make_result(), make_result(model="a|b")])
    lines = text.strip().splitlines()
    assert len(lines) == 4
    assert lines[1].startswith("|---")
    assert all(line.count(" | ") == lines[0].count(" | ") for line in lines[2:])
    assert "a\\|b" in lines[3]


def test_save_refuses_bad_ids(tmp_path: Path) -> None:
    with pytest.raises(GputuiError):
        results_store.save({"id": "../x", "benchmark": "b"}, tmp_path)
    assert os.listdir(tmp_path) == []
