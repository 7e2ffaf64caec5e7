"""Hand-built snapshots and small Pilot helpers for the UI tests (no NVML, no timers)."""

from __future__ import annotations

import io
from dataclasses import replace
from datetime import UTC, datetime, timedelta

from rich.console import Console
from textual.app import App

from gputui.telemetry.model import (
    DeviceInfo,
    GpuProcess,
    GpuSample,
    HostSample,
    Snapshot,
    SystemInfo,
)
from gputui.telemetry.sampler import Sampler
from gputui.ui.app import GputuiApp
from gputui.ui.options import AppOptions

T0 = datetime(2026, 3, 14, 9, 26, 53, tzinfo=UTC)
GIB = 2**30


def device(index: int, name: str = "NVIDIA A100-SXM4-80GB") -> DeviceInfo:
    return DeviceInfo(index=index, name=name, uuid=f"GPU-{index:08d}-0000-0000-0000-000000000000",
                      pci_bus_id=f"00000000:{0x3B + 0x23 * index:02X}:00.0",
                      mem_total_bytes=80 * GIB, temp_slowdown_c=85, temp_shutdown_c=92,
                      clock_sm_max_mhz=1980, clock_mem_max_mhz=1593)


def gpu(index: int, t: float = 0.0, **kw: object) -> GpuSample:
    """A busy, healthy GPU whose utilisation moves a little with t (deterministically)."""
    base: dict[str, object] = dict(
        info=device(index), util_gpu_pct=60 + (int(t) * 7 + index * 13) % 35,
        util_mem_pct=30 + (int(t) * 3) % 20, mem_used_bytes=(20 + index * 10) * GIB,
        mem_total_bytes=80 * GIB, power_w=250.0 + (int(t) * 11) % 60, power_limit_w=400.0,
        temp_c=62 + (int(t) % 5), fan_pct=45, clock_sm_mhz=1980, clock_mem_mhz=1593, pstate=0,
        throttle_mask=0)
    base.update(kw)
    return GpuSample(**base)  # type: ignore[arg-type]


def throttled(index: int, t: float = 0.0) -> GpuSample:
    return gpu(index, t, throttle_mask=0x40, temp_c=88, clock_sm_mhz=945, util_gpu_pct=99)


def lost(index: int) -> GpuSample:
    return GpuSample(info=device(index), lost=True, error="GPU is lost")


def host(**kw: object) -> HostSample:
    base: dict[str, object] = dict(
        hostname="trainbox", cpu_pct=37.5, cpu_per_core_pct=(12.0, 88.0, 45.0, 3.0, 60.0, 71.0,
                                                               20.0, 99.0),
        mem_used_bytes=21 * GIB, mem_total_bytes=64 * GIB, swap_used_bytes=GIB // 2,
        swap_total_bytes=8 * GIB, load_avg=(3.1, 2.75, 2.5))
    base.update(kw)
    return HostSample(**base)  # type: ignore[arg-type]


def proc(pid: int, gpu_index: int = 0, mem_gib: float = 10, **kw: object) -> GpuProcess:
    base: dict[str, object] = dict(
        gpu_index=gpu_index, pid=pid, gpu_mem_bytes=int(mem_gib * GIB), user="alice",
        command=f"python train.py --run {pid}", cpu_pct=98.0, rss_bytes=6 * GIB,
        started=(T0 - timedelta(hours=1, minutes=5)).timestamp())
    base.update(kw)
    return GpuProcess(**base)  # type: ignore[arg-type]


def snap(t: float, gpus: list[GpuSample], procs: list[GpuProcess] | None = None,
         **kw: object) -> Snapshot:
    base: dict[str, object] = dict(
        time=T0 + timedelta(seconds=t), mono=float(t),
        system=SystemInfo("550.54.15", "12.550.54.15", "12.4"), host=host(),
        gpus=tuple(gpus), processes=tuple(procs or ()), seq=int(t) + 1)
    base.update(kw)
    return Snapshot(**base)  # type: ignore[arg-type]


def feed(sampler: Sampler, t0: int, t1: int, make: object) -> Snapshot:
    """Ingest snapshots for t in [t0, t1); `make(t)` builds each one. Returns the last."""
    last = None
    for t in range(t0, t1):
        last = make(t)  # type: ignore[operator]
        sampler.ingest(last)
    assert last is not None
    return last


def screen_text(app: App[object]) -> str:
    """The screen as plain text (what a person would read), for assertions."""
    width, height = app.size
    console = Console(width=width, height=height, file=io.StringIO(), force_terminal=True,
                      color_system=None, record=True, legacy_windows=False)
    console.print(app.screen._compositor.render_update(
        full=True, screen_stack=app._background_screens))
    return console.export_text()


def spy_notifications(app: App[object]) -> list[tuple[str, str]]:
    """Record (severity, message) of every notify() call: toasts expire, this list does not."""
    seen: list[tuple[str, str]] = []
    real = app.notify

    def notify(message: str, *args: object, **kwargs: object) -> None:
        seen.append((str(kwargs.get("severity", "information")), message))
        real(message, *args, **kwargs)  # type: ignore[arg-type]

    app.notify = notify  # type: ignore[method-assign]
    return seen


__all__ = ["GIB", "T0", "device", "feed", "gpu", "host", "lost", "proc", "replace",
           "screen_text", "snap", "spy_notifications", "throttled"]


def make_app(sampler: Sampler | None = None, **options: object) -> tuple[GputuiApp, Sampler]:
    """The monitor app over a sampler that is fed by hand (no NVML, not started): the
    test posts frames with ``feed``."""
    sampler = sampler or Sampler(interval=1.0, nvml=None)
    app = GputuiApp(AppOptions(**options), sampler=sampler)  # type: ignore[arg-type]
    return app, sampler
