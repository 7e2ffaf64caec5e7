"""One row per host: the figures the hosts-first fleet view shows, and the fleet's totals.

A `HostSummary` comes from one of two places: Prometheus' per-host aggregates
(`host_queries`), or, reading the hosts directly, `summarize` over a host's GPUs. Both
use the definitions here (what "busy", "idle holding memory" and "hot" mean), so a host
reads the same either way. `None` means the source did not say (N/A, never 0); the
figures only Prometheus can give — XIDs in the last hour, firing alerts, the hour's
utilisation — are None when the hosts are read directly.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace

from gputui.fleet.model import FleetGpu, FleetHost, HostState, HostSummary
from gputui.telemetry.throttle import THROTTLE_MASK, is_throttling

# A GPU below this utilisation is idle; at or above it, busy.
IDLE_BELOW_PCT = 5.0
# A GPU "holds memory" from this much on: more than a bare CUDA context, less than any
# model a job has loaded.
HELD_MEMORY_BYTES = 1024**3
# An idle GPU counts as idle-but-allocated when its mean utilisation over this window is
# under IDLE_BELOW_PCT while it holds memory: a data-loading pause is not a problem.
IDLE_WINDOW_S = 300.0


def is_hot(temp_c: float | None, margin_c: float | None, hot_temp_c: float) -> bool:
    """At the slowdown temperature (margin 0 or less), or at the user's --hot."""
    if margin_c is not None and margin_c <= 0:
        return True
    return temp_c is not None and temp_c >= hot_temp_c


def _sum(values: Iterable[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return sum(known) if known else None


def summarize(host: FleetHost, hot_temp_c: float, *,
              idle_held: int | None = None) -> HostSummary:
    """A host read directly (its whole metrics page): the figures from its GPUs.

    `idle_held`: the GPUs idle for IDLE_WINDOW_S while holding memory, which takes the
    reads of that window (the poller keeps them); None where not known.
    """
    base = HostSummary(target=host.target, name=host.name, state=host.state,
                       error=host.error, last_seen=host.last_seen)
    if host.state is not HostState.UP:
        return base
    reading = host.reading
    gpus = host.gpus
    if not gpus:
        return replace(base, no_gpu_data=reading.nvml_error or "no GPUs reported")
    live = [g for g in gpus if not g.lost and not g.stale]
    utils = [g.util_pct for g in live if g.util_pct is not None]
    temps = [(g.temp_c, g) for g in live if g.temp_c is not None]
    hottest = max(temps, key=lambda t: t[0], default=None)
    margins = [g.slowdown_temp_c - g.temp_c for g in live
               if g.slowdown_temp_c is not None and g.temp_c is not None]
    margin = min(margins) if margins else None
    throttling = [g for g in live if is_throttling(g.throttle_mask)]
    mask = 0
    for g in throttling:
        mask |= (g.throttle_mask or 0) & THROTTLE_MASK
    hot_c = hottest[0] if hottest else None
    return replace(
        base, gpus=len(gpus),
        busy=sum(1 for u in utils if u >= IDLE_BELOW_PCT) if utils else None,
        util_mean_pct=sum(utils) / len(utils) if utils else None,
        util_min_pct=min(utils) if utils else None,
        mem_used_bytes=_int(_sum(g.mem_used_bytes for g in live)),
        mem_total_bytes=_int(_sum(g.mem_total_bytes for g in live)),
        power_w=_sum(g.power_w for g in live),
        hottest_c=hot_c, hottest_gpu=hottest[1].gpu if hottest else None,
        margin_c=margin, hot=is_hot(hot_c, margin, hot_temp_c),
        throttling=len(throttling), throttle_mask=mask,
        lost=sum(1 for g in gpus if g.lost), stale=sum(1 for g in gpus if g.stale and not g.lost),
        idle_held=idle_held,
        jobs=len(reading.jobs) or None,
        samples_per_s=_sum(j.samples_per_s for j in reading.jobs),
        tokens_per_s=_sum(j.tokens_per_s for j in reading.jobs),
    )


def holds_memory(g: FleetGpu) -> bool:
    return g.mem_used_bytes is not None and g.mem_used_bytes >= HELD_MEMORY_BYTES


def _int(v: float | None) -> int | None:
    return None if v is None else int(v)
