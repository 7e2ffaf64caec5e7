"""The benchmark result: one frozen `Result`, and `ResultBuilder`, its mutable draft.

The worker builds its result with a `ResultBuilder`; the runner starts from the worker's
result (or from the run request when the worker sent none) with the same builder and gives the
final verdict. The builder's fields are generated from Result's (`dataclasses.fields`), so
there is one list of them. JSON goes in and out of the same classes (`Result.to_dict` /
`Result.from_dict`); the field names are the public contract documented in docs/benchmarks.md.
What a kind measures beyond the common fields is typed in `bench.extras`.

Schema 2 adds `throughput.value` (the headline: samples ÷ seconds of the timed loop),
`throughput.definition`, `throughput.windows` and `n` in the percentile objects. A schema-1
document loads through `migrate`: its `throughput.mean` was already samples ÷ timed-loop
seconds and becomes `value`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import MISSING, Field, dataclass, field, fields, make_dataclass, replace
from typing import Any

from gputui.bench.config import RunConfig
from gputui.bench.events import Point
from gputui.bench.extras import Extras
from gputui.bench.flops import Flops
from gputui.bench.llm_metrics import LlmStats
from gputui.bench.request import RunRequest
from gputui.bench.stats import Spread, Throughput, TrialSpread
from gputui.bench.throttle_window import WindowStats

SCHEMA_VERSION = 2
STATUSES = ("ok", "cancelled", "failed")


class DamagedResult(ValueError):
    """A result document with a field of the wrong type (one line, names the field)."""


@dataclass(frozen=True)
class ErrorInfo:
    kind: str  # oom, cuda, invalid, crash, timeout
    message: str
    batch_size: int | None = None
    suggestion: str | None = None
    exit_code: int | None = None
    signal: str | None = None
    stderr_tail: tuple[str, ...] | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"kind": self.kind, "message": self.message,
                               "batch_size": self.batch_size, "suggestion": self.suggestion}
        if self.exit_code is not None:
            out["exit_code"] = self.exit_code
        if self.signal is not None:
            out["signal"] = self.signal
        if self.stderr_tail is not None:
            out["stderr_tail"] = list(self.stderr_tail)
        return out

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> ErrorInfo:
        tail = d.get("stderr_tail")
        return cls(kind=_str(d.get("kind"), "error.kind") or "crash",
                   message=_str(d.get("message"), "error.message") or "",
                   batch_size=_int(d.get("batch_size"), "error.batch_size"),
                   suggestion=_str(d.get("suggestion"), "error.suggestion"),
                   exit_code=_int(d.get("exit_code"), "error.exit_code"),
                   signal=_str(d.get("signal"), "error.signal"),
                   stderr_tail=tuple(str(x) for x in _list(tail, "error.stderr_tail"))
                   if tail is not None else None)


@dataclass(frozen=True)
class Result:
    id: str
    benchmark: str
    model: str | None = None
    device: str | None = None
    device_name: str | None = None
    precision: str | None = None
    batch_size: int | None = None
    status: str = "failed"
    throughput: Throughput | None = None
    latency_ms: Spread | None = None
    phases_ms: Mapping[str, float] | None = None
    step_time_ms: Spread | None = None
    peak_memory_bytes: int | None = None
    energy_j_per_sample: float | None = None
    avg_power_w: float | None = None
    # As telemetry's ThrottleEpisode.to_dict recorded them during the run.
    throttle_episodes: tuple[Mapping[str, Any], ...] = ()
    # Open records, not typed: every setting and version the run had, which differ by kind
    # and device; views show and compare them key by key (bench.compare) and read a few.
    settings: Mapping[str, Any] = field(default_factory=dict)
    env: Mapping[str, Any] = field(default_factory=dict)
    started_at: str | None = None
    finished_at: str | None = None
    duration_s: float | None = None
    steps: int | None = None
    samples: int | None = None
    points: tuple[Point, ...] = ()
    error: ErrorInfo | None = None
    extra: Extras = field(default_factory=Extras)
    # The GPU's state over the timed loops, sampled by the runner (bench.throttle_window).
    window: WindowStats | None = None
    # Settings that change the number, read once per run (bench.config).
    config: RunConfig = field(default_factory=RunConfig)
    # Model FLOPs per sample, achieved TFLOP/s and MFU (bench.flops); None for probes.
    flops: Flops | None = None
    # LLM serving figures: TTFT, TPOT, ITL, decode bandwidth, MBU (bench.llm_metrics).
    llm: LlmStats | None = None
    schema: int = SCHEMA_VERSION

    @property
    def throttled(self) -> bool:
        """Throttled for more than 5 % of the timed window: flagged wherever shown."""
        return self.window is not None and self.window.throttled

    @property
    def unit(self) -> str:
        return self.throughput.unit if self.throughput is not None else ""

    @property
    def headline(self) -> float | None:
        return self.throughput.value if self.throughput is not None else None

    @property
    def trials(self) -> tuple[float, ...] | None:
        """--repeat N: each timed trial's headline (None for a single trial)."""
        return self.throughput.trials if self.throughput is not None else None

    @property
    def spread(self) -> TrialSpread | None:
        return self.throughput.spread if self.throughput is not None else None

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema": SCHEMA_VERSION, "id": self.id, "benchmark": self.benchmark,
            "model": self.model, "device": self.device, "device_name": self.device_name,
            "precision": self.precision, "batch_size": self.batch_size, "status": self.status,
            "throughput": self.throughput.to_dict() if self.throughput else None,
            "trials": list(self.trials) if self.trials else None,
            "spread": self.spread.to_dict() if self.spread else None,
            "latency_ms": self.latency_ms.to_dict() if self.latency_ms else None,
            "phases_ms": dict(self.phases_ms) if self.phases_ms is not None else None,
            "step_time_ms": (self.step_time_ms.to_dict(with_median=True)
                             if self.step_time_ms else None),
            "peak_memory_bytes": self.peak_memory_bytes,
            "energy_j_per_sample": self.energy_j_per_sample, "avg_power_w": self.avg_power_w,
            "throttle_episodes": [dict(e) for e in self.throttle_episodes],
            "settings": dict(self.settings), "env": dict(self.env),
            "started_at": self.started_at, "finished_at": self.finished_at,
            "duration_s": self.duration_s, "steps": self.steps, "samples": self.samples,
            "points": [p.to_dict() for p in self.points],
            "error": self.error.to_dict() if self.error else None,
            "extra": self.extra.to_json(),
            "window": self.window.to_dict() if self.window else None,
            "config": self.config.to_json(),
            "flops": self.flops.to_dict() if self.flops else None,
            "llm": self.llm.to_dict() if self.llm else None,
        }

    @classmethod
    def from_dict(cls, doc: Mapping[str, Any]) -> Result:
        """A result from its JSON object (any schema); DamagedResult names a bad field."""
        if not isinstance(doc, Mapping):
            raise DamagedResult("not a JSON object")
        doc = migrate(doc)
        bench = doc.get("benchmark")
        if not isinstance(bench, str):
            raise DamagedResult("not a gputui result document (no benchmark)")
        status = _str(doc.get("status"), "status") or "failed"
        if status not in STATUSES:
            raise DamagedResult(f"status {status!r} is not one of {', '.join(STATUSES)}")
        tp, lat, st = doc.get("throughput"), doc.get("latency_ms"), doc.get("step_time_ms")
        phases = _dict(doc.get("phases_ms"), "phases_ms", none_ok=True)
        err = doc.get("error")
        try:
            points = tuple(Point.from_dict(_dict(p, "points[]"))
                           for p in _list(doc.get("points"), "points"))
        except ValueError as exc:
            raise DamagedResult(f"points: {exc}") from None
        return cls(
            id=_str(doc.get("id"), "id") or "", benchmark=bench,
            model=_str(doc.get("model"), "model"), device=_str(doc.get("device"), "device"),
            device_name=_str(doc.get("device_name"), "device_name"),
            precision=_str(doc.get("precision"), "precision"),
            batch_size=_int(doc.get("batch_size"), "batch_size"), status=status,
            throughput=_throughput(tp, doc.get("trials")),
            latency_ms=Spread.from_dict(_dict(lat, "latency_ms")) if lat is not None else None,
            phases_ms=({str(k): v for k, v in phases.items()
                        if _num(v, "phases_ms") is not None} if phases is not None else None),
            step_time_ms=Spread.from_dict(_dict(st, "step_time_ms")) if st is not None
            else None,
            peak_memory_bytes=_int(doc.get("peak_memory_bytes"), "peak_memory_bytes"),
            energy_j_per_sample=_num(doc.get("energy_j_per_sample"), "energy_j_per_sample"),
            avg_power_w=_num(doc.get("avg_power_w"), "avg_power_w"),
            throttle_episodes=tuple(_dict(e, "throttle_episodes[]")
                                    for e in _list(doc.get("throttle_episodes"),
                                                   "throttle_episodes")),
            settings=_dict(doc.get("settings"), "settings"),
            env=_dict(doc.get("env"), "env"),
            started_at=_str(doc.get("started_at"), "started_at"),
            finished_at=_str(doc.get("finished_at"), "finished_at"),
            duration_s=_num(doc.get("duration_s"), "duration_s"),
            steps=_int(doc.get("steps"), "steps"), samples=_int(doc.get("samples"), "samples"),
            points=points,
            error=ErrorInfo.from_dict(_dict(err, "error")) if err is not None else None,
            extra=Extras.from_json(_dict(doc.get("extra"), "extra"), bench),
            window=(WindowStats.from_dict(_dict(doc.get("window"), "window"))
                    if doc.get("window") is not None else None),
            config=RunConfig.from_json(_dict(doc.get("config"), "config")),
            flops=(Flops.from_dict(_dict(doc.get("flops"), "flops"))
                   if doc.get("flops") is not None else None),
            llm=(LlmStats.from_dict(_dict(doc.get("llm"), "llm"))
                 if doc.get("llm") is not None else None),
        )


def migrate(doc: Mapping[str, Any]) -> Mapping[str, Any]:
    """Schema 1 → 2. The only change needing care is the throughput headline, which
    Throughput.from_dict derives from schema 1's `mean`; the rest only gained fields."""
    schema = doc.get("schema", 1)
    if isinstance(schema, int) and not isinstance(schema, bool) and schema > SCHEMA_VERSION:
        raise DamagedResult(f"schema {schema} is newer than this gputui understands "
                            f"({SCHEMA_VERSION})")
    return doc


def _throughput(tp: Any, trials: Any) -> Throughput | None:
    if tp is None:
        return None
    out = Throughput.from_dict(_dict(tp, "throughput"))
    if trials is None:
        return out
    values = tuple(v for v in (_num(t, "trials[]") for t in _list(trials, "trials"))
                   if v is not None)
    return replace(out, trials=values or None)


def _str(v: Any, name: str) -> str | None:
    if v is None or isinstance(v, str):
        return v
    if isinstance(v, int | float) and not isinstance(v, bool):
        return str(v)
    raise DamagedResult(f"{name} is not a string")


def _int(v: Any, name: str) -> int | None:
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, int | float):
        raise DamagedResult(f"{name} is not a number")
    if isinstance(v, float):
        if not math.isfinite(v) or v != int(v):
            raise DamagedResult(f"{name} is not a whole number")
        return int(v)
    return v


def _num(v: Any, name: str) -> float | None:
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, int | float):
        raise DamagedResult(f"{name} is not a number")
    if not math.isfinite(v):
        raise DamagedResult(f"{name} is not a finite number")
    return float(v)


def _dict(v: Any, name: str, none_ok: bool = False) -> dict[str, Any]:
    if v is None and none_ok:
        return None  # type: ignore[return-value]
    if v is None:
        return {}
    if not isinstance(v, Mapping):
        raise DamagedResult(f"{name} is not an object")
    return dict(v)


def _list(v: Any, name: str) -> list[Any]:
    if v is None:
        return []
    if not isinstance(v, list | tuple):
        raise DamagedResult(f"{name} is not a list")
    return list(v)


class _Draft:
    """The mutable side of a Result: the worker's kinds and the runner's verdict fill it.

    `ResultBuilder` below is this class with Result's fields (lists where Result keeps
    tuples, so points are appended); `build` freezes them into a Result. A worker's result
    is ok until it fails.
    """

    @classmethod
    def for_request(cls, result_id: str, request: RunRequest) -> ResultBuilder:
        """Identity from the request; nothing measured yet."""
        return cls(id=result_id, benchmark=request.benchmark, model=request.model,
                   device=request.device, precision=request.precision,
                   batch_size=request.batch_size)

    @classmethod
    def from_result(cls, result: Result) -> ResultBuilder:
        return cls(**{name: _thaw(getattr(result, name)) for name in _BUILT})

    def add_point(self, point: Point) -> None:
        self.points.append(point)

    def add_counts(self, steps: int, samples: int | None) -> None:
        self.steps = (self.steps or 0) + steps
        if samples is not None:
            self.samples = (self.samples or 0) + samples

    def fail(self, error: ErrorInfo) -> None:
        self.status = "failed"
        self.error = error

    def build(self) -> Result:
        return Result(**{name: _freeze(getattr(self, name)) for name in _BUILT})


# The fields a builder carries over to its Result (all of Result's but the schema version).
_BUILT: tuple[str, ...] = tuple(f.name for f in fields(Result) if f.name != "schema")


def _draft_field(f: Field[Any]) -> tuple[str, Any, Any] | tuple[str, Any]:
    """Result's field as the draft holds it: tuples become lists, a draft starts ok."""
    if f.name == "status":
        return f.name, f.type, field(default="ok")
    if isinstance(f.default, tuple):
        return f.name, f.type, field(default_factory=list)
    if f.default_factory is not MISSING:
        return f.name, f.type, field(default_factory=f.default_factory)
    if f.default is not MISSING:
        return f.name, f.type, field(default=f.default)
    return f.name, f.type


ResultBuilder = make_dataclass(
    "ResultBuilder", [_draft_field(f) for f in fields(Result) if f.name in _BUILT],
    bases=(_Draft,), namespace={"__module__": __name__, "__doc__": _Draft.__doc__})


def _thaw(v: Any) -> Any:
    """A Result's value as the builder holds it: tuples become lists, mappings dicts."""
    if isinstance(v, tuple):
        return list(v)
    if isinstance(v, Mapping):
        return dict(v)
    return v


def _freeze(v: Any) -> Any:
    return tuple(v) if isinstance(v, list) else v


def with_episodes(result: Result, episodes: list[Mapping[str, Any]]) -> Result:
    return replace(result, throttle_episodes=tuple(episodes))
