"""The GPU-source seam: what the sampler reads, whatever the vendor.

Two sources implement it: NVML for NVIDIA GPUs (`gputui.telemetry.nvml.NvmlSource`) and
amdgpu's kernel files for AMD GPUs (`gputui.telemetry.amd.AmdSource`). A box with both
gets one `Sources` over them: its GPUs in one list, NVIDIA's first, indexed 0…n−1 across
both (each device's `DeviceInfo.vendor` says whose it is).

The sampler reads every device on a reader thread of its own with a deadline per tick
(gputui.telemetry.readers): a source's `open_device` and `read_device` may block, and are
only ever called from that device's thread. Everything else is called from the sampler's
thread, or the caller's before sampling starts.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Protocol

from gputui.telemetry.model import DeviceInfo, GpuEvent, GpuProcess, GpuSample, SystemInfo

VENDORS = ("nvidia", "amd")


class SourceUnavailable(Exception):
    """A vendor's GPUs cannot be read at all; str() is the one line shown to the user."""


class GpuSource(Protocol):
    """One vendor's GPUs, opened (`open_system` has returned)."""

    @property
    def system(self) -> SystemInfo: ...

    @property
    def count(self) -> int: ...

    @property
    def devices(self) -> tuple[DeviceInfo, ...]:
        """Every device's static facts (a device not opened yet: its index only)."""
        ...

    @property
    def slow_every(self) -> int:
        """Ticks between reads of the slow fields (`read_device(slow=True)`)."""
        ...

    @property
    def process_every(self) -> int:
        """Ticks between reads of the processes (`read_device(processes=True)`)."""
        ...

    def open_device(self, index: int) -> DeviceInfo:
        """Read one device's static facts (on its reader thread; may block)."""
        ...

    def read_device(self, index: int, *, slow: bool, processes: bool,
                    ) -> tuple[GpuSample, tuple[GpuProcess, ...] | None]:
        """One device's sample, and its processes when `processes` (else None). A field
        the device lacks is None; a device that fails says so in `GpuSample.error`."""
        ...

    def take_events(self) -> tuple[GpuEvent, ...]:
        """Events (XID, ECC, clock changes) reported since the last call."""
        ...

    def want_detail_fields(self, on: bool) -> None:
        """Read the GPU detail screen's extra fields from the next tick on, or stop."""
        ...

    def close(self) -> None: ...


class Sources:
    """Several opened sources as one (a box with NVIDIA and AMD GPUs): their devices in
    order, renumbered 0…n−1. The sources are made with the same schedules (the sampler's
    `open` makes them), so a tick's `slow` and `processes` pass through as asked."""

    def __init__(self, sources: Sequence[GpuSource]) -> None:
        self.sources = tuple(sources)
        self._where: list[tuple[GpuSource, int, int]] = []  # global → (source, local, base)
        base = 0
        for src in self.sources:
            self._where += [(src, i, base) for i in range(src.count)]
            base += src.count
        self.slow_every = self.sources[0].slow_every if self.sources else 1
        self.process_every = self.sources[0].process_every if self.sources else 1
        systems = [s.system for s in self.sources]
        self.system = SystemInfo(
            driver_version=_first(s.driver_version for s in systems),
            nvml_version=_first(s.nvml_version for s in systems),
            cuda_driver_version=_first(s.cuda_driver_version for s in systems),
            amd_driver_version=_first(s.amd_driver_version for s in systems))

    @property
    def count(self) -> int:
        return len(self._where)

    @property
    def devices(self) -> tuple[DeviceInfo, ...]:
        out = []
        for src, local, base in self._where:
            out.append(_renumber(src.devices[local], base))
        return tuple(out)

    def open_device(self, index: int) -> DeviceInfo:
        src, local, base = self._where[index]
        return _renumber(src.open_device(local), base)

    def read_device(self, index: int, *, slow: bool, processes: bool,
                    ) -> tuple[GpuSample, tuple[GpuProcess, ...] | None]:
        src, local, base = self._where[index]
        sample, procs = src.read_device(local, slow=slow, processes=processes)
        if base == 0:
            return sample, procs
        sample = replace(sample, info=_renumber(sample.info, base))
        if procs is not None:
            procs = tuple(replace(p, gpu_index=p.gpu_index + base) for p in procs)
        return sample, procs

    def take_events(self) -> tuple[GpuEvent, ...]:
        out: list[GpuEvent] = []
        base = 0
        for src in self.sources:
            out += [replace(e, gpu_index=e.gpu_index + base) if base else e
                    for e in src.take_events()]
            base += src.count
        return tuple(out)

    def want_detail_fields(self, on: bool) -> None:
        for src in self.sources:
            src.want_detail_fields(on)

    def close(self) -> None:
        for src in self.sources:
            src.close()


def _renumber(info: DeviceInfo, base: int) -> DeviceInfo:
    return replace(info, index=info.index + base) if base else info


def _first(values: object) -> str | None:
    return next((v for v in values if isinstance(v, str) and v), None)  # type: ignore[attr-defined]
