"""Attribute a benchmark's throughput drop to the throttle episodes that overlapped it.

"throughput fell 18 % during HW thermal slowdown 14:02:11–14:05:23 on GPU 0": the
median of the progress windows inside an episode against the median of those outside
it. Plain Python (the parent side imports this; no torch).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from gputui.bench.stats import percentile
from gputui.telemetry.throttle import ThrottleEpisode


@dataclass(frozen=True, slots=True)
class ThroughputPoint:
    time: datetime  # wall-clock end of the progress window (as received by the parent)
    window_s: float
    throughput: float


@dataclass(frozen=True, slots=True)
class Attribution:
    episode: ThrottleEpisode
    inside: float | None  # median throughput during the episode
    outside: float | None  # median throughput outside any episode
    drop_pct: float | None  # positive: slower while throttled

    def text(self, unit: str = "") -> str:
        ep = self.episode
        start = f"{ep.start.astimezone():%H:%M:%S}"
        end = f"{ep.end.astimezone():%H:%M:%S}" if ep.end else "ongoing"
        where = f"during {ep.words} {start}–{end} on GPU {ep.gpu_index}"
        if self.drop_pct is None:
            return f"throttled {where} (not enough samples to measure the effect)"
        if self.drop_pct >= 0.5:
            return f"throughput fell {self.drop_pct:.0f} % {where}"
        if self.drop_pct <= -0.5:
            return f"throughput rose {-self.drop_pct:.0f} % {where}"
        return f"throughput unchanged {where}"


def in_episode(p: ThroughputPoint, ep: ThrottleEpisode, run_end: datetime) -> bool:
    """The one rule for "this progress window was throttled" (the attribution's, the live
    view's marks): its midpoint lies inside the episode (ongoing ones up to `run_end`)."""
    mid = p.time.timestamp() - p.window_s / 2
    end = (ep.end or run_end).timestamp()
    return ep.start.timestamp() <= mid <= end


def attribute(points: Sequence[ThroughputPoint], episodes: Sequence[ThrottleEpisode],
              run_end: datetime | None = None) -> list[Attribution]:
    if not episodes:
        return []
    end = run_end or (points[-1].time if points else episodes[-1].start)
    outside = [p.throughput for p in points
               if not any(in_episode(p, ep, end) for ep in episodes)]
    base = percentile(outside, 50)
    out = []
    for ep in episodes:
        inside = [p.throughput for p in points if in_episode(p, ep, end)]
        med = percentile(inside, 50)
        drop = None
        if med is not None and base:
            drop = 100.0 * (base - med) / base
        out.append(Attribution(ep, med, base, drop))
    return out
