"""`--nproc 2`: two Gloo ranks on CPU, throughput aggregated across them."""

from __future__ import annotations

from .worker_helpers import TINY_CNN, check_ok, run_worker


def test_ddp_two_gloo_ranks() -> None:
    run = run_worker({"benchmark": "cnn-train", **TINY_CNN, "nproc": 2, "steps": 4})
    doc = check_ok(run)
    s = doc["settings"]
    assert s["world_size"] == 2 and s["backend"] == "gloo"
    assert doc["steps"] == 4
    assert doc["samples"] == 4 * 2 * 2  # steps × per-rank batch × ranks
    assert len(doc["extra"]["per_rank_samples_per_s"]) == 2
    assert all(r > 0 for r in doc["extra"]["per_rank_samples_per_s"])
    assert doc["throughput"]["median"] > 0
    assert doc["phases_ms"] is not None
    assert sum(p["samples"] for p in run.of("progress")) == 16
