"""Inference benchmarks: single-stream latency, offline throughput, batch-size sweep."""

from __future__ import annotations

import torch

from gputui.bench.worker.workloads import build_cnn

from .worker_helpers import check_ok, run_worker


def _ordered(lat: dict[str, float]) -> None:
    assert lat["p50"] <= lat["p90"] <= lat["p99"]
    assert lat["mean"] > 0


def test_cnn_infer_latency_mobilenet() -> None:
    run = run_worker({"benchmark": "cnn-infer", "device": "cpu",
                      "model": "mobilenet_v3_large", "mode": "latency", "image_size": 32,
                      "steps": 8, "warmup": 1, "threads": 1})
    doc = check_ok(run)
    assert doc["batch_size"] == 1  # single-stream
    assert doc["settings"]["mode"] == "latency"
    _ordered(doc["latency_ms"])
    assert doc["throughput"]["unit"] == "images/s"
    assert doc["steps"] == 8 and doc["phases_ms"] is None
    assert run.of("progress")[-1]["step"] == 8


def test_rnn_infer_sweep_points_and_best_batch() -> None:
    run = run_worker({"benchmark": "rnn-infer", "device": "cpu", "model": "lstm",
                      "sweep": True, "batch_size": 4, "seq_len": 8, "steps": 3, "warmup": 1,
                      "threads": 1})
    doc = check_ok(run)
    pts = doc["points"]
    assert [p["batch_size"] for p in pts] == [1, 2, 4]
    assert all(p["ok"] and p["unit"] == "tokens/s" and p["throughput"] > 0 for p in pts)
    for p in pts:
        assert p["latency_ms"] is None  # queued batches: a step time, not a latency
        _ordered(p["step_time_ms"])
    best = max(pts, key=lambda p: p["throughput"])
    assert doc["extra"]["best_batch"] == best["batch_size"] == doc["batch_size"]
    assert [e["batch_size"] for e in run.of("point")] == [1, 2, 4]


def test_cnn_infer_throughput_records_step_time_not_latency() -> None:
    run = run_worker({"benchmark": "cnn-infer", "device": "cpu", "model": "resnet18",
                      "mode": "throughput", "image_size": 32, "batch_size": 4, "steps": 3,
                      "warmup": 1, "threads": 1})
    doc = check_ok(run)
    assert doc["samples"] == 12
    # Offline batches are queued back to back: their spacing is a step time.
    assert doc["latency_ms"] is None
    _ordered(doc["step_time_ms"])
    assert "not measured" in doc["settings"]["latency"]


def test_vit_b_16_builds_at_small_image_size() -> None:
    # Too slow to benchmark on CPU in a test; construction + one forward checks the wiring.
    model = build_cnn("vit_b_16", 32).eval()
    with torch.inference_mode():
        out = model(torch.randn(1, 3, 32, 32))
    assert out.shape == (1, 1000)


def test_rnn_infer_latency_mode() -> None:
    run = run_worker({"benchmark": "rnn-infer", "device": "cpu", "mode": "latency",
                      "seq_len": 8, "steps": 6, "warmup": 1, "threads": 1})
    doc = check_ok(run)
    assert doc["model"] == "lstm" and doc["batch_size"] == 1
    assert doc["settings"]["mode"] == "latency" and "single-stream" in doc["settings"]["latency"]
    _ordered(doc["latency_ms"])
    assert doc["steps"] == 6 and doc["samples"] == 6 * 8  # tokens: 1 sequence × 8
    assert doc["throughput"]["unit"] == "tokens/s"
    assert doc["throughput"]["mean"] > 0 and doc["phases_ms"] is None
    assert sum(p["samples"] for p in run.of("progress")) == 48


def test_an_explicit_grid_sweeps_exactly_those_batch_sizes() -> None:
    run = run_worker({"benchmark": "rnn-infer", "device": "cpu", "model": "lstm",
                      "batch_sizes": [3, 1], "seq_len": 8, "steps": 2, "warmup": 1,
                      "threads": 1})
    doc = check_ok(run)
    assert [p["batch_size"] for p in doc["points"]] == [1, 3]
    assert doc["extra"]["sweep_sizes"] == [1, 3]
    assert doc["settings"]["batch_sizes"] == [1, 3] and doc["settings"]["sweep"] is True
