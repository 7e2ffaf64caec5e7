"""Alert events: what a notification sends, derived from the alert engine's frames.

Every alert the monitor raises becomes an event, worded with the monitor's own sentence:
a condition that lasts (throttling, a GPU near its slowdown temperature, memory full, a
lost GPU ...) is "started" once and "ended" once, however long it lasts; an instant (an
XID error, an ECC error) "occurred". An alert kind the tracker does not know (a later
feature's) becomes an event under its own name, with its values as they are.

The tracker is plain bookkeeping fed one Frame at a time, on the sampler's thread: no
I/O, no clock of its own (the snapshot's time is "now").
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from types import MappingProxyType
from typing import Literal

from gputui.telemetry.alert import NO_VALUES, Alert, AlertValue, alert_key
from gputui.telemetry.frame import Frame
from gputui.telemetry.model import Snapshot, iso_utc
from gputui.telemetry.units import fmt_duration

EventName = Literal["started", "ended", "occurred"]

# The alert engine's kinds under the names an event carries; any other kind keeps its own.
EVENT_KIND: Mapping[str, str] = MappingProxyType({
    "near_slowdown": "temperature",
    "mem_hot": "memory_temperature",
    "row_remap": "remap",
    "ecc_event": "ecc",
})
# Alerts that are news the moment they happen, not conditions with an end.
INSTANT_ALERTS = frozenset({"xid", "ecc_event", "ecc"})


def event_kind(alert_kind: str) -> str:
    return EVENT_KIND.get(alert_kind, alert_kind)


@dataclass(frozen=True, slots=True)
class Event:
    event: EventName
    kind: str  # an event kind (KNOWN_KINDS, or a newer alert's own kind)
    gpu: int | None
    uuid: str | None
    host: str
    time: datetime  # when this happened (UTC)
    started: datetime  # when the condition (or the instant) began
    text: str  # the monitor's sentence
    severity: str = "warning"  # "warning" or "error"
    duration_s: float | None = None  # on "ended"
    reasons: tuple[str, ...] = ()
    values: Mapping[str, AlertValue] = field(default_factory=lambda: NO_VALUES)

    def to_dict(self) -> dict[str, object]:
        out: dict[str, object] = {
            "event": self.event, "kind": self.kind, "gpu": self.gpu, "uuid": self.uuid,
            "host": self.host, "time": iso_utc(self.time), "started": iso_utc(self.started),
            "severity": self.severity,
        }
        if self.duration_s is not None:
            out["duration_s"] = round(self.duration_s, 3)
        out["reasons"] = list(self.reasons)
        out["values"] = dict(self.values)
        # `text` is what Slack's and Mattermost's incoming webhooks show as the message.
        out["text"] = self.text
        return out

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), ensure_ascii=False)


@dataclass(slots=True)
class _Open:
    started: datetime
    sent: bool = False


class EventTracker:
    """Turns frames into events: exactly one started and one ended per condition.

    `min_duration_s`: a condition is sent only once it has lasted that long (its ended
    then only if its started was sent). `kinds`: the event kinds to send (None: all).
    """

    def __init__(self, *, min_duration_s: float = 0.0,
                 kinds: Iterable[str] | None = None) -> None:
        self.min_duration_s = min_duration_s
        self.kinds = None if kinds is None else frozenset(kinds)
        self._open: dict[str, _Open] = {}

    def _wanted(self, kind: str) -> bool:
        return self.kinds is None or kind in self.kinds

    def update(self, frame: Frame) -> list[Event]:
        snap = frame.snapshot
        if frame.reset:  # a replay that jumped: what was open is no longer known
            self._open.clear()
            return []
        events: list[Event] = []
        now = snap.time
        for a in frame.raised:
            if a.kind in INSTANT_ALERTS and self._wanted(event_kind(a.kind)):
                events.append(_event("occurred", a, snap, a.since, a.since))
        for a in frame.cleared:
            state = self._open.pop(a.key, None)
            if state is not None and state.sent:
                until = a.until or now
                events.append(_event("ended", a, snap, until, state.started,
                                     duration_s=(until - state.started).total_seconds()))
        if not frame.alerts and not self._open:
            return events  # the usual tick
        raised = {a.key for a in frame.raised}
        active = set()
        for a in frame.alerts:
            if a.kind in INSTANT_ALERTS:
                continue
            active.add(a.key)
            state = self._open.get(a.key)
            if state is None:
                # Raised now, or quietly reactivated by the engine (throttling that came
                # back moments after it stopped): the ended already went out, so this is
                # a new start.
                state = self._open[a.key] = _Open(a.since if a.key in raised else now)
            if state.sent or not self._wanted(event_kind(a.kind)):
                continue
            if (now - state.started).total_seconds() < self.min_duration_s:
                continue
            if a.kind == "clock_change" and a.gpu_index is not None and any(
                    b.key == alert_key("throttle", a.gpu_index) for b in frame.alerts):
                continue  # the throttle event of the same GPU already says it
            state.sent = True
            events.append(_event("started", a, snap, now, state.started))
        for key in [k for k in self._open if k not in active]:
            del self._open[key]  # gone without a clear (the engine was reset)
        return events


def _event(name: EventName, a: Alert, snap: Snapshot, at: datetime, started: datetime,
           duration_s: float | None = None) -> Event:
    uuid = next((g.info.uuid for g in snap.gpus if g.index == a.gpu_index), None)
    text = a.message
    if name == "ended":
        text = f"{text} — ended after {fmt_duration(duration_s or 0.0)}"
    return Event(event=name, kind=event_kind(a.kind), gpu=a.gpu_index, uuid=uuid,
                 host=snap.host.hostname, time=at, started=started, text=text,
                 severity=a.severity, duration_s=duration_s, reasons=a.reasons,
                 values=a.values)
