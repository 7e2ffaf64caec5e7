"""Rows of the fleet table as plain strings, shared by `fleet --once` and the Textual view.

Every cell and alert comes out through `printable`: host names, GPU models and error
messages come from the hosts' pages, and a raw ESC in them must not reach the terminal.
Callers still show them as plain text (rich `Text`), never as markup.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from gputui.fleet.model import Alert, FleetHost, FleetSnapshot, HostState, local_clock
from gputui.safe_text import printable
from gputui.telemetry.units import NA, fmt_duration, fmt_pct, fmt_temp, fmt_w

GIB = 1024**3


@dataclass(frozen=True, slots=True)
class Row:
    key: str  # stable across refreshes: "target|gpu|uuid"
    cells: tuple[str, str, str, str, str, str, str, str, str]
    status: str  # "ok", "throttling", "hot", "lost", "stale", "down", "error", "pending", "nogpu"

    def __post_init__(self) -> None:
        object.__setattr__(self, "cells", tuple(printable(c) for c in self.cells))


def alert_text(a: Alert) -> str:
    """An alert's words, safe to write to a terminal."""
    return printable(a.text)


def fmt_mem(used: int | None, total: int | None) -> str:
    if used is None:
        return NA
    if total:
        return f"{used / GIB:.1f}/{total / GIB:.0f}GiB"
    return f"{used / GIB:.1f}GiB"


def seen_text(h: FleetHost, now: datetime) -> str:
    if h.last_seen is None:
        return "never seen"
    ago = fmt_duration(max(0.0, (now - h.last_seen).total_seconds()))
    return f"last seen {local_clock(h.last_seen)} ({ago} ago)"


def host_rows(snap: FleetSnapshot, now: datetime | None = None, *,
              live: bool = True) -> list[Row]:
    """`live`: the view keeps polling, so a down host's row says when it is retried;
    `fleet --once` passes False (nothing will be retried)."""
    now = now or datetime.now(UTC)
    rows: list[Row] = []
    if snap.error:
        rows.append(Row(f"{snap.source}|source", (snap.source, "-", "-", "", "", "", "", "",
                                                    f"ERROR: {snap.error}"), "error"))
    for h in snap.hosts:
        name = h.name if h.name == h.target else f"{h.name} ({h.target})"
        if h.state is HostState.DOWN:
            retry = f", retry in {h.retry_in_s:.0f}s" if live and h.retry_in_s else ""
            rows.append(Row(f"{h.target}|down", (name, "-", "-", "", "", "", "", "",
                                                  f"DOWN: {h.error}; {seen_text(h, now)}{retry}"),
                            "down"))
            continue
        if h.state is HostState.ERROR:
            rows.append(Row(f"{h.target}|error", (name, "-", "-", "", "", "", "", "",
                                                   f"ERROR: {h.error}"), "error"))
            continue
        if h.state is HostState.PENDING:
            rows.append(Row(f"{h.target}|pending", (name, "-", "-", "", "", "", "", "",
                                                     "waiting for the first answer"), "pending"))
            continue
        if not h.gpus:
            why = h.reading.nvml_error or "no GPUs reported"
            rows.append(Row(f"{h.target}|nogpu", (name, "-", "-", "", "", "", "", "",
                                                   f"no GPU data: {why}"), "nogpu"))
            continue
        for g in h.gpus:
            if g.lost:
                status = "lost"
            elif g.stale:
                status = "stale"
            elif g.throttling:
                status = "throttling"
            elif g.hot(snap.hot_temp_c):
                status = "hot"
            else:
                status = "ok"
            rows.append(Row(
                f"{h.target}|{g.gpu}|{g.uuid}",
                (name, g.gpu, g.model or NA, fmt_pct(g.util_pct), fmt_pct(g.sm_active_pct),
                 fmt_mem(g.mem_used_bytes, g.mem_total_bytes), fmt_w(g.power_w),
                 fmt_temp(g.temp_c), g.state_text),
                status))
    return rows
