"""Probes (matmul, membw, batch-finder) and train-to-accuracy."""

from __future__ import annotations

from .worker_helpers import check_ok, run_worker


def test_matmul_points_per_dtype() -> None:
    run = run_worker({"benchmark": "matmul", "device": "cpu", "steps": 3, "warmup": 1,
                      "threads": 1})
    doc = check_ok(run)
    labels = [p["label"] for p in doc["points"]]
    assert labels == ["fp32", "bf16"]
    for p in doc["points"]:
        assert p["unit"] == "TFLOP/s" and p["throughput"] > 0
        assert p["pct_of_peak"] is None  # no known peak for a CPU
    assert doc["throughput"]["unit"] == "TFLOP/s"
    assert doc["throughput"]["median"] == doc["extra"]["tflops"]["fp32"]
    assert doc["extra"]["peak_tflops"] is None
    assert doc["settings"]["size"] > 0


def test_membw_copy_and_triad() -> None:
    run = run_worker({"benchmark": "membw", "device": "cpu", "steps": 3, "warmup": 1})
    doc = check_ok(run)
    assert [p["label"] for p in doc["points"]] == ["copy", "triad"]
    for p in doc["points"]:
        assert p["unit"] == "GB/s" and p["throughput"] > 0
    assert doc["throughput"]["unit"] == "GB/s"
    assert doc["settings"]["array_bytes"] >= 32 << 20  # far beyond any L2


def test_batch_finder_caps_on_cpu() -> None:
    run = run_worker({"benchmark": "batch-finder", "device": "cpu", "model": "resnet18",
                      "image_size": 32, "batch_size": 4, "steps": 2, "warmup": 0,
                      "threads": 1})
    doc = check_ok(run)
    assert [p["batch_size"] for p in doc["points"]] == [2, 4]
    assert all(p["ok"] and p["throughput"] > 0 for p in doc["points"])
    assert doc["extra"]["max_batch_fit"] == 4 == doc["batch_size"]
    assert doc["extra"]["limit"] == "cap"
    assert doc["settings"]["memory_budget_bytes"] > 0


def test_train_to_accuracy_reaches_target() -> None:
    run = run_worker({"benchmark": "train-to-accuracy", "device": "cpu", "seed": 0})
    doc = check_ok(run)
    ex = doc["extra"]
    assert ex["reached"] is True
    assert ex["final_accuracy"] >= ex["target_accuracy"]
    assert ex["steps_to_target"] == doc["steps"] > 0
    assert ex["time_to_target_s"] > 0
    assert ex["curve"][-1][1] >= ex["target_accuracy"]
    assert doc["throughput"]["unit"] == "images/s"
