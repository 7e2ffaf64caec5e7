"""A GPU whose reader did not answer in time (or a sampler that stopped ticking) is never
served as current: its DCGM values are left out and `gputui_gpu_stale` says so — and the
fleet shows such a GPU as stale."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from pathlib import Path

from prometheus_client.registry import CollectorRegistry

from gputui.fleet.exporter import SnapshotCollector, ThrottleAccounting
from gputui.fleet.exposition import render
from gputui.fleet.model import FleetHost, FleetSnapshot, HostState
from gputui.fleet.scrape import parse_metrics
from gputui.fleet.view import host_rows
from gputui.telemetry.model import Snapshot
from tests.factories import gpu, snapshot
from tests.fakenvml.harness import derive_scenario
from tests.fleet.conftest import ExporterFactory, Series, parse_page, value, wait_for

INTERVAL = 1.0


def _serve(snap: Snapshot, accounting: ThrottleAccounting | None = None) -> str:
    accounting = accounting or ThrottleAccounting(lambda s: "node-s")
    registry = CollectorRegistry(auto_describe=False)
    registry.register(SnapshotCollector(lambda: snap, accounting, nvml_error=None,
                                        interval=INTERVAL, hostname="node-s"))
    return render(registry.collect()).decode()


def _gpus_with(series: Series, name: str) -> set[str]:
    return {dict(labels)["gpu"] for n, labels in series if n == name}


def test_a_stale_gpu_has_no_current_values_and_is_marked() -> None:
    snap = snapshot(0, [gpu(0, stale=True, stale_s=7.5), gpu(1)], mono=time.monotonic())
    page = _serve(snap)
    s = parse_page(page)
    assert value(s, "gputui_up") == 1  # telemetry flows: the other GPU is current
    assert value(s, "gputui_gpu_stale", gpu="0") == 1
    assert value(s, "gputui_gpu_stale", gpu="1") == 0
    for name in ("DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_GPU_TEMP", "DCGM_FI_DEV_POWER_USAGE",
                 "DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS"):
        assert _gpus_with(s, name) == {"1"}, name
    # ... and the fleet reading that page shows GPU 0 as stale, not as idle or 0 %.
    reading = parse_metrics(page)
    g0, g1 = reading.gpus
    assert (g0.stale, g0.util_pct, g0.temp_c) == (True, None, None)
    assert (g1.stale, g1.util_pct) == (False, 50)
    fleet = FleetSnapshot(time=datetime.now(UTC), source="targets", hosts=(
        FleetHost(target="n:1", url=None, state=HostState.UP, reading=reading),))
    row0, row1 = host_rows(fleet)
    assert row0.status == "stale" and row0.cells[-1] == "stale: its driver is not answering"
    assert row1.status == "ok"
    assert [(a.kind, a.gpu) for a in fleet.alerts()] == [("stale", "0")]


def test_a_sampler_that_stopped_ticking_serves_nothing_as_current() -> None:
    old = snapshot(0, [gpu(0), gpu(1)], mono=time.monotonic() - 60 * INTERVAL)
    s = parse_page(_serve(old))
    assert value(s, "gputui_up") == 0
    assert not any(n.startswith("DCGM_") for n, _ in s)
    assert value(s, "gputui_gpu_stale", gpu="0") == 1 and value(s, "gputui_gpu_stale", gpu="1") == 1
    assert value(s, "gputui_host_memory_total_bytes", hostname="node-s") == 64 * 2**30


def test_stale_ticks_add_no_throttle_time() -> None:
    accounting = ThrottleAccounting(lambda s: "node-s")
    hot = 0x40  # HW thermal slowdown
    accounting(snapshot(0, [gpu(0, throttle_mask=hot)]))
    accounting(snapshot(1, [gpu(0, throttle_mask=hot)]))  # 1 s throttled
    accounting(snapshot(2, [gpu(0, throttle_mask=hot, stale=True, stale_s=1.0)]))
    accounting(snapshot(3, [gpu(0, throttle_mask=hot, stale=True, stale_s=2.0)]))
    (_labels, episodes, seconds), = accounting.rows()
    assert episodes == 1
    assert seconds["hw_thermal_slowdown"] == 1.0  # the old reading is not evidence


def test_a_hung_gpu_is_exported_as_stale_while_the_other_stays_current(
        start_exporter: ExporterFactory, tmp_path: Path) -> None:
    # From its 3rd second on, every NVML call for GPU 0 never returns (a real driver does
    # this during an Xid storm); GPU 1 answers as usual.
    hung = derive_scenario("two_gpus", {"gpu.0.hang_from_s": 3}, tmp_path / "hung.conf")
    exp = start_exporter(hung, hostname="node-h", interval=0.5)
    s = wait_for(lambda: (p := exp.scrape()) and value(p, "gputui_gpu_stale", gpu="0") == 1
                 and p, 30, "GPU 0 to be reported stale")
    assert value(s, "gputui_gpu_stale", gpu="1") == 0
    assert _gpus_with(s, "DCGM_FI_DEV_GPU_UTIL") == {"1"}
    assert _gpus_with(s, "DCGM_FI_DEV_GPU_TEMP") == {"1"}
    assert value(s, "gputui_up") == 1
    later = exp.scrape()
    assert value(later, "gputui_gpu_stale", gpu="0") == 1  # and it stays so
    assert _gpus_with(later, "DCGM_FI_DEV_GPU_UTIL") == {"1"}
    assert exp.stop() == 0
