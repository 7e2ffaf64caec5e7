"""The JSON-lines protocol between the benchmark worker and its parent.

See shared_notes/bench_protocol.md. Both sides import this module; it must not import
torch. Constructors build the event dicts (the worker adds "t" and "v" when it emits them);
`parse_event` turns one line of worker stdout into a checked dict, or None for anything
that is not an event (torch and its libraries sometimes print to stdout).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

VERSION = 1

EVENT_KINDS: tuple[str, ...] = (
    "started", "warmup", "progress", "phase", "point", "result", "error",
)
ERROR_KINDS: tuple[str, ...] = ("oom", "cuda", "invalid", "crash")
PHASES: tuple[str, ...] = ("data", "h2d", "forward", "backward", "optimizer")

# Fields each event must carry, with the types accepted (None allowed where listed).
_NUM = (int, float)
_REQUIRED: Mapping[str, Mapping[str, tuple[type, ...]]] = {
    "started": {"pid": (int,), "benchmark": (str,), "spec": (dict,), "env": (dict,)},
    "warmup": {"step": (int,), "of": (int,)},
    "progress": {
        "step": (int,), "of": (int, type(None)), "elapsed_s": _NUM,
        "duration_s": (*_NUM, type(None)), "throughput": _NUM, "unit": (str,),
        "window_s": _NUM, "samples": (int,),
    },
    "phase": {"phases_ms": (dict,)},
    "point": {
        "label": (str,), "batch_size": (int, type(None)), "throughput": (*_NUM, type(None)),
        "unit": (str,), "latency_ms": (dict, type(None)), "ok": (bool,),
        "error": (str, type(None)),
    },
    "result": {"result": (dict,)},
    "error": {
        "kind": (str,), "message": (str,), "batch_size": (int, type(None)),
        "suggestion": (str, type(None)),
    },
}


def _clean(x: Any) -> Any:
    """NaN and inf are not JSON: they become None ("not available")."""
    if isinstance(x, float) and not math.isfinite(x):
        return None
    if isinstance(x, dict):
        return {str(k): _clean(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [_clean(v) for v in x]
    return x


def encode(event: Mapping[str, Any], t: float) -> str:
    """One line of JSON (no newline) with the common fields added."""
    body = {"event": event["event"], "t": round(t, 6), "v": VERSION}
    body.update({k: v for k, v in event.items() if k != "event"})
    return json.dumps(_clean(body), separators=(",", ":"), allow_nan=False, default=str)


def started(pid: int, benchmark: str, spec: Mapping[str, Any], env: Mapping[str, Any]) -> dict:
    return {"event": "started", "pid": pid, "benchmark": benchmark, "spec": dict(spec),
            "env": dict(env)}


def warmup(step: int, of: int) -> dict:
    return {"event": "warmup", "step": step, "of": of}


def progress(
    *, step: int, of: int | None, elapsed_s: float, duration_s: float | None,
    throughput: float, unit: str, window_s: float, samples: int,
) -> dict:
    return {"event": "progress", "step": step, "of": of, "elapsed_s": elapsed_s,
            "duration_s": duration_s, "throughput": throughput, "unit": unit,
            "window_s": window_s, "samples": samples}


def phase(phases_ms: Mapping[str, float]) -> dict:
    return {"event": "phase", "phases_ms": dict(phases_ms)}


def point(
    *, label: str, batch_size: int | None, throughput: float | None, unit: str,
    latency_ms: Mapping[str, float] | None = None, ok: bool = True, error: str | None = None,
    **extra: Any,
) -> dict:
    ev = {"event": "point", "label": label, "batch_size": batch_size, "throughput": throughput,
          "unit": unit, "latency_ms": dict(latency_ms) if latency_ms is not None else None,
          "ok": ok, "error": error}
    ev.update(extra)
    return ev


def result(doc: Mapping[str, Any]) -> dict:
    return {"event": "result", "result": dict(doc)}


def error(
    kind: str, message: str, *, batch_size: int | None = None, suggestion: str | None = None
) -> dict:
    if kind not in ERROR_KINDS:
        raise ValueError(f"bad error kind {kind!r}")
    # The runner shows the message as one line.
    one_line = " ".join(message.split()) or kind
    return {"event": "error", "kind": kind, "message": one_line, "batch_size": batch_size,
            "suggestion": suggestion}


def parse_event(line: str | bytes) -> dict | None:
    """A validated event dict, or None if the line is not a well-formed event."""
    if isinstance(line, bytes):
        line = line.decode("utf-8", "replace")
    line = line.strip()
    if not line.startswith("{"):
        return None
    try:
        ev = json.loads(line)
    except ValueError:
        return None
    if not isinstance(ev, dict):
        return None
    kind = ev.get("event")
    if kind not in _REQUIRED or ev.get("v") != VERSION:
        return None
    if not isinstance(ev.get("t"), _NUM) or isinstance(ev.get("t"), bool):
        return None
    for key, types in _REQUIRED[kind].items():
        if key not in ev:
            return None
        val = ev[key]
        if isinstance(val, bool) and bool not in types:
            return None
        if not isinstance(val, types):
            return None
    if kind == "error" and ev["kind"] not in ERROR_KINDS:
        return None
    return ev
