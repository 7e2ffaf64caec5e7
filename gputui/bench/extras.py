"""A result's `extra`: what one benchmark kind measures beyond the common fields, typed.

`Extras` is the one place `extra` is written and read. Each key the kinds write has a
field here: a few every kind may record (`energy`, `gpu_window`, `profile`,
`headline_point`, the runner's `reference`, the TUI's `throttle_attribution`), the
records of which are below, and one per-kind record (`kind`: a sweep's, the batch
finder's, train-to-accuracy's, matmul's, membw's, attention's, p2p's, lm-infer's, a DDP
run's; `bench.kind_extras`). Views read these fields; nothing outside these two modules
reads or writes `extra`'s JSON.

On disk `extra` is one flat JSON object, as the kinds wrote it before it was typed
(docs/benchmarks.md). Decoding is lenient where the file is odd and exact where it is
not: a known key of the wrong type, or a kind's record missing a key it always has, is
kept as read in `Extras.other` (with keys this version does not know), so every result
loads and dumps back to the same JSON; views show only what decoded.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from gputui.bench.kind_extras import (
    AccuracyExtra,
    AttentionExtra,
    BatchFinderExtra,
    DdpExtra,
    DeepbenchExtra,
    K,
    KindExtra,
    LmInferExtra,
    MatmulExtra,
    MembwExtra,
    P2pExtra,
    SweepExtra,
)
from gputui.bench.record_json import (
    num,
    obj,
    opt_num,
    opt_text,
    opt_whole,
    seq,
    text,
    whole,
)

# --------------------------------------------------------------------------- common records


@dataclass(frozen=True)
class EnergyNote:
    """`extra.energy` of a one-process run: the NVML energy counter over the timed loop,
    and why there is no figure when there is none."""

    source: str
    window_s: float | None
    joules: float | None
    samples: int
    min_window_s: float
    note: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"source": self.source, "window_s": self.window_s, "joules": self.joules,
                "samples": self.samples, "min_window_s": self.min_window_s,
                "note": self.note}

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> EnergyNote:
        return cls(source=text(d.get("source")), window_s=opt_num(d.get("window_s")),
                   joules=opt_num(d.get("joules")), samples=whole(d.get("samples")),
                   min_window_s=num(d.get("min_window_s")), note=opt_text(d.get("note")))


@dataclass(frozen=True)
class RanksEnergy:
    """`extra.energy` of a DDP run: every rank's GPU counter over its own timed loop."""

    source: str
    per_rank_joules: tuple[float, ...]
    window_s: float

    @property
    def note(self) -> None:
        return None  # written only when every rank gave a figure

    def to_json(self) -> dict[str, Any]:
        return {"source": self.source, "per_rank_joules": list(self.per_rank_joules),
                "window_s": self.window_s}

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> RanksEnergy:
        return cls(source=text(d.get("source")),
                   per_rank_joules=seq(d.get("per_rank_joules"), num),
                   window_s=num(d.get("window_s")))


def _energy(v: Any) -> EnergyNote | RanksEnergy:
    d = obj(v)
    return RanksEnergy.from_json(d) if "per_rank_joules" in d else EnergyNote.from_json(d)


@dataclass(frozen=True)
class GpuWindow:
    """`extra.gpu_window`: the worker's own samples of the GPU over one timed loop
    (bench.clock_window takes them); None fields were never read."""

    samples: int
    window_s: float
    clock_sm_mhz_mean: float | None
    clock_sm_mhz_min: float | None
    clock_mem_mhz_mean: float | None
    power_w_mean: float | None
    power_w_max: float | None
    power_limit_w: float | None
    temp_c_max: float | None
    throttle_mask: int | None  # every clocks-event reason seen, OR-ed
    source: str | None = None  # how it was sampled (written when known)

    def to_json(self) -> dict[str, Any]:
        out = {"samples": self.samples, "window_s": self.window_s,
               "clock_sm_mhz_mean": self.clock_sm_mhz_mean,
               "clock_sm_mhz_min": self.clock_sm_mhz_min,
               "clock_mem_mhz_mean": self.clock_mem_mhz_mean,
               "power_w_mean": self.power_w_mean, "power_w_max": self.power_w_max,
               "power_limit_w": self.power_limit_w, "temp_c_max": self.temp_c_max,
               "throttle_mask": self.throttle_mask}
        if self.source is not None:
            out["source"] = self.source
        return out

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> GpuWindow:
        return cls(samples=whole(d.get("samples")), window_s=num(d.get("window_s")),
                   clock_sm_mhz_mean=opt_num(d.get("clock_sm_mhz_mean")),
                   clock_sm_mhz_min=opt_num(d.get("clock_sm_mhz_min")),
                   clock_mem_mhz_mean=opt_num(d.get("clock_mem_mhz_mean")),
                   power_w_mean=opt_num(d.get("power_w_mean")),
                   power_w_max=opt_num(d.get("power_w_max")),
                   power_limit_w=opt_num(d.get("power_limit_w")),
                   temp_c_max=opt_num(d.get("temp_c_max")),
                   throttle_mask=opt_whole(d.get("throttle_mask")),
                   source=opt_text(d.get("source")))


@dataclass(frozen=True)
class ProfiledOp:
    name: str
    count: int
    self_cpu_ms: float
    cpu_total_ms: float
    self_device_ms: float | None  # None on the CPU

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "count": self.count, "self_cpu_ms": self.self_cpu_ms,
                "cpu_total_ms": self.cpu_total_ms, "self_device_ms": self.self_device_ms}

    @classmethod
    def from_json(cls, v: Any) -> ProfiledOp:
        d = obj(v)
        return cls(name=text(d.get("name")), count=whole(d.get("count")),
                   self_cpu_ms=num(d.get("self_cpu_ms")),
                   cpu_total_ms=num(d.get("cpu_total_ms")),
                   self_device_ms=opt_num(d.get("self_device_ms")))


@dataclass(frozen=True)
class Profile:
    """`extra.profile`: the `--profile` pass after the timed run (torch.profiler)."""

    steps: int
    activities: tuple[str, ...]
    top_ops: tuple[ProfiledOp, ...]  # by self time, device time where there is one
    trace_path: str | None

    def to_json(self) -> dict[str, Any]:
        return {"steps": self.steps, "activities": list(self.activities),
                "top_ops": [op.to_json() for op in self.top_ops],
                "trace_path": self.trace_path}

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> Profile:
        return cls(steps=whole(d.get("steps")), activities=seq(d.get("activities"), text),
                   top_ops=seq(d.get("top_ops"), ProfiledOp.from_json),
                   trace_path=opt_text(d.get("trace_path")))


@dataclass(frozen=True)
class ReferenceNote:
    """`extra.reference`: the published result the run matched in every setting, as the
    runner judged it (bench.references)."""

    text: str
    ratio: float
    value: float
    unit: str
    source: str
    # The reference table's row as it stood when the run was judged (a record: views
    # match a result against today's table, bench.references.for_result).
    reference: Mapping[str, Any]

    def to_json(self) -> dict[str, Any]:
        return {"text": self.text, "ratio": self.ratio, "value": self.value,
                "unit": self.unit, "source": self.source, "reference": dict(self.reference)}

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> ReferenceNote:
        return cls(text=text(d.get("text")), ratio=num(d.get("ratio")),
                   value=num(d.get("value")), unit=text(d.get("unit")),
                   source=text(d.get("source")), reference=dict(obj(d.get("reference"))))


@dataclass(frozen=True)
class AttributionNote:
    """One entry of `extra.throttle_attribution` (the TUI's runs): how the throughput
    moved while a throttle episode its sampler saw overlapped the run."""

    text: str
    drop_pct: float | None
    inside: float | None
    outside: float | None
    # The episode as the monitor's sampler recorded it (telemetry ThrottleEpisode.to_dict).
    episode: Mapping[str, Any]

    def to_json(self) -> dict[str, Any]:
        return {"text": self.text, "drop_pct": self.drop_pct, "inside": self.inside,
                "outside": self.outside, "episode": dict(self.episode)}

    @classmethod
    def from_json(cls, v: Any) -> AttributionNote:
        d = obj(v)
        return cls(text=text(d.get("text")), drop_pct=opt_num(d.get("drop_pct")),
                   inside=opt_num(d.get("inside")), outside=opt_num(d.get("outside")),
                   episode=dict(obj(d.get("episode"))))


# Which record a benchmark's own keys are; the others (cnn/rnn training and inference)
# have a sweep's or a DDP run's, whichever keys the file holds.
_KIND_OF: Mapping[str, tuple[type[KindExtra], ...]] = {
    "batch-finder": (BatchFinderExtra,), "train-to-accuracy": (AccuracyExtra,),
    "matmul": (MatmulExtra,), "membw": (MembwExtra,), "attention": (AttentionExtra,),
    "p2p": (P2pExtra,), "lm-infer": (LmInferExtra,), "deepbench": (DeepbenchExtra,),
}
_BY_VARIANT: tuple[type[KindExtra], ...] = (SweepExtra, DdpExtra)

# The order of `extra`'s keys on disk: the order the kinds have always written them in
# (a kind writes its common keys where it measures them), so a result dumps back
# byte for byte. Keys this version does not know follow, as read.
ORDER: tuple[str, ...] = (
    "sweep_sizes", "best_batch", "sweep_stopped",
    "allreduce", "scaling", "per_rank_samples_per_s", "per_rank_samples",
    "headline_point", "energy", "gpu_window", "peak_bandwidth", "profile",
    "tflops", "best_shape", "deepbench_rows", "gbps", "peak_tflops", "peak_dtype",
    "peak_gbps", "peak_source",
    "peak_gpu", *BatchFinderExtra.KEYS, *AccuracyExtra.KEYS,
    "reference", "throttle_attribution",
)


@dataclass(frozen=True)
class Extras:
    """A result's `extra`, typed. Empty for kinds that measure nothing beyond the common
    fields (a plain training or inference run on the CPU)."""

    kind: KindExtra | None = None
    # The point whose figure is the headline (matmul "bf16 8192x8192x8192", attention
    # "d128 s16384 full fwd+bwd", an lm-infer sweep's "batch 8").
    headline_point: str | None = None
    energy: EnergyNote | RanksEnergy | None = None
    # The worker's own sampling of the GPU over the timed loop (`window` is the runner's).
    gpu_window: GpuWindow | None = None
    profile: Profile | None = None
    reference: ReferenceNote | None = None
    throttle_attribution: tuple[AttributionNote, ...] | None = None
    # Keys this version does not know, and known ones that did not decode: kept as read.
    other: Mapping[str, Any] = field(default_factory=dict)

    def of(self, cls: type[K]) -> K | None:
        """The kind's record when it is a `cls`, else None."""
        return self.kind if isinstance(self.kind, cls) else None

    def to_json(self) -> dict[str, Any]:
        known: dict[str, Any] = self.kind.to_json() if self.kind is not None else {}
        for key, value in (
                ("headline_point", self.headline_point),
                ("energy", self.energy.to_json() if self.energy else None),
                ("gpu_window", self.gpu_window.to_json() if self.gpu_window else None),
                ("profile", self.profile.to_json() if self.profile else None),
                ("reference", self.reference.to_json() if self.reference else None),
                ("throttle_attribution", [a.to_json() for a in self.throttle_attribution]
                 if self.throttle_attribution is not None else None)):
            if value is not None:
                known[key] = value
        out = {k: known.pop(k) for k in ORDER if k in known}
        out.update(known)
        out.update({k: v for k, v in self.other.items() if k not in out})
        return out

    @classmethod
    def from_json(cls, d: Mapping[str, Any], benchmark: str) -> Extras:
        other = dict(d)

        def take(key: str, decode: Callable[[Any], Any]) -> Any:
            if key not in other or other[key] is None:
                return None
            try:
                value = decode(other[key])
            except ValueError:  # record_json.BadValue
                return None  # stays in `other`, as read
            del other[key]
            return value

        kind: KindExtra | None = None
        for candidate in _KIND_OF.get(benchmark, _BY_VARIANT):
            keys = [k for k in candidate.KEYS if k in d]
            if not keys:
                continue
            try:
                kind = candidate.from_json(d)
            except ValueError:  # record_json.BadValue, or a curve point that is not a pair
                break  # its keys stay in `other`, as read
            for k in keys:
                del other[k]
            break
        return cls(
            kind=kind,
            headline_point=take("headline_point", text),
            energy=take("energy", _energy),
            gpu_window=take("gpu_window", lambda v: GpuWindow.from_json(obj(v))),
            profile=take("profile", lambda v: Profile.from_json(obj(v))),
            reference=take("reference", lambda v: ReferenceNote.from_json(obj(v))),
            throttle_attribution=take("throttle_attribution",
                                      lambda v: seq(v, AttributionNote.from_json)),
            other=other)
