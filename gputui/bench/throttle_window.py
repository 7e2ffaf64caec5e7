"""The GPU's state over a benchmark's timed window, as the PARENT saw it.

The runner's throttle watcher samples NVML (reasons, SM and memory clock, power, power
limit, temperature) at 2 Hz while a CUDA run goes on; the worker's progress events say
when its timed loops ran. `window_stats` keeps the readings inside those loops and sums
them up: what the number was measured under. Sampling from the parent keeps NVML out of
the measured process, and a worker that hangs or dies still leaves the readings behind.

Means are of the readings (taken at a fixed interval, so they weight time evenly); the
throttled fraction is the share of readings whose clocks-event reasons include a
throttling one (telemetry.throttle: not idle, application or display clocks). Torch-free.
The worker's own samples of the same loops are `bench.clock_window`.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from gputui.telemetry.throttle import (
    is_throttling,
    mask_from_keys,
    reasons_of,
    throttle_words,
)

# A run throttled for more than this share of its timed window is flagged wherever its
# number is shown: the number says more about cooling or the power cap than the GPU.
THROTTLED_FLAG_FRACTION = 0.05
THROTTLED_MARK = "⚠ throttled"
# The window is read at least twice a second (the runner's own watcher ticks at this).
WINDOW_INTERVAL_S = 0.5
CLOCKS_SETTING_BIT = mask_from_keys(["applications_clocks_setting"])  # 0x2


@dataclass(frozen=True)
class Reading:
    """One NVML reading of one GPU (parent side); None where the device has no value."""

    t: float  # time.monotonic() of the reading
    gpu_index: int | None = None
    clock_sm_mhz: float | None = None
    clock_mem_mhz: float | None = None
    power_w: float | None = None
    power_limit_w: float | None = None
    temp_c: float | None = None
    throttle_mask: int | None = None


class TimedSpans:
    """When the worker's timed loops ran, in the parent's monotonic clock.

    Each progress event says how long its loop has run (`elapsed_s`): the loop began
    `elapsed_s` before the event arrived. A loop starts over (a new probe point, the next
    --repeat trial) when `elapsed_s` goes backwards.
    """

    def __init__(self) -> None:
        self._spans: list[tuple[float, float]] = []
        self._last_elapsed: float | None = None

    def progress(self, received_t: float, elapsed_s: float) -> None:
        start = received_t - max(0.0, elapsed_s)
        if self._spans and self._last_elapsed is not None and elapsed_s >= self._last_elapsed:
            self._spans[-1] = (self._spans[-1][0], received_t)
        else:
            self._spans.append((start, received_t))
        self._last_elapsed = elapsed_s

    @property
    def spans(self) -> tuple[tuple[float, float], ...]:
        return tuple(self._spans)


@dataclass(frozen=True)
class WindowStats:
    """The GPU's state over the timed window (the result's `window`)."""

    readings: int
    seconds: float  # the timed loops' total length
    sample_hz: float | None  # readings per second of timed window
    clock_sm_mhz_mean: float | None
    clock_sm_mhz_min: float | None
    clock_mem_mhz_mean: float | None
    clock_mem_mhz_min: float | None
    power_w_mean: float | None
    power_w_max: float | None
    power_limit_w: float | None  # the enforced limit (the lowest seen, if it moved)
    temp_c_mean: float | None
    temp_c_max: float | None
    throttle_reasons: tuple[str, ...]  # every throttling reason seen (telemetry.throttle keys)
    throttled_fraction: float | None  # share of readings with a throttling reason
    # Share of readings with clocks-event reason 0x2 (ApplicationsClocksSetting): clocks
    # held by an application-clocks (or, on drivers that report it so, locked-clocks)
    # setting. Not throttling. NVML has no getter for locked clocks, and NVML 13's header
    # marks this bit "no longer used": 0 on a current driver proves nothing (docs/benchmarks.md).
    clocks_setting_fraction: float | None = None

    @property
    def throttled(self) -> bool:
        f = self.throttled_fraction
        return f is not None and f > THROTTLED_FLAG_FRACTION

    def to_dict(self) -> dict[str, Any]:
        return {
            "readings": self.readings, "seconds": self.seconds, "sample_hz": self.sample_hz,
            "clock_sm_mhz_mean": self.clock_sm_mhz_mean,
            "clock_sm_mhz_min": self.clock_sm_mhz_min,
            "clock_mem_mhz_mean": self.clock_mem_mhz_mean,
            "clock_mem_mhz_min": self.clock_mem_mhz_min,
            "power_w_mean": self.power_w_mean, "power_w_max": self.power_w_max,
            "power_limit_w": self.power_limit_w,
            "temp_c_mean": self.temp_c_mean, "temp_c_max": self.temp_c_max,
            "throttle_reasons": list(self.throttle_reasons),
            "throttled_fraction": self.throttled_fraction, "throttled": self.throttled,
            "clocks_setting_fraction": self.clocks_setting_fraction,
            "source": "NVML, sampled by the runner (parent process) during the timed loops",
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> WindowStats:
        def num(key: str) -> float | None:
            v = d.get(key)
            return float(v) if isinstance(v, int | float) and not isinstance(v, bool) else None

        reasons = d.get("throttle_reasons")
        n = d.get("readings")
        return cls(
            readings=n if isinstance(n, int) and not isinstance(n, bool) else 0,
            seconds=num("seconds") or 0.0, sample_hz=num("sample_hz"),
            clock_sm_mhz_mean=num("clock_sm_mhz_mean"), clock_sm_mhz_min=num("clock_sm_mhz_min"),
            clock_mem_mhz_mean=num("clock_mem_mhz_mean"),
            clock_mem_mhz_min=num("clock_mem_mhz_min"),
            power_w_mean=num("power_w_mean"), power_w_max=num("power_w_max"),
            power_limit_w=num("power_limit_w"),
            temp_c_mean=num("temp_c_mean"), temp_c_max=num("temp_c_max"),
            throttle_reasons=tuple(str(r) for r in reasons)
            if isinstance(reasons, list | tuple) else (),
            throttled_fraction=num("throttled_fraction"),
            clocks_setting_fraction=num("clocks_setting_fraction"))


def _inside(t: float, spans: Sequence[tuple[float, float]]) -> bool:
    return any(a <= t <= b for a, b in spans)


def _mean(xs: list[float]) -> float | None:
    return sum(xs) / len(xs) if xs else None


def window_stats(readings: Iterable[Reading],
                 spans: Sequence[tuple[float, float]]) -> WindowStats | None:
    """The readings taken inside the timed spans, summed up; None when there were none."""
    inside = [r for r in readings if _inside(r.t, spans)]
    if not inside:
        return None

    def vals(name: str) -> list[float]:
        return [float(v) for r in inside if (v := getattr(r, name)) is not None]

    sm, mem, power = vals("clock_sm_mhz"), vals("clock_mem_mhz"), vals("power_w")
    limit, temp = vals("power_limit_w"), vals("temp_c")
    masks = [r.throttle_mask for r in inside if r.throttle_mask is not None]
    mask_or = 0
    for m in masks:
        mask_or |= m
    seconds = sum(b - a for a, b in spans)
    return WindowStats(
        readings=len(inside), seconds=seconds,
        sample_hz=len(inside) / seconds if seconds > 0 else None,
        clock_sm_mhz_mean=_mean(sm), clock_sm_mhz_min=min(sm) if sm else None,
        clock_mem_mhz_mean=_mean(mem), clock_mem_mhz_min=min(mem) if mem else None,
        power_w_mean=_mean(power), power_w_max=max(power) if power else None,
        power_limit_w=min(limit) if limit else None,
        temp_c_mean=_mean(temp), temp_c_max=max(temp) if temp else None,
        throttle_reasons=tuple(r.key for r in reasons_of(mask_or) if r.throttling),
        throttled_fraction=(sum(1 for m in masks if is_throttling(m)) / len(masks)
                            if masks else None),
        clocks_setting_fraction=(sum(1 for m in masks if m & CLOCKS_SETTING_BIT) / len(masks)
                                 if masks else None))


def window_words(w: WindowStats | None) -> str | None:
    """"SM 1,370 MHz mean (min 1,305), memory 2,619 MHz mean (min 2,619), 690 W mean
    (max 700 W of 700 W limit), 61 °C mean (max 64 °C), throttled 12 % (SW power cap)"."""
    if w is None:
        return None

    def mhz(v: float) -> str:
        return f"{v:,.0f} MHz"

    parts = []
    if w.clock_sm_mhz_mean is not None:
        parts.append(f"SM {mhz(w.clock_sm_mhz_mean)} mean (min {mhz(w.clock_sm_mhz_min or 0)})")
    if w.clock_mem_mhz_mean is not None:
        parts.append(f"memory {mhz(w.clock_mem_mhz_mean)} mean "
                     f"(min {mhz(w.clock_mem_mhz_min or 0)})")
    if w.power_w_mean is not None:
        limit = f" of {w.power_limit_w:.0f} W limit" if w.power_limit_w else ""
        parts.append(f"{w.power_w_mean:.0f} W mean (max {w.power_w_max or 0:.0f} W{limit})")
    if w.temp_c_mean is not None:
        parts.append(f"{w.temp_c_mean:.0f} °C mean (max {w.temp_c_max or 0:.0f} °C)")
    if w.throttled_fraction is not None:
        if w.throttle_reasons:
            why = throttle_words(mask_from_keys(list(w.throttle_reasons)))
            parts.append(f"throttled {w.throttled_fraction * 100:.0f} % ({why})")
        else:
            parts.append("never throttled")
    if w.clocks_setting_fraction:
        parts.append(f"clocks held by an application/locked-clocks setting "
                     f"{w.clocks_setting_fraction * 100:.0f} %")
    parts.append(f"{w.readings} readings over {w.seconds:.1f} s")
    return ", ".join(parts)


class WindowRecorder:
    """Keeps the readings of one GPU (or of all, `gpu_index` None) from a telemetry
    sampler's snapshots; subscribed to the sampler for the run's length."""

    def __init__(self, gpu_index: int | None) -> None:
        self.gpu_index = gpu_index
        self._lock = threading.Lock()
        self._readings: list[Reading] = []

    def __call__(self, snap: Any) -> None:
        """A sampler listener: called on the sampler's thread with each Snapshot."""
        got = [from_sample(g, snap.mono) for g in snap.gpus
               if not g.lost and not g.stale
               and (self.gpu_index is None or g.info.index == self.gpu_index)]
        with self._lock:
            self._readings.extend(got)

    def readings(self) -> list[Reading]:
        with self._lock:
            return list(self._readings)


def from_sample(g: Any, t: float) -> Reading:
    """A telemetry GpuSample → a Reading (units are already W, MHz, °C)."""
    return Reading(t=t, gpu_index=g.info.index, clock_sm_mhz=g.clock_sm_mhz,
                   clock_mem_mhz=g.clock_mem_mhz, power_w=g.power_w,
                   power_limit_w=g.power_limit_w, temp_c=g.temp_c,
                   throttle_mask=g.throttle_mask)

