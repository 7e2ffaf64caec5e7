"""The hosts-first table as plain strings: its columns, orders and filter, and the fleet's
summary line. Shared by the Textual view (which draws only the rows on screen) and
`fleet --once`; text from the hosts goes through `printable`, as in `view`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime

from gputui.fleet.model import FleetSummary, HostState, HostSummary, Problem, local_clock
from gputui.fleet.view import GIB
from gputui.safe_text import printable
from gputui.telemetry.throttle import throttle_words
from gputui.telemetry.units import NA, fmt_duration, fmt_per_s

BLOCKS = " ▁▂▃▄▅▆▇█"
HISTORY_POINTS = 12  # the history column's width in blocks (one per step of the window)


def spark(values: Sequence[float | None], vmax: float = 100.0) -> str:
    """One block per value on 0..vmax; a known 0 is the lowest block, unknown a space."""
    return "".join(" " if v is None else BLOCKS[max(1, min(8, round(v / vmax * 8)))]
                   for v in values)


def _pct(v: float | None) -> str:
    return NA if v is None else f"{v:.0f}"


def _power(w: float | None) -> str:
    if w is None:
        return NA
    return f"{w / 1000:.1f}kW" if w >= 1000 else f"{w:.0f}W"


def _mem(s: HostSummary) -> str:
    if s.mem_used_bytes is None:
        return NA
    total = f"/{s.mem_total_bytes / GIB:.0f}" if s.mem_total_bytes else ""
    return f"{s.mem_used_bytes / GIB:.0f}{total}G"


def _hottest(s: HostSummary) -> str:
    if s.hottest_c is None:
        return NA
    where = f" g{s.hottest_gpu}" if s.hottest_gpu else ""
    margin = "" if s.margin_c is None else f" {s.margin_c:+.0f}"
    return f"{s.hottest_c:.0f}°C{where}{margin}"


def _throttling(s: HostSummary) -> str:
    return f"{s.throttling} {throttle_words(s.throttle_mask)}" if s.throttling else ""


def _lost(s: HostSummary) -> str:
    parts = [f"{s.lost} lost"] if s.lost else []
    parts += [f"{s.stale} stale"] if s.stale else []
    return ", ".join(parts)


def _xids(s: HostSummary) -> str:
    return "" if not s.xids_1h else str(s.xids_1h)


def _jobs(s: HostSummary) -> str:
    if not s.jobs:
        return ""
    rate = s.samples_per_s if s.samples_per_s is not None else s.tokens_per_s
    unit = "smp/s" if s.samples_per_s is not None else "tok/s"
    return f"{s.jobs} · {fmt_per_s(rate)} {unit}" if rate is not None else str(s.jobs)


def _alerts(s: HostSummary) -> str:
    return ", ".join(a.name + (f"×{a.count}" if a.count > 1 else "") for a in s.alerts)


def _history(s: HostSummary) -> str:
    if s.history is None:
        return ""
    mean = s.history_mean_pct
    return spark(s.history) + " " + ("   " if mean is None else f"{mean:3.0f}")


def _busy(s: HostSummary) -> str:
    """Busy of the GPUs that answer, and how many of the idle ones hold memory."""
    if s.busy is None:
        return NA
    held = f" ({s.idle_held} held)" if s.idle_held else ""
    return f"{s.busy}/{s.gpus - s.lost - s.stale}{held}"


@dataclass(frozen=True, slots=True)
class HostColumn:
    key: str
    title: str
    width: int  # cells, the widest the column shows (longer text ends in "…")
    cell: Callable[[HostSummary], str]
    right: bool = False
    wraps: bool = False  # words: `fleet --once` may wrap it
    prometheus_only: bool = False  # a figure only Prometheus knows: hidden when reading hosts


COLUMNS: tuple[HostColumn, ...] = (
    HostColumn("gpus", "GPUs", 4, lambda s: str(s.gpus), right=True),
    HostColumn("busy", "Busy", 13, _busy),
    HostColumn("util", "Util avg/min", 12, lambda s: f"{_pct(s.util_mean_pct)}/"
               f"{_pct(s.util_min_pct)}%" if s.util_mean_pct is not None else NA, right=True),
    HostColumn("history", "Util, last hour", HISTORY_POINTS + 4, _history,
               prometheus_only=True),
    HostColumn("mem", "Memory", 10, _mem, right=True),
    HostColumn("power", "Power", 7, lambda s: _power(s.power_w), right=True),
    HostColumn("temp", "Hottest, margin", 15, _hottest, wraps=True),
    HostColumn("throttling", "Throttling", 30, _throttling, wraps=True),
    HostColumn("lost", "Lost", 8, _lost),
    HostColumn("xids", "XID 1h", 6, _xids, right=True, prometheus_only=True),
    HostColumn("jobs", "Jobs", 18, _jobs, wraps=True),
    HostColumn("alerts", "Firing alerts", 40, _alerts, wraps=True,
               prometheus_only=True),
)
NAME_WIDTH = 24  # the host column, at most


def columns_for(prometheus: bool) -> tuple[HostColumn, ...]:
    return tuple(c for c in COLUMNS if prometheus or not c.prometheus_only)


def host_name(s: HostSummary) -> str:
    """The host's name and, where it differs, its target: "node-1 (10.0.0.1:9400)"."""
    return printable(s.name if s.name == s.target else f"{s.name} ({s.target})")


def row_labels(rows: Iterable[HostSummary]) -> dict[str, str]:
    """What each row is called in the table, by target: its name, or its name and target
    where two rows share a name (two exporters on one machine)."""
    rows = list(rows)
    counts = Counter(s.name for s in rows)
    return {s.target: printable(s.name) if counts[s.name] == 1 else host_name(s) for s in rows}


def down_text(s: HostSummary, now: datetime) -> str | None:
    """What a host that cannot be read says instead of its figures (None: it can be)."""
    if s.state is HostState.UP:
        return None if s.no_gpu_data is None else printable(f"no GPU data: {s.no_gpu_data}")
    if s.state is HostState.PENDING:
        return "waiting for the first answer"
    seen = "never seen" if s.last_seen is None else (
        f"last seen {local_clock(s.last_seen)} "
        f"({fmt_duration(max(0.0, (now - s.last_seen).total_seconds()))} ago)")
    what = "DOWN" if s.state is HostState.DOWN else "ERROR"
    return printable(f"{what}: {s.error or 'no answer'}; {seen}")


def cells(s: HostSummary, columns: Sequence[HostColumn]) -> tuple[str, ...]:
    """The row's cells after the host's name (text from the host made printable)."""
    return tuple(printable(c.cell(s)) for c in columns)


PROBLEM_WORDS = {
    Problem.DOWN: "down", Problem.LOST: "lost", Problem.XID: "xid",
    Problem.THROTTLING: "throttling", Problem.HOT: "hot", Problem.IDLE_HELD: "idle held",
    Problem.ALERT: "alert", Problem.NONE: "ok",
}


def matches(s: HostSummary, text: str) -> bool:
    """The filter: `text` (any case) in the host's name, target, problems or alerts."""
    if not text:
        return True
    words = [s.name, s.target, *(PROBLEM_WORDS[p] for p in s.problems),
             *(a.name for a in s.alerts), s.error or "", s.no_gpu_data or ""]
    low = text.lower()
    return any(low in w.lower() for w in words)


def _last(v: float | None, *, high_first: bool = False) -> tuple[bool, float]:
    """Sort on v (missing values last, whatever the direction)."""
    if v is None:
        return (True, 0.0)
    return (False, -v if high_first else v)


@dataclass(frozen=True, slots=True)
class Order:
    name: str
    key: Callable[[HostSummary], tuple[object, ...]]


ORDERS: tuple[Order, ...] = (
    Order("problems", lambda s: s.order),
    Order("name", lambda s: (s.name, s.target)),
    Order("utilisation (lowest first)", lambda s: (_last(s.util_mean_pct), s.name)),
    Order("last hour (idlest first)", lambda s: (_last(s.history_mean_pct), s.name)),
    Order("power (highest first)", lambda s: (_last(s.power_w, high_first=True), s.name)),
    Order("temperature (hottest first)",
          lambda s: (_last(s.hottest_c, high_first=True), s.name)),
)


def arrange(rows: Iterable[HostSummary], order: Order, text: str = "") -> list[HostSummary]:
    """The rows the table shows: those matching the filter, in `order`."""
    return sorted((s for s in rows if matches(s, text)), key=order.key)


def fleet_line(f: FleetSummary) -> str:
    """The whole fleet in one line."""
    power = "" if f.power_w is None else (
        f" · {f.power_w / 1e6:.2f} MW" if f.power_w >= 1e6 else
        f" · {f.power_w / 1e3:.1f} kW" if f.power_w >= 1e3 else f" · {f.power_w:.0f} W")
    alerts = f" · {f.alerts:,} alerts firing" if f.alerts else ""
    lost = f", {f.lost:,} lost" if f.lost else ""
    return (f"{f.hosts:,} host{'' if f.hosts == 1 else 's'}: {f.up:,} up, {f.down:,} down · "
            f"{f.gpus:,} GPU{'' if f.gpus == 1 else 's'}: "
            f"{f.busy:,} busy, {f.idle:,} idle, {f.throttling:,} throttling{lost}"
            f"{power}{alerts}")
