"""`--nproc 2`: two Gloo ranks on CPU, throughput aggregated across them."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from .worker_helpers import TINY_CNN, check_ok, run_worker


def test_ddp_two_gloo_ranks() -> None:
    run = run_worker({"benchmark": "cnn-train", **TINY_CNN, "nproc": 2, "steps": 4})
    doc = check_ok(run)
    s = doc["settings"]
    assert s["world_size"] == 2 and s["backend"] == "gloo"
    assert s["threads"] == s["threads_per_rank"] == 1  # what each rank ran with
    assert s["threads_total"] == 2
    assert s["rank_gpu_uuids"] == [None, None]  # gloo on the CPU: no GPU to name
    assert doc["steps"] == 4
    assert doc["samples"] == 4 * 2 * 2  # steps × per-rank batch × ranks
    ex = doc["extra"]
    assert ex["per_rank_samples"] == [8, 8]  # each rank's own, not the total
    rates = ex["per_rank_samples_per_s"]
    assert len(rates) == 2 and all(r > 0 for r in rates)
    # Ranks start together (barrier) and stop on the same step: their own rates add up to
    # the aggregate (all samples ÷ rank 0's wall time). Dividing the all-rank total by the
    # world size instead would give half of it.
    assert sum(rates) == pytest.approx(doc["throughput"]["mean"], rel=0.15)
    assert doc["throughput"]["median"] > 0
    assert doc["phases_ms"] is not None
    assert sum(p["samples"] for p in run.of("progress")) == 16


def _run_pids(root: psutil.Process) -> dict[int, str]:
    out = {}
    for p in root.children(recursive=True):
        try:
            out[p.pid] = " ".join(p.cmdline())
        except psutil.Error:
            pass
    return out


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux")
def test_ranks_die_with_a_killed_cli(tmp_path: Path) -> None:
    cli = subprocess.Popen(
        [sys.executable, "-m", "gputui", "bench", "run", "cnn-train", "--device", "cpu",
         "--model", "resnet18", "--image-size", "32", "--batch-size", "2", "--warmup", "1",
         "--threads", "1", "--nproc", "2", "--duration", "60", "--json"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        env={**os.environ, "GPUTUI_DATA_DIR": str(tmp_path)})
    tracked: dict[int, str] = {}
    try:
        root = psutil.Process(cli.pid)
        deadline = time.monotonic() + 120
        # Wait for the worker, both ranks and the resource tracker of the run.
        while time.monotonic() < deadline:
            tracked.update(_run_pids(root))
            ranks = [p for p, cmd in tracked.items() if "spawn_main" in cmd]
            trackers = [p for p, cmd in tracked.items() if "resource_tracker" in cmd]
            if len(ranks) == 2 and trackers:
                break
            time.sleep(0.1)
        assert len(ranks) == 2 and trackers, tracked
        # Let the ranks get into their training loop (each has imported torch and a rank
        # that is still starting exits by itself on a dead parent too).
        while time.monotonic() < deadline and not all(
                psutil.Process(p).cpu_times().user > 1.0 for p in ranks if _alive(p)):
            time.sleep(0.2)
        time.sleep(1.0)
        tracked.update(_run_pids(root))
        cli.send_signal(signal.SIGKILL)
        cli.wait(30)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and any(_alive(p) for p in tracked):
            time.sleep(0.2)
        left = {p: cmd for p, cmd in tracked.items() if _alive(p)}
        assert not left, f"processes of the run outlived the CLI: {left}"
    finally:
        for pid in tracked:
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)
        if cli.poll() is None:
            cli.kill()
