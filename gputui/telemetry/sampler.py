"""Sampler: one background thread reads the sources at a fixed interval.

Each tick becomes an immutable Snapshot handed to subscribers; history lives in
bounded ring buffers that consumers read by copying a window under a lock, so
no consumer ever iterates a buffer the sampler thread is appending to.
"""

from __future__ import annotations

import math
import threading
import time
from collections import deque
from collections.abc import Callable
from datetime import UTC, datetime
from itertools import islice

from gputui.telemetry.host import HostSource
from gputui.telemetry.model import GpuSample, Snapshot, SystemInfo
from gputui.telemetry.throttle import ThrottleEpisode, ThrottleTracker

MIN_INTERVAL_S = 0.1
HISTORY_MIN_SECONDS = 15 * 60
HISTORY_MAX_POINTS = 9000  # bounds memory however long the monitor runs

# Metric name → how to read it from a sample. The UI draws these on fixed scales.
METRICS: dict[str, Callable[[GpuSample], float | None]] = {
    "util_gpu_pct": lambda g: g.util_gpu_pct,
    "util_mem_pct": lambda g: g.util_mem_pct,
    "mem_used_bytes": lambda g: g.mem_used_bytes,
    "power_w": lambda g: g.power_w,
    "temp_c": lambda g: g.temp_c,
    "clock_sm_mhz": lambda g: g.clock_sm_mhz,
}

Listener = Callable[[Snapshot], None]


def history_capacity(interval_s: float) -> int:
    return min(HISTORY_MAX_POINTS, max(60, math.ceil(HISTORY_MIN_SECONDS / interval_s) + 1))


class History:
    """Per-GPU, per-metric ring buffers of (monotonic time, value or NaN)."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self._lock = threading.Lock()
        self._times: deque[float] = deque(maxlen=capacity)
        self._series: dict[tuple[int, str], deque[float]] = {}

    def append(self, snap: Snapshot) -> None:
        with self._lock:
            self._times.append(snap.mono)
            n = len(self._times)
            for g in snap.gpus:
                for name, get in METRICS.items():
                    key = (g.index, name)
                    buf = self._series.get(key)
                    if buf is None:
                        # A GPU that appears later is padded so all series align with _times.
                        buf = deque([math.nan] * (n - 1), maxlen=self.capacity)
                        self._series[key] = buf
                    v = None if g.lost else get(g)
                    buf.append(math.nan if v is None else float(v))
            for buf in self._series.values():
                if len(buf) < n:
                    buf.append(math.nan)

    def clear(self) -> None:
        with self._lock:
            self._times.clear()
            self._series.clear()

    def __len__(self) -> int:
        return len(self._times)

    def window(self, gpu: int, metric: str, seconds: float,
               now: float | None = None) -> tuple[tuple[float, ...], tuple[float, ...]]:
        """Copy of (times, values) in the last `seconds`; NaN where unknown."""
        with self._lock:
            buf = self._series.get((gpu, metric))
            if buf is None or not self._times:
                return (), ()
            end = self._times[-1] if now is None else now
            count = 0
            for t in reversed(self._times):
                if t < end - seconds:
                    break
                count += 1
            times = tuple(islice(reversed(self._times), count))[::-1]
            values = tuple(islice(reversed(buf), count))[::-1]
        return times, values

    def buckets(self, gpu: int, metric: str, seconds: float, n: int,
                now: float | None = None, agg: str = "max") -> list[float | None]:
        """The last `seconds` split into `n` equal time buckets, oldest first.

        Fixed time buckets (not "last n points") keep a sparkline's time axis honest
        when ticks were skipped. Empty buckets are None.
        """
        times, values = self.window(gpu, metric, seconds, now)
        out: list[list[float]] = [[] for _ in range(n)]
        if not times or n <= 0:
            return [None] * max(n, 0)
        end = times[-1] if now is None else now
        start = end - seconds
        width = seconds / n
        for t, v in zip(times, values, strict=True):
            if math.isnan(v):
                continue
            i = min(n - 1, max(0, int((t - start) / width)))
            out[i].append(v)
        pick = max if agg == "max" else (lambda xs: sum(xs) / len(xs))
        return [pick(b) if b else None for b in out]


class Sampler:
    """Owns the sources, the history and the throttle tracker.

    `nvml` is an NvmlSource (already opened, or None when NVML is unavailable, with
    `nvml_error` saying why). Subscribers are called on the sampler thread; a UI
    must hop to its own loop (Textual: `call_from_thread`).
    """

    def __init__(self, *, interval: float = 1.0, nvml: object | None = None,
                 nvml_error: str | None = None, host: HostSource | None = None,
                 history_capacity_points: int | None = None) -> None:
        if not interval >= MIN_INTERVAL_S:
            raise ValueError(f"interval must be at least {MIN_INTERVAL_S} s")
        self.interval = interval
        self.nvml = nvml
        self.nvml_error = nvml_error
        self.host = host or HostSource()
        self.history = History(history_capacity_points or history_capacity(interval))
        self.tracker = ThrottleTracker()
        self.skipped_ticks = 0
        self._seq = 0
        self._latest: Snapshot | None = None
        self._listeners: list[Listener] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._started_episodes: list[ThrottleEpisode] = []

    @classmethod
    def open(cls, *, interval: float = 1.0, process_every: int | None = None,
             slow_every: int | None = None, fields: frozenset[str] | None = None) -> Sampler:
        """Open NVML if possible; a machine without it gets a host-only sampler."""
        from gputui.telemetry.nvml import ALL_FIELDS, NvmlSource, NvmlUnavailable

        # Process lists are expensive on real drivers (and serialise in the kernel
        # driver): refresh them about every 3 s, not every tick.
        every = process_every or max(1, round(3.0 / interval))
        slow = slow_every or max(1, round(10.0 / interval))
        src = NvmlSource(process_every=every, slow_every=slow,
                         fields=ALL_FIELDS if fields is None else fields)
        try:
            src.open()
        except NvmlUnavailable as exc:
            return cls(interval=interval, nvml=None, nvml_error=str(exc))
        return cls(interval=interval, nvml=src)

    @property
    def system(self) -> SystemInfo:
        return getattr(self.nvml, "system", SystemInfo())

    def subscribe(self, fn: Listener) -> None:
        with self._lock:
            self._listeners.append(fn)

    def unsubscribe(self, fn: Listener) -> None:
        with self._lock:
            if fn in self._listeners:
                self._listeners.remove(fn)

    @property
    def latest(self) -> Snapshot | None:
        return self._latest

    def episodes(self) -> tuple[ThrottleEpisode, ...]:
        with self._lock:
            return self.tracker.episodes()

    def ongoing(self) -> dict[int, ThrottleEpisode]:
        with self._lock:
            return self.tracker.ongoing()

    def read(self) -> Snapshot:
        """Read the sources once and build a Snapshot (does not record it)."""
        gpus: tuple[GpuSample, ...] = ()
        procs = ()
        if self.nvml is not None:
            gpus, procs = self.nvml.read()  # type: ignore[attr-defined]
            if procs:
                procs = self.host.describe(procs)
        host = self.host.read()
        with self._lock:
            self._seq += 1
            seq = self._seq
        return Snapshot(time=datetime.now(UTC), mono=time.monotonic(), system=self.system,
                        host=host, gpus=gpus, processes=procs, nvml_error=self.nvml_error,
                        seq=seq, skipped_ticks=self.skipped_ticks)

    def ingest(self, snap: Snapshot) -> list[ThrottleEpisode]:
        """Record a snapshot (live or replayed): history, throttle episodes, listeners."""
        self.history.append(snap)
        with self._lock:
            started = self.tracker.update(snap.gpus, snap.time, snap.mono)
            self._latest = snap
            listeners = list(self._listeners)
        for fn in listeners:
            try:
                fn(snap)
            except Exception:  # a broken consumer must not stop sampling for the others
                import logging

                logging.getLogger("gputui").exception("snapshot listener failed")
        return started

    def tick(self) -> Snapshot:
        snap = self.read()
        self.ingest(snap)
        return snap

    def reset(self) -> None:
        """Forget history and episodes (replay seeks backwards with this)."""
        self.history.clear()
        with self._lock:
            self.tracker = ThrottleTracker()
            self._latest = None

    # --- the thread ----------------------------------------------------------------------

    def start(self) -> None:
        if self._thread is not None:
            return
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="gputui-sampler", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None

    def close(self) -> None:
        self.stop()
        close = getattr(self.nvml, "close", None)
        if close is not None:
            close()

    def _run(self) -> None:
        next_at = time.monotonic()
        while not self._stop.is_set():
            try:
                self.tick()
            except Exception:
                import logging

                logging.getLogger("gputui").exception("sampler tick failed")
            next_at += self.interval
            now = time.monotonic()
            if now > next_at:
                # Slow NVML calls made us late: skip the missed ticks instead of
                # firing them back to back, and count them so the UI can say so.
                missed = int((now - next_at) // self.interval) + 1
                self.skipped_ticks += missed
                next_at += missed * self.interval
            self._stop.wait(max(0.0, next_at - time.monotonic()))
