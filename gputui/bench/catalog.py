"""The built-in benchmarks as plain data, and validation of a run spec.

The parent (CLI, TUI, runner) imports this module to list benchmarks and to reject bad
input before a worker is started, so it must stay free of torch. Everything that needs
torch to decide (is CUDA there? does this GPU do bf16?) is checked again in the worker.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Literal

from gputui.bench.peaks import DTYPES, PeakRow, estimate, match
from gputui.bench.peaks import pct_of_peak as pct_of_peak  # re-exported for old call sites
from gputui.errors import UsageError

Kind = Literal["train", "infer", "probe"]

PRECISIONS: tuple[str, ...] = ("fp32", "tf32", "fp16", "bf16")
MODES: tuple[str, ...] = ("throughput", "latency")
TEST_HOOKS: tuple[str, ...] = ("crash", "hang", "oom", "exit")
# Spec "params" a caller may give although no benchmark has them by default. Test-only:
# the worker honours them only when test hooks are enabled (GPUTUI_BENCH_TEST_HOOKS=1).
# oom_above_batch: with test_hook "oom", batch-finder/sweep probes above this batch fail
# with a simulated out-of-memory error (and no other step does).
TEST_PARAMS: tuple[str, ...] = ("oom_above_batch",)
# Segmentation models run through the same image kinds: their output is a dict whose "out"
# holds per-pixel logits, trained against per-pixel labels (bench.worker.workloads).
SEGMENTATION_MODELS: tuple[str, ...] = ("lraspp_mobilenet_v3_large",)
# vit_ti_16: ViT-Tiny/16 (DeiT-Tiny's shape: 12 layers, 3 heads, width 192), a ViT small
# enough for a CPU.
CNN_MODELS: tuple[str, ...] = ("resnet18", "resnet50", "mobilenet_v3_large", "vit_b_16",
                               "vit_ti_16", *SEGMENTATION_MODELS)
VIT_MODELS: tuple[str, ...] = ("vit_b_16", "vit_ti_16")
RNN_MODELS: tuple[str, ...] = ("lstm", "gru")
LM_TRAIN_MODELS: tuple[str, ...] = ("gpt2", "gpt2-medium", "gpt-tiny")
LM_INFER_MODELS: tuple[str, ...] = ("llama2-7b", "gpt2", "gpt2-medium", "gpt-tiny",
                                    "llama-tiny")
# Benchmarks whose model and precision default by device (a CPU gets a tiny model in fp32,
# a GPU the published shape in bf16): the spec says "auto" until the device is known.
AUTO_PRECISION = "auto"

# Every key of the run spec (the worker's --spec-json; see gputui.bench.events) with its value
# when the caller leaves it out.
SPEC_DEFAULTS: Mapping[str, Any] = MappingProxyType(
    {
        "benchmark": None,
        "model": None,
        "device": "auto",
        "precision": "fp32",
        "batch_size": None,
        "steps": None,
        "duration_s": None,
        "warmup": None,
        "image_size": None,
        "seq_len": None,
        "channels_last": False,
        "compile": False,
        "mode": None,
        "sweep": False,
        # The sweep's batch sizes, ascending; None: the benchmark's doubling grid.
        "batch_sizes": None,
        "nproc": 1,
        "profile": False,
        "profile_dir": None,
        "threads": None,
        "seed": 0,
        "test_hook": None,
        "data": "device",  # where synthetic batches live: "device" or "host" (workloads.py)
        "shapes": None,  # matmul: [[M, N, K], ...] instead of params.size
        "repeat": 1,  # timed trials after one warm-up (result: trials, spread)
        # Across machines (bench.launch): N nodes × nproc ranks meeting at HOST:PORT.
        "nnodes": 1,
        "node_rank": 0,
        "rdzv_endpoint": None,
        # --baseline ID, resolved by the CLI: the same run on one process, for scaling.
        "baseline_id": None,
        "baseline_value": None,
        "baseline_world": None,
        # deepbench: which of DeepBench's lists (bench.deepbench.problems), None elsewhere.
        "op": None,  # gemm, conv, rnn, allreduce or all
        "problem_set": None,  # train or infer
        "shape_set": None,  # quick or full
        # NVTX ranges around the warm-up, the timed loop and each step (CUDA only), for
        # `nsys profile` (bench.worker.nvtx).
        "nvtx": False,
    }
)


# A default: a number, a model or precision name, or None (a latency variant's "no
# duration": it is bounded by steps instead).
Default = int | float | str | None
Defaults = Mapping[str, Default]


@dataclass(frozen=True)
class Benchmark:
    name: str
    kind: Kind
    description: str
    unit: str
    models: tuple[str, ...] = ()
    default_model: str | None = None
    # Defaults differ by device type: a CPU run must finish in seconds on a laptop, a GPU run
    # must be long and large enough to reach steady clocks. Keys are spec keys plus the
    # benchmark-specific parameters the worker reads (e.g. matmul "size").
    cpu: Defaults = field(default_factory=dict)
    cuda: Defaults = field(default_factory=dict)
    # Variants picked by mode (inference only): overrides applied on top of cpu/cuda.
    latency_cpu: Defaults = field(default_factory=dict)
    latency_cuda: Defaults = field(default_factory=dict)
    supports_sweep: bool = False
    supports_nproc: bool = False
    supports_profile: bool = False

    def defaults(self, device_type: str, mode: str | None = None) -> dict[str, Default]:
        base = dict(self.cuda if device_type == "cuda" else self.cpu)
        if mode == "latency":
            base.update(self.latency_cuda if device_type == "cuda" else self.latency_cpu)
        return base


BENCHMARKS: Mapping[str, Benchmark] = MappingProxyType(
    {
        b.name: b
        for b in (
            Benchmark(
                name="cnn-train",
                kind="train",
                description="Image-classifier training step (SGD) on synthetic images",
                unit="images/s",
                models=CNN_MODELS,
                default_model="resnet18",
                cpu={"batch_size": 8, "image_size": 64, "steps": 10, "warmup": 2},
                cuda={"batch_size": 64, "image_size": 224, "duration_s": 15.0, "warmup": 10},
                supports_sweep=True,
                supports_nproc=True,
                supports_profile=True,
            ),
            Benchmark(
                name="cnn-infer",
                kind="infer",
                description="Image-classifier inference: offline throughput or single-stream "
                "latency",
                unit="images/s",
                models=CNN_MODELS,
                default_model="resnet18",
                cpu={"batch_size": 16, "image_size": 64, "steps": 10, "warmup": 2},
                cuda={"batch_size": 128, "image_size": 224, "duration_s": 10.0, "warmup": 10},
                latency_cpu={"batch_size": 1, "steps": 30, "warmup": 3},
                latency_cuda={"batch_size": 1, "steps": 300, "duration_s": None, "warmup": 20},
                supports_sweep=True,
                supports_profile=True,
            ),
            Benchmark(
                name="rnn-train",
                kind="train",
                description="LSTM/GRU language-model training step on synthetic tokens",
                unit="tokens/s",
                models=RNN_MODELS,
                default_model="lstm",
                cpu={"batch_size": 16, "seq_len": 32, "steps": 10, "warmup": 2,
                     "vocab": 1000, "hidden": 128, "layers": 2},
                cuda={"batch_size": 64, "seq_len": 128, "duration_s": 15.0, "warmup": 10,
                      "vocab": 10000, "hidden": 1024, "layers": 2},
                supports_sweep=True,
                supports_nproc=True,
                supports_profile=True,
            ),
            Benchmark(
                name="rnn-infer",
                kind="infer",
                description="LSTM/GRU language-model inference: offline throughput or "
                "single-stream latency",
                unit="tokens/s",
                models=RNN_MODELS,
                default_model="lstm",
                cpu={"batch_size": 32, "seq_len": 32, "steps": 10, "warmup": 2,
                     "vocab": 1000, "hidden": 128, "layers": 2},
                cuda={"batch_size": 256, "seq_len": 128, "duration_s": 10.0, "warmup": 10,
                      "vocab": 10000, "hidden": 1024, "layers": 2},
                latency_cpu={"batch_size": 1, "steps": 30, "warmup": 3},
                latency_cuda={"batch_size": 1, "steps": 300, "duration_s": None, "warmup": 20},
                supports_sweep=True,
                supports_profile=True,
            ),
            Benchmark(
                name="train-to-accuracy",
                kind="train",
                description="Time and steps for a small CNN to reach a target validation "
                "accuracy on labels from a fixed random teacher network",
                unit="images/s",
                models=("small-cnn",),
                default_model="small-cnn",
                cpu={"batch_size": 64, "image_size": 16, "steps": 1000, "warmup": 2,
                     "target_accuracy": 0.7, "classes": 4, "eval_every": 25,
                     "val_samples": 1024},
                # Warm-up steps run on a throwaway copy of the model (see the kind).
                cuda={"batch_size": 256, "image_size": 32, "steps": 3000, "warmup": 10,
                      "target_accuracy": 0.8, "classes": 4, "eval_every": 25,
                      "val_samples": 4096},
            ),
            Benchmark(
                name="lm-train",
                kind="train",
                description="GPT-2 training step (nanoGPT's model, AdamW) on synthetic "
                "tokens: tokens/s and MFU",
                unit="tokens/s",
                models=LM_TRAIN_MODELS,
                cpu={"model": "gpt-tiny", "batch_size": 4, "steps": 6, "warmup": 2},
                # nanoGPT's GPT-2 run: 12 sequences of 1,024 tokens per micro-step, bf16.
                cuda={"model": "gpt2", "precision": "bf16", "batch_size": 12,
                      "duration_s": 20.0, "warmup": 10},
            ),
            Benchmark(
                name="lm-infer",
                kind="infer",
                description="LLM generation with a static KV cache, greedy: tokens/s, TTFT, "
                "TPOT, ITL, decode bandwidth and MBU; --sweep over batch sizes",
                unit="tokens/s",
                models=LM_INFER_MODELS,
                cpu={"model": "gpt-tiny", "batch_size": 1, "prompt_len": 16, "new_tokens": 8,
                     "steps": 5, "warmup": 1},
                # Llama-2-7B in bf16, one sequence, as gpt-fast measured it.
                cuda={"model": "llama2-7b", "precision": "bf16", "batch_size": 1,
                      "prompt_len": 128, "new_tokens": 128, "duration_s": 30.0, "warmup": 2},
                supports_sweep=True,
            ),
            Benchmark(
                name="attention",
                kind="probe",
                description="scaled_dot_product_attention TFLOP/s, forward and "
                "forward+backward, causal and not, at FlashAttention's benchmark shapes",
                unit="TFLOP/s",
                cpu={"tokens": 256, "hidden": 64, "min_seq": 64, "max_seq": 128,
                     "head_dim": 32, "steps": 3, "warmup": 1},
                # FlashAttention's benchmark: 16k tokens per batch, hidden 2,048, head dim 64
                # and 128 (head_dim unset), sequence 512 … 16k; time-bounded points.
                cuda={"precision": "bf16", "tokens": 16384, "hidden": 2048, "min_seq": 512,
                      "max_seq": 16384, "duration_s": 2.0, "warmup": 5},
            ),
            Benchmark(
                name="matmul",
                kind="probe",
                description="Dense matrix multiply TFLOP/s per dtype (fp32/tf32/fp16/bf16 as "
                "available), % of the device's peak where known",
                unit="TFLOP/s",
                cpu={"size": 512, "steps": 5, "warmup": 1},
                # Seconds per point, not steps: 30 products of 8192³ last ~45 ms on an H100,
                # a boost-clock burst before power capping sets in.
                cuda={"size": 8192, "duration_s": 2.0, "warmup": 10},
                supports_sweep=True,
            ),
            Benchmark(
                name="deepbench",
                kind="probe",
                description="DeepBench's GEMM, convolution, RNN and all-reduce problems: "
                "time per call, TFLOP/s and % of peak per shape",
                unit="TFLOP/s",
                # scale: every size divided by it (bench.deepbench.problems); a CPU runs
                # the lists 8× smaller in each dimension, a GPU DeepBench's own sizes.
                cpu={"op": "all", "problem_set": "train", "shape_set": "quick", "scale": 8,
                     "steps": 5, "warmup": 1},
                # fp16: DeepBench's own default precision for training. Seconds per shape.
                cuda={"op": "all", "problem_set": "train", "shape_set": "quick", "scale": 1,
                      "precision": "fp16", "duration_s": 0.2, "warmup": 3},
            ),
            Benchmark(
                name="membw",
                kind="probe",
                description="Memory bandwidth GB/s: copy and triad on arrays far larger than "
                "the cache; on CUDA also host<->device pinned and pageable",
                unit="GB/s",
                # 64 MiB per array is far beyond any CPU's L2 (and most L3s).
                cpu={"array_bytes": 64 << 20, "steps": 5, "warmup": 1},
                cuda={"array_bytes": 512 << 20, "host_bytes": 256 << 20, "duration_s": 2.0,
                      "warmup": 5},
            ),
            Benchmark(
                name="p2p",
                kind="probe",
                description="GPU-to-GPU copy GB/s for every ordered pair of GPUs (needs 2+ "
                "CUDA GPUs)",
                unit="GB/s",
                cpu={"bytes": 1 << 20, "steps": 5, "warmup": 1},
                cuda={"bytes": 256 << 20, "duration_s": 1.0, "warmup": 3},
            ),
            Benchmark(
                name="allreduce",
                kind="probe",
                description="NCCL all-reduce bus bandwidth GB/s across every GPU, as "
                "nccl-tests reports it (needs 2+ CUDA GPUs)",
                unit="GB/s",
                cpu={"bytes": 1 << 20, "steps": 5, "warmup": 1},
                cuda={"bytes": 256 << 20, "duration_s": 2.0, "warmup": 5},
            ),
            Benchmark(
                name="batch-finder",
                kind="probe",
                description="Largest training batch that fits in memory (OOM probing), with "
                "throughput at each size tried",
                unit="images/s",
                models=CNN_MODELS,
                default_model="resnet18",
                # On CPU nothing OOMs in reasonable time: cap by max batch and an RSS budget.
                cpu={"batch_size": 8, "image_size": 64, "steps": 2, "warmup": 1,
                     "memory_budget_frac": 0.5, "headroom_frac": 0.1},
                # 10 timed steps after 3 warm-up ones: cuDNN picks its algorithms in the
                # first steps, so 3 timed steps measured mostly autotuning.
                cuda={"batch_size": 8192, "image_size": 224, "steps": 10, "warmup": 3,
                      "headroom_frac": 0.1},
            ),
        )
    }
)

# The GPU peak table lives in gputui.bench.peaks; these keep the old call sites working
# with the dtype-keyed dicts they read ("fp16", …, "mem_gbps").


def _legacy(row: PeakRow) -> dict[str, float]:
    out = {d: row.tflops(d) for d in DTYPES}
    return {**{k: v for k, v in out.items() if v is not None},
            **({"mem_gbps": row.mem_bw_gbps} if row.mem_bw_gbps else {})}


def known_peak(device_name: str | None) -> dict[str, float] | None:
    """The peak table's row for the NVML device name (see peaks.match), or None."""
    row = match(device_name).row
    return _legacy(row) if row is not None else None


def estimated_peak_tflops(
    capability: tuple[int, int] | None, sm_count: int | None, clock_mhz: float | None,
    device_name: str | None = None,
) -> dict[str, float] | None:
    row = estimate(device_name, capability, sm_count, clock_mhz)
    return _legacy(row) if row is not None else None


def get(name: str) -> Benchmark:
    try:
        return BENCHMARKS[name]
    except KeyError:
        raise UsageError(
            f"unknown benchmark {name!r} (choose from {', '.join(BENCHMARKS)})"
        ) from None


def _int(spec: Mapping[str, Any], key: str, *, minimum: int) -> None:
    v = spec.get(key)
    if v is None:
        return
    if isinstance(v, bool) or not isinstance(v, int):
        raise UsageError(f"{key.replace('_', ' ')} must be an integer, got {v!r}")
    if v < minimum:
        raise UsageError(f"{key.replace('_', ' ')} must be ≥ {minimum}, got {v}")


def _device_type(device: str) -> str:
    return device.split(":", 1)[0]


def _shapes(out: dict[str, Any], name: str) -> None:
    shapes = out.get("shapes")
    if shapes is None:
        return
    if name != "matmul":
        raise UsageError(f"--shape applies to matmul, not {name}")
    if out.get("sweep"):
        raise UsageError("give --shape or --sweep, not both")
    ok = isinstance(shapes, list) and shapes and all(
        isinstance(s, list | tuple) and len(s) == 3 and all(
            isinstance(d, int) and not isinstance(d, bool) and d > 0 for d in s)
        for s in shapes)
    if not ok:
        raise UsageError("matmul shapes must be M×N×K triples of positive whole numbers")
    out["shapes"] = [list(s) for s in shapes]


def _deepbench(out: dict[str, Any], name: str) -> None:
    """op / set / shapes: deepbench's only, each one of its choices."""
    from gputui.bench.deepbench import problems

    given = {k: out.get(k) for k in ("op", "problem_set", "shape_set")
             if out.get(k) is not None}
    if given and name != "deepbench":
        flags = {"op": "--op", "problem_set": "--set", "shape_set": "--shapes"}
        raise UsageError(f"{', '.join(flags[k] for k in given)} applies to deepbench, "
                         f"not {name}")
    if not given:
        return
    problem = problems.usage_problem(given.get("op", "all"),
                                     given.get("problem_set", "train"),
                                     given.get("shape_set", "quick"))
    if problem:
        raise UsageError(problem)


def _batch_sizes(out: dict[str, Any], bench: Benchmark) -> None:
    """An explicit sweep grid: whole numbers ≥ 1, kept ascending and once each; giving one
    asks for a sweep."""
    sizes = out.get("batch_sizes")
    if sizes is None:
        return
    ok = isinstance(sizes, list | tuple) and sizes and all(
        isinstance(b, int) and not isinstance(b, bool) and b >= 1 for b in sizes)
    if not ok:
        raise UsageError("batch sizes must be a list of whole numbers ≥ 1, e.g. 1,8,32")
    if not bench.supports_sweep or bench.name == "matmul":
        raise UsageError(f"--batch-sizes applies to benchmarks that sweep batch sizes, "
                         f"not {bench.name}")
    grid = sorted(set(sizes))
    if out["batch_size"] is not None and out["batch_size"] != grid[-1]:
        raise UsageError("give --batch-size or --batch-sizes, not both")
    if bench.kind == "train" and grid[0] < 2:
        raise UsageError(f"{bench.name} sweeps start at batch 2 (BatchNorm cannot train on "
                         "one sample)")
    out["batch_sizes"] = grid
    out["sweep"] = True


# Kinds whose timed phase is not one loop that can simply run again.
NO_REPEAT = ("train-to-accuracy", "batch-finder", "p2p", "allreduce")


def _repeat(out: dict[str, Any], name: str) -> None:
    if out["repeat"] is None:
        out["repeat"] = 1
    _int(out, "repeat", minimum=1)
    if out["repeat"] > 1 and name in NO_REPEAT:
        raise UsageError(f"--repeat does not apply to {name}")
    if out["repeat"] > 1 and out["nproc"] > 1:
        raise UsageError("--repeat cannot be combined with --nproc")


def _nodes(out: dict[str, Any], bench: Benchmark) -> None:
    from gputui.bench.launch import parse_endpoint

    for key in ("nnodes", "node_rank"):
        if out[key] is None:
            out[key] = SPEC_DEFAULTS[key]
    _int(out, "nnodes", minimum=1)
    _int(out, "node_rank", minimum=0)
    if out["node_rank"] >= out["nnodes"]:
        raise UsageError(f"--node-rank {out['node_rank']} is not below --nnodes "
                         f"{out['nnodes']}")
    if out["rdzv_endpoint"] is not None:
        parse_endpoint(str(out["rdzv_endpoint"]))
    if out["nnodes"] > 1 and not bench.supports_nproc:
        raise UsageError(f"--nnodes applies to cnn-train and rnn-train, not {bench.name}")
    if out["nnodes"] > 1 and (out["sweep"] or out["profile"]):
        raise UsageError("--nnodes cannot be combined with --sweep or --profile")
    if out["repeat"] > 1 and out["nnodes"] > 1:
        raise UsageError("--repeat cannot be combined with --nnodes")
    value = out["baseline_value"]
    if value is not None and (isinstance(value, bool) or not isinstance(value, int | float)
                              or value <= 0):
        raise UsageError("baseline value must be a positive number")
    _int(out, "baseline_world", minimum=1)


def validate_spec(spec: Mapping[str, Any]) -> dict[str, Any]:
    """Check a run spec and return it with every contract key present.

    Raises UsageError with a one-line message. Device-dependent defaults (batch, steps, …)
    are left as given; `resolve_spec` fills them once the device is known.
    """
    if not isinstance(spec, Mapping):
        raise UsageError("benchmark spec must be a JSON object")
    out: dict[str, Any] = {**SPEC_DEFAULTS, **spec}
    for key in ("channels_last", "compile", "sweep", "profile", "nvtx"):
        out[key] = bool(out[key])
    name = out["benchmark"]
    if not isinstance(name, str) or not name:
        raise UsageError("no benchmark given")
    bench = get(name)

    if bench.models:
        if out["model"] is None:
            out["model"] = bench.default_model
        if out["model"] is not None and out["model"] not in bench.models:
            raise UsageError(
                f"unknown model {out['model']!r} for {name} (choose from "
                f"{', '.join(bench.models)})"
            )
    elif out["model"] is not None:
        raise UsageError(f"{name} takes no model (got {out['model']!r})")

    device = out["device"]
    if not isinstance(device, str) or not device:
        raise UsageError(f"bad device {device!r} (use cpu, cuda, cuda:N or auto)")
    dtype_, _, index = device.partition(":")
    if dtype_ not in ("cpu", "cuda", "auto") or (index and (dtype_ != "cuda" or not
                                                            index.isdigit())):
        raise UsageError(f"bad device {device!r} (use cpu, cuda, cuda:N or auto)")

    prec = out["precision"]
    if prec == AUTO_PRECISION:
        prec = None
    elif prec not in PRECISIONS:
        raise UsageError(f"bad precision {prec!r} (choose from {', '.join(PRECISIONS)})")
    if dtype_ == "cpu" and prec == "fp16":
        raise UsageError("fp16 needs a CUDA device; on CPU use bf16 or fp32")
    if dtype_ == "cpu" and prec == "tf32":
        raise UsageError("tf32 is a CUDA tensor-core mode; on CPU use fp32 or bf16")

    _int(out, "batch_size", minimum=1)
    _int(out, "steps", minimum=1)
    _int(out, "warmup", minimum=0)
    _int(out, "seq_len", minimum=1)
    _int(out, "nproc", minimum=1)
    _int(out, "threads", minimum=1)
    _int(out, "seed", minimum=0)
    _int(out, "image_size", minimum=16)
    d = out["duration_s"]
    if d is not None and (isinstance(d, bool) or not isinstance(d, int | float) or d <= 0):
        raise UsageError(f"duration must be a positive number of seconds, got {d!r}")

    if out["model"] in VIT_MODELS and out["image_size"] is not None and out["image_size"] % 16:
        raise UsageError(f"{out['model']} needs an image size that is a multiple of 16")
    if bench.models == CNN_MODELS and out["image_size"] is not None and out["image_size"] < 32:
        raise UsageError(f"{out['model']} needs an image size of at least 32")

    if (name == "cnn-train" and out["model"] not in VIT_MODELS and out["batch_size"] == 1):
        # BatchNorm in training mode needs more than one value per channel.
        raise UsageError(f"training {out['model']} needs a batch size of at least 2 "
                         "(its BatchNorm layers cannot train on one image)")

    mode = out["mode"]
    if mode is not None:
        if mode not in MODES:
            raise UsageError(f"bad mode {mode!r} (choose from {', '.join(MODES)})")
        if bench.kind != "infer":
            raise UsageError(f"--mode applies to inference benchmarks, not {name}")
        if mode == "latency" and out["batch_size"] is not None and out["batch_size"] != 1:
            raise UsageError("latency mode is single-stream: batch size 1")
    if out["sweep"]:
        if not bench.supports_sweep:
            raise UsageError(f"{name} does not support a batch-size sweep")
        if mode == "latency":
            raise UsageError("a batch-size sweep measures throughput; drop --mode latency")
    if mode is not None and name == "lm-infer":
        raise UsageError("--mode does not apply to lm-infer (it reports latency and "
                         "throughput together)")
    if out["nproc"] > 1:
        if not bench.supports_nproc:
            raise UsageError(f"--nproc applies to cnn-train and rnn-train, not {name}")
        if out["sweep"] or out["profile"]:
            raise UsageError("--nproc cannot be combined with --sweep or --profile")
    if out["profile"] and not bench.supports_profile:
        raise UsageError(f"{name} does not support --profile")
    if out["profile_dir"] is not None and not isinstance(out["profile_dir"], str):
        raise UsageError("profile dir must be a path")
    _shapes(out, name)
    _deepbench(out, name)
    _batch_sizes(out, bench)
    _repeat(out, name)
    _nodes(out, bench)
    if out["data"] not in ("device", "host"):
        raise UsageError(f"bad data placement {out['data']!r} (choose from device, host)")
    if out["data"] == "host" and name not in ("cnn-train", "cnn-infer", "rnn-train",
                                              "rnn-infer"):
        raise UsageError(f"--data host applies to cnn/rnn training and inference, not {name}")
    if out["test_hook"] is not None and out["test_hook"] not in TEST_HOOKS:
        raise UsageError(f"bad test hook {out['test_hook']!r}")
    params = out.get("params")
    if params is not None:
        if not isinstance(params, Mapping):
            raise UsageError("params must be a JSON object")
        known = set(bench.cpu) | set(bench.cuda) | set(TEST_PARAMS)
        for key, value in params.items():
            if key in SPEC_DEFAULTS or key not in known:
                raise UsageError(f"unknown parameter {key!r} for {name}")
            if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
                raise UsageError(f"parameter {key} must be a positive number, got {value!r}")
        out["params"] = dict(params)
    return out


def resolve_spec(spec: Mapping[str, Any], device_type: str) -> dict[str, Any]:
    """Fill device-dependent defaults into a validated spec.

    Spec keys keep the contract's names; benchmark-specific parameters (matmul size, vocab,
    target accuracy, …) are added under "params". A run is bounded by steps or by duration:
    if the caller gave either, the other is not filled from the defaults.
    """
    bench = get(spec["benchmark"])
    defaults = bench.defaults(device_type, spec.get("mode"))
    out = dict(spec)
    if out.get("batch_sizes"):
        out["batch_size"] = max(out["batch_sizes"])  # an explicit grid's largest point
    if out.get("precision") == AUTO_PRECISION:
        out["precision"] = defaults.get("precision", "fp32")
    if bench.kind == "infer" and bench.name != "lm-infer" and out.get("mode") is None:
        out["mode"] = "throughput"  # lm-infer has no mode: it reports both together
    user_bounded = out.get("steps") is not None or out.get("duration_s") is not None
    for key in SPEC_DEFAULTS:
        if key in ("steps", "duration_s") and user_bounded:
            continue
        if key in defaults and out.get(key) is None:
            out[key] = defaults[key]
    if out.get("steps") is None and out.get("duration_s") is None:
        out["steps"] = 10
    if out.get("warmup") is None:
        out["warmup"] = 0
    # A caller's params (validated by validate_spec) override the device defaults.
    out["params"] = {**{k: v for k, v in defaults.items() if k not in SPEC_DEFAULTS},
                     **dict(spec.get("params") or {})}
    return out
