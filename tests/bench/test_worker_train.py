"""Training benchmarks through the real worker subprocess (CPU, tiny shapes)."""

from __future__ import annotations

from pathlib import Path

from gputui.bench.events import PHASES

from .worker_helpers import TINY_CNN, check_ok, run_worker


def test_cnn_train_resnet18() -> None:
    run = run_worker({"benchmark": "cnn-train", **TINY_CNN, "channels_last": True})
    doc = check_ok(run)
    assert doc["throughput"]["unit"] == "images/s"
    assert doc["throughput"]["median"] > 0
    assert doc["batch_size"] == 2
    assert doc["steps"] == 3 and doc["samples"] == 6
    assert set(PHASES) <= set(doc["phases_ms"])
    assert all(v >= 0 for v in doc["phases_ms"].values())
    assert "instrumented" in doc["settings"]["phases"]
    assert doc["latency_ms"] is None
    assert doc["settings"]["shapes"]["input"] == [2, 3, 32, 32]
    assert doc["settings"]["channels_last"] is True
    assert doc["settings"]["threads"] == 1
    assert doc["peak_memory_bytes"] > 0
    st = doc["step_time_ms"]
    assert st["p50"] <= st["p90"] <= st["p99"]
    assert [e["step"] for e in run.of("warmup")] == [1]
    prog = run.of("progress")
    assert prog and prog[-1]["step"] == 3 and prog[-1]["unit"] == "images/s"
    assert sum(p["samples"] for p in prog) == 6
    (phase,) = run.of("phase")
    assert phase["phases_ms"] == doc["phases_ms"]


def test_rnn_train_gru_bf16_autocast_with_profile(tmp_path: Path) -> None:
    run = run_worker({
        "benchmark": "rnn-train", "device": "cpu", "model": "gru", "precision": "bf16",
        "batch_size": 2, "seq_len": 8, "steps": 3, "warmup": 1, "threads": 1,
        "profile": True, "profile_dir": str(tmp_path),
    })
    doc = check_ok(run)
    assert doc["precision"] == "bf16"
    assert doc["settings"]["amp_dtype"] == "bfloat16"
    assert doc["settings"]["grad_scaler"] is False
    assert doc["throughput"]["unit"] == "tokens/s"
    assert doc["samples"] == 3 * 2 * 8  # tokens
    assert doc["settings"]["shapes"]["tokens"] == [2, 8]
    assert set(PHASES) <= set(doc["phases_ms"])
    prof = doc["extra"]["profile"]
    assert prof["top_ops"] and {"name", "count", "self_cpu_ms"} <= set(prof["top_ops"][0])
    assert Path(prof["trace_path"]).is_file()
    assert Path(prof["trace_path"]).parent == tmp_path


def test_cnn_train_sweep_end_to_end() -> None:
    run = run_worker({"benchmark": "cnn-train", **TINY_CNN, "batch_size": 4, "steps": 2,
                      "sweep": True})
    doc = check_ok(run)
    pts = doc["points"]
    assert [p["batch_size"] for p in pts] == [2, 4]  # training sweeps start at 2
    assert all(p["ok"] and p["unit"] == "images/s" and p["throughput"] > 0 for p in pts)
    assert all(p["latency_ms"] is None and p["peak_memory_bytes"] > 0 for p in pts)
    assert [p["samples"] for p in pts] == [4, 8]
    assert doc["steps"] == 4 and doc["samples"] == 12
    best = max(pts, key=lambda p: p["throughput"])
    assert doc["extra"]["best_batch"] == best["batch_size"] == doc["batch_size"]
    assert doc["extra"]["sweep_sizes"] == [2, 4]
