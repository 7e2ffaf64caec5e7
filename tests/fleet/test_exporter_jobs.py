"""Training jobs on /metrics: gputui_job_samples_per_second and ..._tokens_per_second, one
series per job and GPU it runs on, the same numbers as `snapshot --json`."""

from __future__ import annotations

import time

from prometheus_client.registry import CollectorRegistry

from gputui.fleet.exporter import SnapshotCollector, ThrottleAccounting
from gputui.fleet.exposition import render
from gputui.telemetry.model import JobReading, Snapshot
from tests.factories import gpu, snapshot
from tests.fleet.conftest import parse_page, value


def job(pid: int, gpus: tuple[int, ...], samples: float | None,
        tokens: float | None) -> JobReading:
    return JobReading(pid=pid, name=f"train-{pid}", gpus=gpus, step=10, samples=320,
                      tokens=0, samples_per_s=samples, tokens_per_s=tokens,
                      step_time_s=0.1, updated=None)


def serve(snap: Snapshot) -> str:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(SnapshotCollector(lambda: snap, ThrottleAccounting(lambda s: "node"),
                                        nvml_error=None, interval=1.0, hostname="node"))
    return render(registry.collect()).decode()


def test_each_job_is_served_per_gpu_with_its_rates() -> None:
    jobs = (job(100, (0, 1), 640.0, 327680.0), job(200, (), 12.5, None))
    page = serve(snapshot(0, [gpu(0), gpu(1)], jobs=jobs, mono=time.monotonic()))
    s = parse_page(page)
    for g in ("0", "1"):
        assert value(s, "gputui_job_samples_per_second", pid="100", job="train-100",
                     gpu=g) == 640.0
        assert value(s, "gputui_job_tokens_per_second", pid="100", job="train-100",
                     gpu=g) == 327680.0
    # No GPU known: one series with an empty gpu label; no tokens reported: no series.
    assert value(s, "gputui_job_samples_per_second", pid="200", job="train-200", gpu="") == 12.5
    assert not any(n == "gputui_job_tokens_per_second" and ("pid", "200") in labels
                   for n, labels in s)


def test_a_sampler_that_stopped_serves_no_job_rates() -> None:
    stale = snapshot(0, [gpu(0)], jobs=(job(100, (0,), 640.0, None),),
                     mono=time.monotonic() - 60)
    assert "gputui_job_samples_per_second" not in serve(stale)
