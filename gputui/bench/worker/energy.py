"""Energy per sample and NVML facts for the benchmark record (worker side).

NVML is reached only through `gputui.telemetry.nvml.NvmlSource` (the one module that
imports pynvml). torch's CUDA index and NVML's index can differ (CUDA_VISIBLE_DEVICES,
CUDA_DEVICE_ORDER), so the device is matched by UUID. Everything here degrades to None:
on CPU, without a driver, or when the counter is not supported.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import torch

from gputui.bench.clock_window import WindowSampler
from gputui.bench.extras import EnergyNote, GpuWindow

log = logging.getLogger("gputui.bench.worker.energy")


def torch_uuid(device: torch.device) -> str | None:
    if device.type != "cuda":
        return None
    try:
        props = torch.cuda.get_device_properties(device)
        uuid = str(props.uuid)
    except (AttributeError, RuntimeError):
        return None
    return uuid if uuid.lower().startswith("gpu-") else f"GPU-{uuid}"


class NvmlLink:
    """An NVML session for one torch device; every method returns None when unavailable."""

    def __init__(self, device: torch.device) -> None:
        self.device = device
        self._src: Any = None
        self._index: int | None = None
        uuid = torch_uuid(device)
        if uuid is None:
            return
        try:
            from gputui.telemetry.nvml import NvmlSource

            # The memory clock too: a result's clocks would show it as null otherwise.
            src = NvmlSource(process_every=1_000_000, slow_every=1_000_000,
                             fields={"energy", "clock_mem"})
            src.open()
        except Exception as exc:  # no driver, no pynvml, old API: the run goes on without
            log.info("NVML not available for energy: %s", exc)
            return
        index = src.index_of_uuid(uuid)
        if index is None:
            log.info("no NVML device with UUID %s", uuid)
            src.close()
            return
        self._src, self._index = src, index

    @property
    def available(self) -> bool:
        return self._src is not None

    def close(self) -> None:
        if self._src is not None:
            self._src.close()
            self._src = None

    def driver_version(self) -> str | None:
        return self._src.system.driver_version if self._src is not None else None

    def static_info(self) -> dict[str, Any] | None:
        if self._src is None or self._index is None:
            return None
        info = self._src.devices[self._index]
        return {"nvml_index": info.index, "uuid": info.uuid, "pci_bus_id": info.pci_bus_id,
                "clock_sm_max_mhz": info.clock_sm_max_mhz,
                "clock_mem_max_mhz": info.clock_mem_max_mhz}

    def clocks_now(self) -> dict[str, Any] | None:
        if self._src is None or self._index is None:
            return None
        try:
            # This device only: the worker samples it several times a second during a
            # timed loop, and on an 8-GPU node reading all of them would cost 8 times more.
            g, _ = self._src.read_device(self._index, slow=True, processes=False)
        except Exception as exc:
            log.info("NVML read failed: %s", exc)
            return None
        return {"clock_sm_mhz": g.clock_sm_mhz, "clock_mem_mhz": g.clock_mem_mhz,
                "temp_c": g.temp_c, "power_w": g.power_w,
                "power_limit_w": g.power_limit_w, "pstate": g.pstate,
                "throttle_mask": g.throttle_mask}

    def energy_mj(self) -> int | None:
        if self._src is None or self._index is None:
            return None
        try:
            return self._src.read_energy_mj(self._index)
        except Exception:
            return None


# NVML's energy counter has millijoule resolution but is refreshed only every ~20-100 ms,
# so the delta over a window is uncertain by up to one refresh period's worth of energy at
# each end. Below this window length that is several percent: no figure is better than a
# wrong one.
MIN_ENERGY_WINDOW_S = 3.0


@dataclass(frozen=True)
class EnergyReading:
    """What a timed loop used: the result's two energy fields (None where unavailable, or
    when the window was shorter than MIN_ENERGY_WINDOW_S), `note` for its extra.energy
    (None without NVML), and the GPU's window when the GPU was sampled (RunMeter)."""

    energy_j_per_sample: float | None = None
    avg_power_w: float | None = None
    note: EnergyNote | None = None
    window: GpuWindow | None = None


class EnergyMeter:
    """Counter delta over the timed window → J per sample and average W."""

    def __init__(self, link: Any | None, clock: Callable[[], float] = time.monotonic,
                 min_window_s: float = MIN_ENERGY_WINDOW_S) -> None:
        self.link = link
        self.clock = clock
        self.min_window_s = min_window_s
        self._e0: int | None = None
        self._t0 = 0.0

    def start(self) -> None:
        if self.link is None:
            return
        self._e0 = self.link.energy_mj()
        self._t0 = self.clock()

    def stop(self, samples: int) -> EnergyReading:
        if self.link is None:
            return EnergyReading()
        note = EnergyNote(source="NVML total energy counter (mJ)", window_s=None, joules=None,
                          samples=samples, min_window_s=self.min_window_s)
        if self._e0 is None:
            return EnergyReading(note=replace(
                note, note="energy counter not readable at the start of the timed loop"))
        e1 = self.link.energy_mj()
        dt = self.clock() - self._t0
        note = replace(note, window_s=dt)
        if e1 is None or e1 < self._e0 or dt <= 0:
            return EnergyReading(note=replace(
                note, note="energy counter not readable (or went backwards) at the end"))
        joules = (e1 - self._e0) / 1000.0
        note = replace(note, joules=joules)
        if dt < self.min_window_s:
            return EnergyReading(note=replace(
                note, note=f"timed window {dt:.2f} s is shorter than {self.min_window_s:g} s;"
                           " NVML's energy counter updates every 20-100 ms, so no energy "
                           "figure is given (run longer, e.g. --duration 10)"))
        return EnergyReading(energy_j_per_sample=joules / samples if samples > 0 else None,
                             avg_power_w=joules / dt, note=note)


class RunMeter:
    """The energy counter and the GPU window over one timed loop, started and stopped
    together; `stop()` gives the energy reading with the window in it."""

    def __init__(self, energy: EnergyMeter, window: WindowSampler) -> None:
        self.energy = energy
        self.window = window

    def start(self) -> None:
        self.energy.start()
        self.window.start()

    def stop(self, samples: int) -> EnergyReading:
        reading = self.energy.stop(samples)
        return replace(reading, window=self.window.stop())
