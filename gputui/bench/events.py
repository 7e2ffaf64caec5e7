"""The JSON-lines protocol between the benchmark worker and its parent, as typed events.

Protocol (version 1)
--------------------
The worker (`python -m gputui.bench.worker --spec-json '<JSON>'`) writes one JSON object per
line on its stdout; nothing else ever goes there (the worker points fd 1 at stderr and keeps
a private duplicate for events). Every event carries `"event"` (its kind), `"t"` (seconds
since the worker started, monotonic) and `"v"` (this protocol's version). In order:

- `started`  {pid, benchmark, spec, env}: the device is resolved, the environment known.
- `warmup`   {step, of}: one untimed step done.
- `progress` {step, of, elapsed_s, duration_s, throughput, unit, window_s, samples,
  total_samples}: one window (~0.5 s) of the timed loop ended; `samples` are the window's,
  `total_samples` the loop's so far, `step` the loop's steps so far.
- `phase`    {phases_ms}: the per-phase split of a training step.
- `point`    {label, batch_size, throughput, unit, latency_ms, ok, error, ...}: one point of
  a sweep, batch-finder probe, matmul dtype or membw kernel; extra keys are kept.
- `result`   {result}: the result document (`gputui.bench.result`), status ok or cancelled.
- `error`    {kind, message, batch_size, suggestion}: the run failed; kind is one of
  oom, cuda, invalid (bad settings: nothing ran) or crash.

The worker ends with exactly one `result` or one `error`. SIGTERM asks it to stop at the
next step boundary and send a `cancelled` result with what it measured; a worker that dies
without either is judged by the runner from its exit status and the last progress event.

Each event is a frozen dataclass; `encode` writes one line, `decode` turns one line into
an event (or None for anything that is not one: torch and its libraries sometimes print to
stdout). Decoding happens once, here. This module must not import torch.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any, ClassVar

from gputui.bench.fmt import fmt_num
from gputui.safe_text import printable

VERSION = 1

ERROR_KINDS: tuple[str, ...] = ("oom", "cuda", "invalid", "crash")
PHASES: tuple[str, ...] = ("data", "h2d", "forward", "backward", "optimizer")


class BadEvent(ValueError):
    """A line that looks like an event but breaks the protocol."""


def clean(x: Any) -> Any:
    """NaN and inf are not JSON: they become None ("not available")."""
    if isinstance(x, float) and not math.isfinite(x):
        return None
    if isinstance(x, Mapping):
        return {str(k): clean(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [clean(v) for v in x]
    return x


def _is_num(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


def _check(kind: str, key: str, v: Any, want: str) -> Any:
    ok = {
        "int": isinstance(v, int) and not isinstance(v, bool),
        "int?": v is None or (isinstance(v, int) and not isinstance(v, bool)),
        "num": _is_num(v),
        "num?": v is None or _is_num(v),
        "str": isinstance(v, str),
        "str?": v is None or isinstance(v, str),
        "dict": isinstance(v, dict),
        "dict?": v is None or isinstance(v, dict),
        "bool": isinstance(v, bool),
    }[want]
    if not ok:
        raise BadEvent(f"{kind}.{key}: expected {want}, got {type(v).__name__}")
    return v


@dataclass(frozen=True)
class Started:
    kind: ClassVar[str] = "started"
    pid: int
    benchmark: str
    # The resolved request as the worker runs it (RunRequest.to_dict): shown and recorded
    # as sent, so it stays the protocol's JSON object.
    spec: Mapping[str, Any]
    env: Mapping[str, Any]
    t: float = 0.0


@dataclass(frozen=True)
class Warmup:
    kind: ClassVar[str] = "warmup"
    step: int
    of: int
    t: float = 0.0


@dataclass(frozen=True)
class Progress:
    kind: ClassVar[str] = "progress"
    step: int  # timed steps so far
    of: int | None
    elapsed_s: float  # seconds of the timed loop so far
    duration_s: float | None
    throughput: float  # this window's rate
    unit: str
    window_s: float
    samples: int  # this window's samples
    total_samples: int | None = None  # the timed loop's samples so far
    t: float = 0.0


@dataclass(frozen=True)
class Phase:
    kind: ClassVar[str] = "phase"
    phases_ms: Mapping[str, float]
    t: float = 0.0


@dataclass(frozen=True)
class Point:
    """One measured point; `extra` holds the kind's own fields (dtype, pct_of_peak, ...),
    flattened into the JSON object beside the common ones."""

    kind: ClassVar[str] = "point"
    label: str
    batch_size: int | None
    throughput: float | None
    unit: str
    latency_ms: Mapping[str, Any] | None = None
    ok: bool = True
    error: str | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)
    t: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        out = {"label": self.label, "batch_size": self.batch_size,
               "throughput": self.throughput, "unit": self.unit,
               "latency_ms": dict(self.latency_ms) if self.latency_ms is not None else None,
               "ok": self.ok, "error": self.error}
        out.update({k: v for k, v in self.extra.items() if k not in out})
        return out

    def get(self, key: str, default: Any = None) -> Any:
        """A field or an extra by name: points carry kind-specific keys."""
        if key in _POINT_FIELDS:
            return getattr(self, key)
        return self.extra.get(key, default)

    @property
    def label_text(self) -> str:
        """"batch 8" once, even though sweep labels already say "batch 8"."""
        label = self.label
        if self.batch_size and f"batch {self.batch_size}" not in label:
            label = f"{label} batch {self.batch_size}".strip()
        return printable(label)

    @property
    def value_text(self) -> str:
        if self.ok:
            return printable(f"{fmt_num(self.throughput)} {self.unit}".rstrip())
        return printable(self.error or "failed")

    @property
    def text(self) -> str:
        """"batch 8: 123 images/s" — how a point reads in the CLI and the TUI alike."""
        return f"{self.label_text}: {self.value_text}"

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Point:
        k = "point"
        latency = d.get("latency_ms")
        return cls(label=_check(k, "label", d.get("label"), "str"),
                   batch_size=_check(k, "batch_size", d.get("batch_size"), "int?"),
                   throughput=clean(_check(k, "throughput", d.get("throughput"), "num?")),
                   unit=_check(k, "unit", d.get("unit"), "str"),
                   latency_ms=_check(k, "latency_ms", latency, "dict?"),
                   ok=_check(k, "ok", d.get("ok", True), "bool"),
                   error=_check(k, "error", d.get("error"), "str?"),
                   extra={str(key): v for key, v in d.items()
                          if key not in _POINT_FIELDS and key not in ("event", "t", "v")})


_POINT_FIELDS = ("label", "batch_size", "throughput", "unit", "latency_ms", "ok", "error")


@dataclass(frozen=True)
class ResultReady:
    kind: ClassVar[str] = "result"
    result: Mapping[str, Any]  # the result document; gputui.bench.result reads it
    t: float = 0.0


@dataclass(frozen=True)
class Failed:
    kind: ClassVar[str] = "error"
    error_kind: str
    message: str
    batch_size: int | None = None
    suggestion: str | None = None
    t: float = 0.0


Event = Started | Warmup | Progress | Phase | Point | ResultReady | Failed

_SCHEMAS: dict[str, dict[str, str]] = {
    "started": {"pid": "int", "benchmark": "str", "spec": "dict", "env": "dict"},
    "warmup": {"step": "int", "of": "int"},
    "progress": {"step": "int", "of": "int?", "elapsed_s": "num", "duration_s": "num?",
                 "throughput": "num", "unit": "str", "window_s": "num", "samples": "int"},
    "phase": {"phases_ms": "dict"},
    "result": {"result": "dict"},
    "error": {"kind": "str", "message": "str", "batch_size": "int?", "suggestion": "str?"},
}


def error(kind: str, message: str, *, batch_size: int | None = None,
          suggestion: str | None = None) -> Failed:
    if kind not in ERROR_KINDS:
        raise ValueError(f"bad error kind {kind!r}")
    # The runner shows the message as one line.
    one_line = " ".join(message.split()) or kind
    return Failed(kind, one_line, batch_size, suggestion)


def to_dict(event: Event) -> dict[str, Any]:
    """The event's JSON object, without the common fields."""
    if isinstance(event, Point):
        body = event.to_dict()
    elif isinstance(event, Failed):
        body = {"kind": event.error_kind, "message": event.message,
                "batch_size": event.batch_size, "suggestion": event.suggestion}
    else:
        body = {f.name: getattr(event, f.name) for f in fields(event) if f.name != "t"}
        for key, value in body.items():
            if isinstance(value, Mapping):
                body[key] = dict(value)
    return body


def encode(event: Event, t: float) -> str:
    """One line of JSON (no newline) with the common fields added."""
    body: dict[str, Any] = {"event": event.kind, "t": round(t, 6), "v": VERSION}
    body.update(to_dict(event))
    return json.dumps(clean(body), separators=(",", ":"), allow_nan=False, default=str)


def _from_obj(ev: dict[str, Any]) -> Event:
    kind = ev.get("event")
    t = ev.get("t")
    if not _is_num(t):
        raise BadEvent("t: expected num")
    if kind == "point":
        p = Point.from_dict(ev)
        return Point(p.label, p.batch_size, p.throughput, p.unit, p.latency_ms, p.ok, p.error,
                     p.extra, t=float(t))
    schema = _SCHEMAS.get(str(kind))
    if schema is None:
        raise BadEvent(f"unknown event {kind!r}")
    for key, want in schema.items():
        if key not in ev:
            raise BadEvent(f"{kind}: missing {key}")
        _check(str(kind), key, ev[key], want)
    if kind == "started":
        return Started(ev["pid"], ev["benchmark"], ev["spec"], ev["env"], t=float(t))
    if kind == "warmup":
        return Warmup(ev["step"], ev["of"], t=float(t))
    if kind == "progress":
        total = _check("progress", "total_samples", ev.get("total_samples"), "int?")
        return Progress(ev["step"], ev["of"], float(ev["elapsed_s"]),
                        clean(ev["duration_s"]), float(ev["throughput"]), ev["unit"],
                        float(ev["window_s"]), ev["samples"], total, t=float(t))
    if kind == "phase":
        return Phase(ev["phases_ms"], t=float(t))
    if kind == "result":
        return ResultReady(ev["result"], t=float(t))
    if ev["kind"] not in ERROR_KINDS:
        raise BadEvent(f"error.kind: {ev['kind']!r}")
    return Failed(ev["kind"], ev["message"], ev["batch_size"], ev["suggestion"], t=float(t))


def decode(line: str | bytes) -> Event | None:
    """The event on one line of worker stdout, or None if the line is not a valid event."""
    if isinstance(line, bytes):
        line = line.decode("utf-8", "replace")
    line = line.strip()
    if not line.startswith("{"):
        return None
    try:
        ev = json.loads(line)
    except ValueError:
        return None
    if not isinstance(ev, dict) or ev.get("v") != VERSION:
        return None
    try:
        return _from_obj(ev)
    except (BadEvent, TypeError, ValueError):
        return None
