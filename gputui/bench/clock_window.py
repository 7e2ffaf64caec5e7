"""What the GPU did while a timed loop ran: clocks, power and temperature, sampled on a
background thread of the worker between `start()` and `stop()`.

A clock read before the warm-up sees an idle GPU (and its boost clock); what a number
depends on is the clock the GPU held under load, after seconds at its power limit. NVML
reads are host calls of well under a millisecond each, four a second: the GPU's queue is
far ahead of the host during a timed loop, so they do not slow what they observe.
Torch-free; degrades to None without NVML (CPU runs, no driver). The result keeps it as
`extra.gpu_window`; the parent's own view of the same loops is `bench.throttle_window`.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any, Protocol

from gputui.bench.extras import GpuWindow

SAMPLE_EVERY_S = 0.25
WINDOW_SOURCE = f"NVML, sampled every {SAMPLE_EVERY_S:g} s by the worker during the timed loop"


class ClockSource(Protocol):
    def clocks_now(self) -> dict[str, Any] | None: ...


def summarize(readings: list[dict[str, Any]], window_s: float) -> GpuWindow:
    def vals(key: str) -> list[float]:
        return [float(r[key]) for r in readings if r.get(key) is not None]

    def mean(xs: list[float]) -> float | None:
        return sum(xs) / len(xs) if xs else None

    sm, mem, power, temp = (vals("clock_sm_mhz"), vals("clock_mem_mhz"), vals("power_w"),
                            vals("temp_c"))
    masks = [int(r["throttle_mask"]) for r in readings if r.get("throttle_mask") is not None]
    limits = vals("power_limit_w")
    mask = 0
    for m in masks:
        mask |= m
    return GpuWindow(
        samples=len(readings), window_s=window_s, source=WINDOW_SOURCE,
        clock_sm_mhz_mean=mean(sm), clock_sm_mhz_min=min(sm) if sm else None,
        clock_mem_mhz_mean=mean(mem), power_w_mean=mean(power),
        power_w_max=max(power) if power else None,
        power_limit_w=limits[-1] if limits else None,
        temp_c_max=max(temp) if temp else None, throttle_mask=mask if masks else None)


class WindowSampler:
    """Samples `source.clocks_now()` every SAMPLE_EVERY_S on a daemon thread."""

    def __init__(self, source: ClockSource | None,
                 clock: Callable[[], float] = time.monotonic,
                 every_s: float = SAMPLE_EVERY_S) -> None:
        self.source = source
        self.clock = clock
        self.every_s = every_s
        self._readings: list[dict[str, Any]] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._t0 = 0.0

    def start(self) -> None:
        if self.source is None:
            return
        self._readings = []
        self._stop.clear()
        self._t0 = self.clock()
        self._thread = threading.Thread(target=self._run, name="gputui-gpu-window",
                                        daemon=True)
        self._thread.start()

    def _run(self) -> None:
        assert self.source is not None
        # The first read waits one period: at the very start the clocks still show the
        # ramp-up from the warm-up's sync.
        while not self._stop.wait(self.every_s):
            reading = self.source.clocks_now()
            if reading is not None:
                self._readings.append(reading)

    def stop(self) -> GpuWindow | None:
        if self._thread is None:
            return None
        self._stop.set()
        self._thread.join(timeout=5.0)
        self._thread = None
        if self.source is not None and not self._readings:
            # A window shorter than one period: one reading at its end is all there is.
            reading = self.source.clocks_now()
            if reading is not None:
                self._readings.append(reading)
        return summarize(self._readings, self.clock() - self._t0)


def window_text(window: GpuWindow | None) -> str | None:
    """'SM 1,755 MHz mean (min 1,620), memory 2,619 MHz, 690 W mean (max 700 W of 700 W),
    71 °C max' from a result's extra.gpu_window, or None."""
    if window is None or not window.samples:
        return None

    def mhz(v: float) -> str:
        return f"{v:,.0f} MHz"

    parts = []
    if window.clock_sm_mhz_mean is not None:
        part = f"SM {mhz(window.clock_sm_mhz_mean)} mean"
        if window.clock_sm_mhz_min is not None:
            part += f" (min {mhz(window.clock_sm_mhz_min)})"
        parts.append(part)
    if window.clock_mem_mhz_mean is not None:
        parts.append(f"memory {mhz(window.clock_mem_mhz_mean)}")
    if window.power_w_mean is not None:
        part = f"{window.power_w_mean:.0f} W mean"
        if window.power_w_max is not None:
            limit = window.power_limit_w
            part += f" (max {window.power_w_max:.0f} W"
            part += f" of {limit:.0f} W)" if limit else ")"
        parts.append(part)
    if window.temp_c_max is not None:
        parts.append(f"{window.temp_c_max:.0f} °C max")
    return ", ".join(parts) or None
