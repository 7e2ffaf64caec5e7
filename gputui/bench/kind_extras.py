"""The per-kind records of a result's `extra` (`bench.extras.Extras.kind`): what a sweep,
the batch finder, train-to-accuracy, matmul, membw, attention, p2p, lm-infer, deepbench
and a DDP run measure beyond the common fields. Each record's fields are its JSON keys,
read and written here, and `Extras` puts them in and takes them out of `extra`."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, TypeVar

from gputui.bench.record_json import (
    flag,
    num,
    obj,
    opt_num,
    opt_text,
    opt_whole,
    seq,
    table,
    text,
    whole,
)

# A record is written whole, nulls included (lm-infer's keys only when they say something).


@dataclass(frozen=True)
class SweepExtra:
    """--sweep (training and inference): the batch sizes tried and the best one."""

    KEYS: ClassVar[tuple[str, ...]] = ("sweep_sizes", "best_batch")
    sweep_sizes: tuple[int, ...]
    best_batch: int | None = None  # None: no batch ran (or the sweep was cut short)

    def to_json(self) -> dict[str, Any]:
        return {"sweep_sizes": list(self.sweep_sizes), "best_batch": self.best_batch}

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> SweepExtra:
        return cls(sweep_sizes=seq(d.get("sweep_sizes"), whole),
                   best_batch=opt_whole(d.get("best_batch")))


@dataclass(frozen=True)
class BatchFinderExtra:
    """batch-finder: the largest batch that fits, what stopped the search, the probes."""

    KEYS: ClassVar[tuple[str, ...]] = (
        "max_batch_fit", "first_failed_batch", "limit", "probes", "probes_fit",
        "probes_failed", "recommended_batch", "host_oom")
    max_batch_fit: int | None
    first_failed_batch: int | None
    limit: str  # "cap", "oom", "memory_budget" or "host_oom"
    probes: int
    probes_fit: int
    probes_failed: int
    recommended_batch: int | None  # largest fit within the headroom
    host_oom: str | None  # the host out-of-memory error that ended the search

    def to_json(self) -> dict[str, Any]:
        return {"max_batch_fit": self.max_batch_fit,
                "first_failed_batch": self.first_failed_batch, "limit": self.limit,
                "probes": self.probes, "probes_fit": self.probes_fit,
                "probes_failed": self.probes_failed,
                "recommended_batch": self.recommended_batch, "host_oom": self.host_oom}

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> BatchFinderExtra:
        return cls(max_batch_fit=opt_whole(d.get("max_batch_fit")),
                   first_failed_batch=opt_whole(d.get("first_failed_batch")),
                   limit=text(d.get("limit")), probes=whole(d.get("probes")),
                   probes_fit=whole(d.get("probes_fit")),
                   probes_failed=whole(d.get("probes_failed")),
                   recommended_batch=opt_whole(d.get("recommended_batch")),
                   host_oom=opt_text(d.get("host_oom")))


def _curve_point(v: Any) -> tuple[int, float]:
    step, acc = seq(v, num)
    return whole(step), acc


@dataclass(frozen=True)
class AccuracyExtra:
    """train-to-accuracy: time and steps to the target, and the accuracy curve."""

    KEYS: ClassVar[tuple[str, ...]] = (
        "target_accuracy", "reached", "steps_to_target", "final_accuracy",
        "time_to_target_s", "wall_to_target_s", "setup_time_s", "train_time_s",
        "eval_time_s", "curve", "stopped_by")
    target_accuracy: float
    reached: bool
    steps_to_target: int | None
    final_accuracy: float
    time_to_target_s: float | None  # training seconds only
    wall_to_target_s: float | None  # evaluations included
    setup_time_s: float  # the warm-up on a throwaway copy
    train_time_s: float
    eval_time_s: float
    curve: tuple[tuple[int, float], ...]  # (step, validation accuracy) per evaluation
    stopped_by: str | None  # "target", "steps", "duration" or "cancel"

    def to_json(self) -> dict[str, Any]:
        return {"target_accuracy": self.target_accuracy, "reached": self.reached,
                "steps_to_target": self.steps_to_target,
                "final_accuracy": self.final_accuracy,
                "time_to_target_s": self.time_to_target_s,
                "wall_to_target_s": self.wall_to_target_s,
                "setup_time_s": self.setup_time_s, "train_time_s": self.train_time_s,
                "eval_time_s": self.eval_time_s,
                "curve": [[step, acc] for step, acc in self.curve],
                "stopped_by": self.stopped_by}

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> AccuracyExtra:
        return cls(target_accuracy=num(d.get("target_accuracy")),
                   reached=flag(d.get("reached")),
                   steps_to_target=opt_whole(d.get("steps_to_target")),
                   final_accuracy=num(d.get("final_accuracy")),
                   time_to_target_s=opt_num(d.get("time_to_target_s")),
                   wall_to_target_s=opt_num(d.get("wall_to_target_s")),
                   setup_time_s=num(d.get("setup_time_s")),
                   train_time_s=num(d.get("train_time_s")),
                   eval_time_s=num(d.get("eval_time_s")),
                   curve=seq(d.get("curve"), _curve_point),
                   stopped_by=opt_text(d.get("stopped_by")))


def _shape(v: Any) -> tuple[int, ...]:
    return seq(v, whole)


@dataclass(frozen=True)
class MatmulExtra:
    """matmul: the best TFLOP/s per dtype, its shape, and the peak it is held against."""

    KEYS: ClassVar[tuple[str, ...]] = ("tflops", "best_shape", "peak_tflops", "peak_source",
                                       "peak_gpu")
    tflops: Mapping[str, float]  # dtype → best TFLOP/s
    best_shape: Mapping[str, tuple[int, ...]]  # dtype → [M, N, K]
    peak_tflops: Mapping[str, float | None] | None  # dtype → dense peak; None: no row
    peak_source: str | None  # "table" or "estimated"
    peak_gpu: str | None  # the peak table's row

    def to_json(self) -> dict[str, Any]:
        return {"tflops": dict(self.tflops),
                "best_shape": {k: list(v) for k, v in self.best_shape.items()},
                "peak_tflops": dict(self.peak_tflops) if self.peak_tflops is not None
                else None,
                "peak_source": self.peak_source, "peak_gpu": self.peak_gpu}

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> MatmulExtra:
        peak = d.get("peak_tflops")
        return cls(tflops=table(d.get("tflops"), num),
                   best_shape=table(d.get("best_shape"), _shape),
                   peak_tflops=table(peak, opt_num) if peak is not None else None,
                   peak_source=opt_text(d.get("peak_source")),
                   peak_gpu=opt_text(d.get("peak_gpu")))


@dataclass(frozen=True)
class MembwExtra:
    """membw: GB/s per kernel (copy, triad, host↔device) and the peak bandwidth."""

    KEYS: ClassVar[tuple[str, ...]] = ("gbps", "peak_gbps", "peak_source", "peak_gpu")
    gbps: Mapping[str, float | None]  # kernel → GB/s
    peak_gbps: float | None  # never estimated: None without a row of the peak table
    peak_source: str | None
    peak_gpu: str | None

    def to_json(self) -> dict[str, Any]:
        return {"gbps": dict(self.gbps), "peak_gbps": self.peak_gbps,
                "peak_source": self.peak_source, "peak_gpu": self.peak_gpu}

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> MembwExtra:
        return cls(gbps=table(d.get("gbps"), opt_num), peak_gbps=opt_num(d.get("peak_gbps")),
                   peak_source=opt_text(d.get("peak_source")),
                   peak_gpu=opt_text(d.get("peak_gpu")))


@dataclass(frozen=True)
class AttentionExtra:
    """attention: the dense peak its points are held against."""

    KEYS: ClassVar[tuple[str, ...]] = ("peak_tflops", "peak_dtype")
    peak_tflops: float | None
    peak_dtype: str | None

    def to_json(self) -> dict[str, Any]:
        return {"peak_tflops": self.peak_tflops, "peak_dtype": self.peak_dtype}

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> AttentionExtra:
        return cls(peak_tflops=opt_num(d.get("peak_tflops")),
                   peak_dtype=opt_text(d.get("peak_dtype")))


@dataclass(frozen=True)
class P2pExtra:
    """p2p: copy GB/s per ordered pair of GPUs ("0->1")."""

    KEYS: ClassVar[tuple[str, ...]] = ("gbps",)
    gbps: Mapping[str, float]

    def to_json(self) -> dict[str, Any]:
        return {"gbps": dict(self.gbps)}

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> P2pExtra:
        return cls(gbps=table(d.get("gbps"), num))


@dataclass(frozen=True)
class LmInferExtra:
    """lm-infer: why a sweep stopped early, and why there is no MBU. Each key is written
    only when it has something to say."""

    KEYS: ClassVar[tuple[str, ...]] = ("sweep_stopped", "peak_bandwidth")
    sweep_stopped: str | None = None  # "batch 64: out of memory"
    peak_bandwidth: str | None = None  # "none: the peak table has no row for this GPU"

    def to_json(self) -> dict[str, Any]:
        return {k: v for k, v in (("sweep_stopped", self.sweep_stopped),
                                  ("peak_bandwidth", self.peak_bandwidth)) if v is not None}

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> LmInferExtra:
        return cls(sweep_stopped=opt_text(d.get("sweep_stopped")),
                   peak_bandwidth=opt_text(d.get("peak_bandwidth")))


@dataclass(frozen=True)
class DeepbenchRow:
    """One DeepBench problem as it ran: its row as DeepBench writes it, what ran (the same
    but on a scaled-down CPU run), and the measures. A figure that does not apply (the
    FLOPs of an all-reduce, the bandwidth of a GEMM) or was not measured is None, and
    `note` says why when nothing was measured."""

    op: str  # gemm, conv, rnn, allreduce
    shape: str  # DeepBench's row: "1760,16,1760,n,n", "700,161,1,4,32,20,5,0,0,2,2", …
    ran: str  # the row as run (the CPU's scaled copy; the same on CUDA)
    flops: int | None  # per call, counted as bench.deepbench.problems says
    median_us: float | None  # median time per call
    tflops: float | None  # flops ÷ median time
    pct_of_peak: float | None  # of the dense peak at the run's precision
    busbw_gbps: float | None  # all-reduce: algbw × 2(n−1)/n (nccl-tests)
    calls: int  # timed calls
    note: str | None = None  # "needs 2+ CUDA GPUs (this run sees 1)", "out of memory"

    def to_json(self) -> dict[str, Any]:
        return {"op": self.op, "shape": self.shape, "ran": self.ran, "flops": self.flops,
                "median_us": self.median_us, "tflops": self.tflops,
                "pct_of_peak": self.pct_of_peak, "busbw_gbps": self.busbw_gbps,
                "calls": self.calls, "note": self.note}

    @classmethod
    def from_json(cls, v: Any) -> DeepbenchRow:
        d = obj(v)
        return cls(op=text(d.get("op")), shape=text(d.get("shape")), ran=text(d.get("ran")),
                   flops=opt_whole(d.get("flops")), median_us=opt_num(d.get("median_us")),
                   tflops=opt_num(d.get("tflops")), pct_of_peak=opt_num(d.get("pct_of_peak")),
                   busbw_gbps=opt_num(d.get("busbw_gbps")), calls=whole(d.get("calls")),
                   note=opt_text(d.get("note")))


@dataclass(frozen=True)
class DeepbenchExtra:
    """deepbench: every problem timed, in run order, and the peak they are held against."""

    KEYS: ClassVar[tuple[str, ...]] = ("deepbench_rows", "peak_tflops", "peak_dtype",
                                       "peak_source", "peak_gpu")
    rows: tuple[DeepbenchRow, ...]
    peak_tflops: float | None  # dense peak at peak_dtype; None: not known (always on CPU)
    peak_dtype: str | None
    peak_source: str | None  # "table" or "estimated"
    peak_gpu: str | None

    def to_json(self) -> dict[str, Any]:
        return {"deepbench_rows": [r.to_json() for r in self.rows],
                "peak_tflops": self.peak_tflops, "peak_dtype": self.peak_dtype,
                "peak_source": self.peak_source, "peak_gpu": self.peak_gpu}

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> DeepbenchExtra:
        return cls(rows=seq(d.get("deepbench_rows"), DeepbenchRow.from_json),
                   peak_tflops=opt_num(d.get("peak_tflops")),
                   peak_dtype=opt_text(d.get("peak_dtype")),
                   peak_source=opt_text(d.get("peak_source")),
                   peak_gpu=opt_text(d.get("peak_gpu")))


@dataclass(frozen=True)
class AllReduce:
    """A DDP run's gradient all-reduce, timed alone after the loop."""

    ms: float | None
    bytes: int
    step_ms: float | None
    share_of_step: float | None
    definition: str

    def to_json(self) -> dict[str, Any]:
        return {"ms": self.ms, "bytes": self.bytes, "step_ms": self.step_ms,
                "share_of_step": self.share_of_step, "definition": self.definition}

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> AllReduce:
        return cls(ms=opt_num(d.get("ms")), bytes=whole(d.get("bytes")),
                   step_ms=opt_num(d.get("step_ms")),
                   share_of_step=opt_num(d.get("share_of_step")),
                   definition=text(d.get("definition")))


@dataclass(frozen=True)
class Scaling:
    """A DDP run against --baseline (the same run on one process)."""

    baseline_id: str | None
    baseline_value: float
    baseline_world: int
    world_size: int
    total: float | None
    efficiency: float
    definition: str

    def to_json(self) -> dict[str, Any]:
        return {"baseline_id": self.baseline_id, "baseline_value": self.baseline_value,
                "baseline_world": self.baseline_world, "world_size": self.world_size,
                "total": self.total, "efficiency": self.efficiency,
                "definition": self.definition}

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> Scaling:
        return cls(baseline_id=opt_text(d.get("baseline_id")),
                   baseline_value=num(d.get("baseline_value")),
                   baseline_world=whole(d.get("baseline_world")),
                   world_size=whole(d.get("world_size")), total=opt_num(d.get("total")),
                   efficiency=num(d.get("efficiency")), definition=text(d.get("definition")))


@dataclass(frozen=True)
class DdpExtra:
    """A data-parallel run (--nproc, --nnodes): each rank's share, the all-reduce, and
    the scaling against a baseline when one was given."""

    KEYS: ClassVar[tuple[str, ...]] = ("per_rank_samples_per_s", "per_rank_samples",
                                       "allreduce", "scaling")
    per_rank_samples_per_s: tuple[float, ...]
    per_rank_samples: tuple[int, ...]
    allreduce: AllReduce | None = None  # not timed when the loop stopped early
    scaling: Scaling | None = None  # only against --baseline

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.allreduce is not None:
            out["allreduce"] = self.allreduce.to_json()
        if self.scaling is not None:
            out["scaling"] = self.scaling.to_json()
        out["per_rank_samples_per_s"] = list(self.per_rank_samples_per_s)
        out["per_rank_samples"] = list(self.per_rank_samples)
        return out

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> DdpExtra:
        ar, sc = d.get("allreduce"), d.get("scaling")
        return cls(per_rank_samples_per_s=seq(d.get("per_rank_samples_per_s"), num),
                   per_rank_samples=seq(d.get("per_rank_samples"), whole),
                   allreduce=AllReduce.from_json(obj(ar)) if ar is not None else None,
                   scaling=Scaling.from_json(obj(sc)) if sc is not None else None)


KindExtra = (SweepExtra | BatchFinderExtra | AccuracyExtra | MatmulExtra | MembwExtra
             | AttentionExtra | P2pExtra | LmInferExtra | DdpExtra | DeepbenchExtra)
K = TypeVar("K", SweepExtra, BatchFinderExtra, AccuracyExtra, MatmulExtra, MembwExtra,
            AttentionExtra, P2pExtra, LmInferExtra, DdpExtra, DeepbenchExtra)
