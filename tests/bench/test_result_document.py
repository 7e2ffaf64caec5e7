"""The result document as gputui writes it today, through the typed records and back.

`results_v2/` holds real result files written by the CPU worker before `extra` was typed
(`gputui bench run … --device cpu`): each loads into typed records, nothing left over, and
dumps back byte for byte. GPU-only keys (energy, the worker's GPU window, the reference)
are checked on documents shaped as the kinds write them on CUDA.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from gputui.bench import results_store
from gputui.bench.events import Point
from gputui.bench.extras import EnergyNote, RanksEnergy
from gputui.bench.kind_extras import (
    AccuracyExtra,
    AttentionExtra,
    BatchFinderExtra,
    DdpExtra,
    KindExtra,
    LmInferExtra,
    MatmulExtra,
    MembwExtra,
    SweepExtra,
)
from gputui.bench.result import ErrorInfo, Result, ResultBuilder
from gputui.bench.stats import Spread, Throughput
from gputui.bench.throttle_window import WindowStats
from gputui.commands.bench_view import profile_table, summary_table

FILES = Path(__file__).parent / "results_v2"
KIND: dict[str, type[KindExtra] | None] = {
    "attention.json": AttentionExtra, "batch-finder.json": BatchFinderExtra,
    "cnn-infer-latency.json": None, "cnn-train-ddp-scaling.json": DdpExtra,
    "cnn-train-ddp.json": DdpExtra, "cnn-train-sweep.json": SweepExtra,
    "cnn-train-timeout.json": None, "cnn-train.json": None, "lm-infer-sweep.json": None,
    "lm-infer.json": None, "lm-train.json": None, "matmul.json": MatmulExtra,
    "membw.json": MembwExtra, "rnn-train-profile.json": None,
    "train-to-accuracy.json": AccuracyExtra,
}


def load(name: str) -> Result:
    return results_store.load_path(FILES / name)


def text_of(r: Result) -> str:
    console = Console(width=300, record=True)
    console.print(summary_table(r))
    return " ".join(console.export_text().split())  # one space between words and cells


def test_every_saved_file_is_listed() -> None:
    assert sorted(p.name for p in FILES.glob("*.json")) == sorted(KIND)


@pytest.mark.parametrize("name", sorted(KIND))
def test_a_saved_result_loads_typed_and_dumps_back_byte_for_byte(name: str) -> None:
    raw = (FILES / name).read_text()
    r = load(name)
    assert results_store.dumps(r) == raw
    expected = KIND[name]
    assert (r.extra.kind is None) if expected is None else isinstance(r.extra.kind, expected)
    assert r.extra.other == {}  # every key of extra read into a typed field
    assert r.config.other == {} and r.config.torch is not None and r.config.gpu is not None
    assert text_of(r)  # and every view of it draws


def test_typed_figures_agree_with_the_rest_of_the_document() -> None:
    found = load("batch-finder.json").extra.of(BatchFinderExtra)
    assert found is not None
    assert found.max_batch_fit == found.recommended_batch == 4 and found.limit == "cap"
    assert (found.probes, found.probes_fit, found.probes_failed) == (2, 2, 0)

    sweep = load("cnn-train-sweep.json")
    swept = sweep.extra.of(SweepExtra)
    assert swept is not None and swept.sweep_sizes == (2, 4)
    assert swept.best_batch == sweep.batch_size == 4

    acc = load("train-to-accuracy.json")
    tta = acc.extra.of(AccuracyExtra)
    assert tta is not None and not tta.reached and tta.stopped_by == "steps"
    assert tta.curve[-1] == (acc.steps, round(tta.final_accuracy, 4))

    ddp = load("cnn-train-ddp-scaling.json")
    d = ddp.extra.of(DdpExtra)
    assert d is not None and d.scaling is not None and d.allreduce is not None
    assert sum(d.per_rank_samples) == ddp.samples
    assert d.scaling.efficiency == pytest.approx(
        d.scaling.total / (d.scaling.world_size * d.scaling.baseline_value))

    for name, cls in (("matmul.json", MatmulExtra), ("membw.json", MembwExtra)):
        r = load(name)
        record = r.extra.of(cls)
        assert record is not None
        per = record.tflops if isinstance(record, MatmulExtra) else record.gbps
        assert per == {p.label.split()[0]: p.throughput for p in r.points}

    prof = load("rnn-train-profile.json").extra.profile
    assert prof is not None and prof.activities == ("CPU",) and prof.top_ops
    assert prof.top_ops[0].self_cpu_ms >= prof.top_ops[-1].self_cpu_ms


def test_views_show_the_typed_figures_of_saved_files() -> None:
    out = text_of(load("batch-finder.json"))
    assert "largest batch that fits │ 4 (limit: cap)" in out
    assert "probes │ 2 (2 fit, 0 failed)" in out
    assert "recommended batch" in out
    ddp = text_of(load("cnn-train-ddp-scaling.json"))
    assert "7 % efficient on 2 ranks vs 20261129-005450-490-3763ce" in ddp
    assert "% of a step" in ddp and "per rank" in ddp
    table = profile_table(load("rnn-train-profile.json"))
    assert table is not None and table.row_count == 10


# --------------------------------------------------------------------------- GPU shapes
# extra as the kinds write it on CUDA (NVML's energy counter and clocks, a published
# reference), keys in the order they were written, on a saved CPU file's other fields.

ENERGY = {"source": "NVML total energy counter (mJ)", "window_s": 15.2, "joules": 10640.0,
          "samples": 48640, "min_window_s": 3.0, "note": None}
WINDOW = {"samples": 60, "window_s": 15.2, "clock_sm_mhz_mean": 1755.0,
          "clock_sm_mhz_min": 1620.0, "clock_mem_mhz_mean": 2619.0, "power_w_mean": 690.0,
          "power_w_max": 700.0, "power_limit_w": 700.0, "temp_c_max": 71.0,
          "throttle_mask": 4,
          "source": "NVML, sampled every 0.25 s by the worker during the timed loop"}
REFERENCE = {"text": "0.94× NVIDIA DeepLearningExamples, A100 80GB, AMP, batch 256",
             "ratio": 0.94, "value": 2470.0, "unit": "images/s", "source": "DLE",
             "reference": {"benchmark": "cnn-train", "model": "resnet50", "value": 2470.0}}
GPU_EXTRAS: dict[str, tuple[str, dict[str, Any]]] = {
    "train": ("cnn-train.json", {"energy": ENERGY, "gpu_window": WINDOW,
                                 "reference": REFERENCE}),
    "matmul": ("matmul.json", {
        "headline_point": "bf16 8192x8192x8192", "gpu_window": WINDOW,
        "tflops": {"fp32": 51.0, "tf32": 380.2, "fp16": 701.5, "bf16": 712.3},
        "best_shape": {"fp32": [8192, 8192, 8192], "bf16": [8192, 8192, 8192]},
        "peak_tflops": {"fp32": 67.0, "tf32": 494.7, "fp16": 989.4, "bf16": 989.4,
                        "fp8": 1978.9},
        "peak_source": "table", "peak_gpu": "H100 SXM", "reference": REFERENCE}),
    "ddp": ("cnn-train-ddp-scaling.json", {
        **json.loads((FILES / "cnn-train-ddp-scaling.json").read_text())["extra"],
        "energy": {"source": "NVML total energy counter (mJ), summed over ranks",
                   "per_rank_joules": [4100.5, 4088.0], "window_s": 12.5}}),
}


def _with_extra(name: str, extra: dict[str, Any]) -> str:
    doc = json.loads((FILES / name).read_text())
    doc["extra"] = extra
    return json.dumps(doc, indent=2) + "\n"


@pytest.mark.parametrize("case", sorted(GPU_EXTRAS))
def test_gpu_extras_load_typed_and_dump_back_byte_for_byte(case: str) -> None:
    name, extra = GPU_EXTRAS[case]
    raw = _with_extra(name, extra)
    r = Result.from_dict(json.loads(raw))
    assert results_store.dumps(r) == raw
    assert r.extra.other == {}
    energy = r.extra.energy.to_json() if r.extra.energy is not None else None
    assert energy == extra.get("energy")
    if "gpu_window" in extra:
        assert r.extra.gpu_window is not None and r.extra.gpu_window.throttle_mask == 4


def test_gpu_figures_reach_the_summary() -> None:
    name, extra = GPU_EXTRAS["train"]
    note = {**ENERGY, "joules": 5.0, "window_s": 1.5,
            "note": "timed window 1.50 s is shorter than 3 s; no energy figure is given"}
    r = Result.from_dict(json.loads(_with_extra(name, {**extra, "energy": note})))
    assert isinstance(r.extra.energy, EnergyNote)
    out = text_of(r)
    assert "energy note" in out and "shorter than 3 s" in out
    ddp = Result.from_dict(json.loads(_with_extra(*GPU_EXTRAS["ddp"])))
    assert isinstance(ddp.extra.energy, RanksEnergy) and ddp.extra.energy.note is None
    assert ddp.extra.energy.per_rank_joules == (4100.5, 4088.0)


def test_lm_infer_keys_keep_their_values_in_the_written_order() -> None:
    # lm-infer wrote its headline point after the energy keys; it is written where the
    # other kinds write it now: the same keys and values, in another order.
    extra = {"sweep_stopped": "batch 64: out of memory", "energy": ENERGY,
             "gpu_window": WINDOW, "headline_point": "batch 32",
             "peak_bandwidth": "none: the peak table has no row for this GPU"}
    r = Result.from_dict(json.loads(_with_extra("lm-infer-sweep.json", extra)))
    lm = r.extra.of(LmInferExtra)
    assert lm is not None and lm.sweep_stopped == "batch 64: out of memory"
    assert r.extra.headline_point == "batch 32" and r.extra.other == {}
    assert r.to_dict()["extra"] == extra


GPU_CONFIG = {
    "torch": {"cudnn_benchmark": True, "cudnn_deterministic": False,
              "deterministic_algorithms": False, "tf32_matmul": False, "tf32_cudnn": True,
              "allow_fp16_reduced_precision_reduction": True,
              "allow_bf16_reduced_precision_reduction": True,
              "float32_matmul_precision": "highest", "max_memory_allocated_bytes": 123456,
              "max_memory_reserved_bytes": 234567, "nccl_version": "2.27.3",
              "distributed_backend": None},
    "gpu": {"gpu_index": 0, "power_limit_default_w": 700.0, "power_limit_enforced_w": 700.0,
            "persistence_mode": True, "app_clock_sm_mhz": 1980, "app_clock_mem_mhz": 2619,
            "default_app_clock_sm_mhz": 1980, "default_app_clock_mem_mhz": 2619,
            "app_clocks_changed": False, "ecc_mode": True, "mig_mode": False,
            "compute_mode": "Default", "pcie_gen": 5, "pcie_gen_max": 5, "pcie_width": 16,
            "pcie_width_max": 16, "clock_sm_max_mhz": 1980, "clock_mem_max_mhz": 2619},
    "topology": None,
}


@pytest.mark.parametrize("config", [
    GPU_CONFIG,
    {**GPU_CONFIG, "torch": {"error": "RuntimeError: no CUDA context"}},
    {"torch": GPU_CONFIG["torch"]},  # the worker's own document: the runner adds the rest
    {**GPU_CONFIG, "topology": {"gpus": [{"rank": 0, "uuid": "GPU-a", "nvml_index": 0}],
                                "pairs": [], "source": "NVML"}},
    {},
])
def test_config_loads_typed_and_dumps_back_byte_for_byte(config: dict[str, Any]) -> None:
    doc = json.loads((FILES / "cnn-train.json").read_text())
    doc["config"] = config
    raw = json.dumps(doc, indent=2) + "\n"
    r = Result.from_dict(json.loads(raw))
    assert results_store.dumps(r) == raw and r.config.other == {}
    assert (r.config.gpu is None) == ("gpu" not in config)


def test_gpu_config_reaches_the_summary() -> None:
    doc = json.loads((FILES / "cnn-train.json").read_text())
    doc["config"] = GPU_CONFIG
    out = text_of(Result.from_dict(doc))
    assert "power limit │ 700 W enforced (default 700 W)" in out
    assert "persistence on, ECC on, MIG off, compute mode Default" in out
    assert "PCIe link │ gen 5 x16 (max gen 5 x16)" in out
    assert "memory peaks │ allocated" in out and "NCCL │ 2.27.3" in out


def test_odd_config_halves_are_kept_as_read() -> None:
    doc = json.loads((FILES / "cnn-train.json").read_text())
    odd = {"torch": {**GPU_CONFIG["torch"], "a_later_switch": True},
           "gpu": {**GPU_CONFIG["gpu"], "pcie_gen": "five"}, "topology": 3}
    doc["config"] = odd
    r = Result.from_dict(doc)
    assert r.config.torch is None and r.config.gpu is None and r.config.other == odd
    assert r.to_dict()["config"] == odd
    assert "PCIe link" not in text_of(r)


# --------------------------------------------------------------------------- odd files


def test_odd_extra_keys_are_kept_as_read_and_shown_nowhere() -> None:
    doc = json.loads((FILES / "batch-finder.json").read_text())
    odd = {**doc["extra"], "probes": "two", "from_a_later_version": {"x": [1, 2]},
           "energy": "not an object", "headline_point": None}
    doc["extra"] = odd
    r = Result.from_dict(doc)
    assert r.extra.kind is None and r.extra.energy is None  # did not decode
    assert r.extra.other == odd
    assert r.to_dict()["extra"] == odd
    out = text_of(r)
    assert "largest batch that fits │ none (limit: N/A)" in out and "two" not in out


def test_a_partial_record_keeps_its_keys() -> None:
    doc = json.loads((FILES / "cnn-train.json").read_text())
    doc["extra"] = {"allreduce": {"ms": 1.0, "bytes": 8, "step_ms": 2.0, "share_of_step": 0.5,
                                  "definition": "d"}}  # no per-rank figures
    r = Result.from_dict(doc)
    assert r.extra.kind is None and r.to_dict()["extra"] == doc["extra"]


# --------------------------------------------------------------------------- the builder


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
        "error": None, "extra": {"reference": None, "energy": ENERGY},
        "window": {"readings": 4, "seconds": 2.0, "sample_hz": 2.0,
                   "throttle_reasons": [], "throttled_fraction": 0.0},
        "config": {"gpu": {"gpu_index": 0}, "topology": None},
    }
    result = Result.from_dict(doc)
    assert isinstance(result.throughput, Throughput) and isinstance(result.window, WindowStats)
    assert isinstance(result.latency_ms, Spread)
    assert isinstance(result.extra.energy, EnergyNote)
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
