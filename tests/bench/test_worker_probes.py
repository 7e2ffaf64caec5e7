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
    # The point, extra.tflops and the headline are one number: TFLOP ÷ timed seconds.
    assert doc["throughput"]["value"] == doc["extra"]["tflops"]["fp32"]
    assert doc["points"][0]["throughput"] == doc["throughput"]["value"]
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


def test_batch_finder_bisects_after_a_failure() -> None:
    # Probes above batch 5 fail as out of memory: 2, 4 fit, 8 fails, then bisection
    # 6 (fails) and 5 (fits). A process-lifetime memory peak would make every probe after
    # the first failure fail too; this one must end at 5.
    run = run_worker({"benchmark": "batch-finder", "device": "cpu", "model": "resnet18",
                      "image_size": 32, "batch_size": 16, "steps": 1, "warmup": 0,
                      "threads": 1, "test_hook": "oom", "params": {"oom_above_batch": 5}},
                     hooks=True)
    doc = check_ok(run)
    pts = doc["points"]
    assert [(p["batch_size"], p["ok"]) for p in pts] == [
        (2, True), (4, True), (8, False), (6, False), (5, True)]
    assert all("out of memory" in p["error"] for p in pts if not p["ok"])
    ex = doc["extra"]
    assert ex["max_batch_fit"] == 5 == doc["batch_size"]
    assert ex["first_failed_batch"] == 6 and ex["limit"] == "oom"
    assert (ex["probes"], ex["probes_fit"], ex["probes_failed"]) == (5, 3, 2)
    # steps/samples: timed ones over the probes that ran (1 step each at 2, 4 and 5).
    assert doc["steps"] == 3 and doc["samples"] == 2 + 4 + 5
    assert all(p["peak_memory_bytes"] > 0 for p in pts if p["ok"])
    assert "per probe" in doc["settings"]["probe_memory"]
    assert "ru_maxrss" not in doc["settings"]["probe_memory"]
    assert doc["throughput"]["median"] > 0


def test_train_to_accuracy_stops_at_exactly_the_step_bound() -> None:
    # The target cannot be reached: only --steps ends the run; 30 is not a multiple of
    # eval_every (25), so a whole-chunk loop would overshoot to 50.
    run = run_worker({"benchmark": "train-to-accuracy", "device": "cpu", "steps": 30,
                      "channels_last": True, "threads": 1,
                      "params": {"target_accuracy": 1.01, "val_samples": 64}})
    doc = check_ok(run)
    ex = doc["extra"]
    assert doc["steps"] == 30 and doc["samples"] == 30 * doc["batch_size"]
    assert [c[0] for c in ex["curve"]] == [25, 30]
    assert ex["reached"] is False and ex["stopped_by"] == "steps"
    assert doc["settings"]["max_steps"] == 30
    assert doc["settings"]["input_memory_format"] == "channels_last"
    assert run.of("progress")[-1]["step"] == 30


def test_train_to_accuracy_honours_duration() -> None:
    run = run_worker({"benchmark": "train-to-accuracy", "device": "cpu", "duration_s": 0.3,
                      "threads": 1, "params": {"target_accuracy": 1.01, "val_samples": 64}})
    doc = check_ok(run)
    ex = doc["extra"]
    assert ex["stopped_by"] == "duration" and ex["reached"] is False
    assert doc["settings"]["max_duration_s"] == 0.3 and doc["settings"]["max_steps"] is None
    assert doc["steps"] >= 1 and ex["curve"][-1][0] == doc["steps"]
