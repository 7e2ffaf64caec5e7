"""History: per-GPU, per-metric ring buffers for the sparklines (the view's side).

The monitor's UI owns one History, fed on its event loop from the frames the
sampler posts, and buckets it once per tick for every sparkline. Nothing else
keeps history: `watch`, `snapshot` and the exporter never pay for it.
"""

from __future__ import annotations

import bisect
import math
import threading
from array import array
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from gputui.telemetry.model import GpuSample, Snapshot

if TYPE_CHECKING:
    from gputui.telemetry.frame import Frame

HISTORY_MIN_SECONDS = 60 * 60  # the history view's longest window, at 1 Hz or slower
HISTORY_MAX_POINTS = 9000  # bounds memory however long the monitor runs

# Metric name → how to read it from a sample. The UI draws these on fixed scales.
METRICS: dict[str, Callable[[GpuSample], float | None]] = {
    "util_gpu_pct": lambda g: g.util_gpu_pct,
    "util_mem_pct": lambda g: g.util_mem_pct,
    "sm_active_pct": lambda g: g.sm_active_pct,
    "mem_used_bytes": lambda g: g.mem_used_bytes,
    "power_w": lambda g: g.power_w,
    # The highest draw within the tick: the driver's sub-second samples when read, else
    # the reading itself (panels and the history view draw it, so spikes show).
    "power_w_peak": lambda g: g.power_w if g.power_w_max is None else (
        g.power_w_max if g.power_w is None else max(g.power_w, g.power_w_max)),
    "temp_c": lambda g: g.temp_c,
    "clock_sm_mhz": lambda g: g.clock_sm_mhz,
}


def history_capacity(interval_s: float) -> int:
    return min(HISTORY_MAX_POINTS, max(60, math.ceil(HISTORY_MIN_SECONDS / interval_s) + 1))


class History:
    """Per-GPU, per-metric buffers of (monotonic time, value or NaN), the last
    `capacity` points of each.

    Plain `array('d')`s (8 bytes a point, where a deque of floats costs ~32) that grow
    to the capacity plus a slack of 1/16 and then drop their oldest points at once:
    appends stay O(1) amortised (one move of the window every capacity/16 appends), a
    window is one contiguous slice, found by bisection, and the memory stops growing
    once the window is full. (Trimming only at twice the capacity kept up to two windows:
    at 1 s the monitor's RSS went on growing for two hours instead of one, ~2.3 MB/h with
    8 GPUs, which looked like a leak in a soak.)
    """

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self._slack = max(16, capacity // 16)
        self._lock = threading.Lock()
        self._times = array("d")
        self._series: dict[tuple[int, str], array[float]] = {}
        self._appends = 0  # ever, never reset: a BucketLayout is valid for one value

    def _first(self) -> int:
        """Index of the oldest point still kept (older ones await the next trim)."""
        return max(0, len(self._times) - self.capacity)

    def append(self, snap: Snapshot) -> None:
        with self._lock:
            self._times.append(snap.mono)
            self._appends += 1
            n = len(self._times)
            for g in snap.gpus:
                # A stale reading repeats old values: a gap, not a flat line.
                gone = g.lost or g.stale
                for name, get in METRICS.items():
                    key = (g.index, name)
                    buf = self._series.get(key)
                    if buf is None:
                        # A GPU that appears later is padded so all series align with _times.
                        buf = self._series[key] = array("d", [math.nan] * (n - 1))
                    v = None if gone else get(g)
                    buf.append(math.nan if v is None else float(v))
            for buf in self._series.values():
                if len(buf) < n:
                    buf.append(math.nan)
            if n > self.capacity + self._slack:
                drop = n - self.capacity
                del self._times[:drop]
                for buf in self._series.values():
                    del buf[:drop]

    def take(self, frame: Frame) -> None:
        """Take in one frame: a replay's jump starts over from its catch-up snapshots."""
        if frame.reset:
            self.clear()
        for s in frame.catch_up:
            self.append(s)
        self.append(frame.snapshot)

    def clear(self) -> None:
        with self._lock:
            self._times = array("d")
            self._series.clear()

    def __len__(self) -> int:
        return len(self._times) - self._first()

    @property
    def appends(self) -> int:
        """Snapshots taken in since the start (a clear does not reset it)."""
        return self._appends

    def window(self, gpu: int, metric: str, seconds: float,
               now: float | None = None) -> tuple[tuple[float, ...], tuple[float, ...]]:
        """Copy of (times, values) in the last `seconds`; NaN where unknown."""
        with self._lock:
            buf = self._series.get((gpu, metric))
            if buf is None or not self._times:
                return (), ()
            end = self._times[-1] if now is None else now
            lo = bisect.bisect_left(self._times, end - seconds, self._first())
            return tuple(self._times[lo:]), tuple(buf[lo:])

    def layout(self, seconds: float, n: int, now: float | None = None) -> BucketLayout:
        """Which points fall in which of `n` equal time buckets over the last `seconds`:
        the same for every series (they share the times), so computed once per tick."""
        with self._lock:
            times = self._times
            total = len(times)
            if total == self._first() or n <= 0:
                return BucketLayout(self._appends, 0, ())
            end = times[-1] if now is None else now
            start = end - seconds
            width = seconds / n
            first = bisect.bisect_left(times, start, self._first())
            # Bucket i holds start + i*width <= t < start + (i+1)*width; the last also
            # holds t == end.
            edges = [bisect.bisect_left(times, start + i * width, first) for i in range(n)]
            edges.append(bisect.bisect_right(times, end, first))
        ranges = tuple((edges[i] - first, max(edges[i], edges[i + 1]) - first)
                       for i in range(n))
        return BucketLayout(self._appends, total - first, ranges)

    def buckets_with(self, lay: BucketLayout, gpu: int, metric: str,
                     agg: str = "max") -> list[float | None]:
        n = len(lay.ranges)
        with self._lock:
            buf = self._series.get((gpu, metric))
            if buf is None or not lay.count or self._appends != lay.appends:
                return [None] * n
            values = buf[len(buf) - lay.count:]
        pick = max if agg == "max" else (lambda xs: sum(xs) / len(xs))
        out: list[float | None] = []
        for lo, hi in lay.ranges:
            known = [v for v in values[lo:hi] if v == v]  # NaN: a gap
            out.append(pick(known) if known else None)
        return out

    def buckets(self, gpu: int, metric: str, seconds: float, n: int,
                now: float | None = None, agg: str = "max") -> list[float | None]:
        """The last `seconds` split into `n` equal time buckets, oldest first.

        Fixed time buckets (not "last n points") keep a sparkline's time axis honest
        when ticks were skipped. Empty buckets are None.
        """
        if n <= 0:
            return []
        return self.buckets_with(self.layout(seconds, n, now), gpu, metric, agg)


@dataclass(frozen=True, slots=True)
class BucketLayout:
    """Which of a window's points fall in each sparkline bucket."""

    appends: int  # History.appends when computed: any later append invalidates it
    count: int  # points in the window (the last `count`)
    ranges: tuple[tuple[int, int], ...]  # per bucket: [lo, hi) into the window's points


class TickBuckets:
    """Sparkline buckets computed once per tick and shared by every widget that draws
    the same (GPU, metric, window, width): call `next_tick()` when a frame arrives."""

    def __init__(self, history: History) -> None:
        self.history = history
        self._memo: dict[tuple[int, str, float, int, str], list[float | None]] = {}
        self._layouts: dict[tuple[float, int], BucketLayout] = {}

    def next_tick(self) -> None:
        self._memo.clear()
        self._layouts.clear()

    def buckets(self, gpu: int, metric: str, seconds: float, n: int,
                now: float | None = None, agg: str = "max") -> list[float | None]:
        if now is not None:
            return self.history.buckets(gpu, metric, seconds, n, now, agg)
        key = (gpu, metric, seconds, n, agg)
        got = self._memo.get(key)
        if got is None:
            lay = self._layouts.get((seconds, n))
            if lay is None or lay.appends != self.history.appends:
                lay = self._layouts[(seconds, n)] = self.history.layout(seconds, n)
            got = self._memo[key] = self.history.buckets_with(lay, gpu, metric, agg)
        return list(got)
