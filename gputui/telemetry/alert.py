"""Alert: one alert, active or cleared, in the words a person reads — the record every rule
builds (the engine's in gputui.telemetry.alerts, job_slowdown's in
gputui.telemetry.job_alerts) and every view, recording and notification reads. Plain data,
below both rule modules, so neither imports the other's rules to name it."""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from types import MappingProxyType
from typing import Literal

# The figures behind an alert (temperature and limit, clocks, XID number ...), by name with
# its unit, as a notification sends them. Plain values only: they go into JSON as they are.
AlertValue = int | float | str | bool | None
NO_VALUES: Mapping[str, AlertValue] = MappingProxyType({})

AlertKind = Literal["throttle", "near_slowdown", "memory_full", "ecc", "lost", "stale",
                    "gpm_busy", "mem_hot", "row_remap", "xid", "ecc_event",
                    "clock_change", "job_slowdown"]
Severity = Literal["warning", "error"]


@dataclass(frozen=True, slots=True)
class Alert:
    """One alert, active or cleared, in the words a person reads."""

    key: str  # stable id, "<kind>:<gpu index>", e.g. "throttle:0"
    gpu_index: int | None
    kind: AlertKind
    severity: Severity
    message: str  # a sentence in words, starting with "GPU n: "
    since: datetime  # when the condition started (snapshot wall time, UTC)
    active: bool = True
    until: datetime | None = None  # when it cleared; None while active
    reasons: tuple[str, ...] = ()  # throttle: the reasons' keys (telemetry.throttle.REASONS)
    # Refreshed with the message while the alert is active; not part of its identity.
    values: Mapping[str, AlertValue] = field(default_factory=lambda: NO_VALUES, hash=False)


@functools.cache
def alert_key(kind: str, gpu_index: int | None) -> str:
    # Cached: the rules ask for ~9 keys per GPU every tick, always the same few strings.
    return f"{kind}:{'host' if gpu_index is None else gpu_index}"
