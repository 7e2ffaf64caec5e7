"""Hand-made telemetry records for tests that need no NVML at all."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

from gputui.telemetry.model import (
    DeviceInfo,
    GpuEvent,
    GpuProcess,
    GpuSample,
    HostSample,
    Snapshot,
    SystemInfo,
)

T0 = datetime(2026, 11, 21, 14, 2, 11, tzinfo=UTC)


def device(index: int = 0, **kw: object) -> DeviceInfo:
    base = dict(index=index, name=f"NVIDIA A100-SXM4-80GB #{index}",
                uuid=f"GPU-{index:08d}-aaaa-bbbb-cccc-000000000000",
                pci_bus_id=f"00000000:{0x3B + index:02X}:00.0", mem_total_bytes=80 * 2**30,
                temp_slowdown_c=85, temp_shutdown_c=92, clock_sm_max_mhz=1980,
                clock_mem_max_mhz=1593)
    base.update(kw)
    return DeviceInfo(**base)  # type: ignore[arg-type]


def gpu(index: int = 0, **kw: object) -> GpuSample:
    base = dict(info=device(index), util_gpu_pct=50, util_mem_pct=30,
                mem_used_bytes=10 * 2**30, mem_total_bytes=80 * 2**30, power_w=250.0,
                power_limit_w=400.0, temp_c=60, fan_pct=None, clock_sm_mhz=1410,
                clock_mem_mhz=1593, pstate=0, energy_j=1000.0, throttle_mask=0)
    base.update(kw)
    return GpuSample(**base)  # type: ignore[arg-type]


def snapshot(t: float, gpus: list[GpuSample] | tuple[GpuSample, ...], **kw: object) -> Snapshot:
    base = dict(time=T0 + timedelta(seconds=t), mono=1000.0 + t,
                system=SystemInfo("550.54.15", "12.550.54.15", "12.4"),
                host=HostSample(hostname="trainbox", cpu_pct=12.5, cpu_per_core_pct=(10.0, 15.0),
                                mem_used_bytes=8 * 2**30, mem_total_bytes=64 * 2**30,
                                swap_used_bytes=0, swap_total_bytes=2**30,
                                load_avg=(1.0, 0.5, 0.25)),
                gpus=tuple(gpus))
    base.update(kw)
    return Snapshot(**base)  # type: ignore[arg-type]


class HandSource:
    """A GPU source (gputui.telemetry.source.GpuSource) whose devices read what the test
    says: `sample(index)` and `processes(index)` are called on each read (override them)."""

    def __init__(self, devices: tuple[DeviceInfo, ...], *, slow_every: int = 1,
                 process_every: int = 1, system: SystemInfo | None = None) -> None:
        self._devices = devices
        self.slow_every, self.process_every = slow_every, process_every
        self.system = system or SystemInfo()
        self.closed = False

    @property
    def count(self) -> int:
        return len(self._devices)

    @property
    def devices(self) -> tuple[DeviceInfo, ...]:
        return self._devices

    def open_device(self, index: int) -> DeviceInfo:
        return self._devices[index]

    def sample(self, index: int) -> GpuSample:
        return gpu(index, info=self._devices[index])

    def processes(self, index: int) -> tuple[GpuProcess, ...]:
        return ()

    def read_device(self, index: int, *, slow: bool, processes: bool,
                    ) -> tuple[GpuSample, tuple[GpuProcess, ...] | None]:
        return self.sample(index), self.processes(index) if processes else None

    def take_events(self) -> tuple[GpuEvent, ...]:
        return ()

    def want_detail_fields(self, on: bool) -> None:
        pass

    def close(self) -> None:
        self.closed = True


__all__ = ["T0", "HandSource", "device", "gpu", "replace", "snapshot"]
