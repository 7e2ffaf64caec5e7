"""The run spec: its keys with their defaults, checked against the catalog before a
worker starts (`validate_spec`) and filled with the device's defaults once the device is
known (`resolve_spec`).

`gputui.bench.request.RunRequest` is the typed form callers use; this module is the
dict-level contract it is checked and resolved through. Torch-free: the parent imports it,
and everything that needs torch to decide (is CUDA there? does this GPU do bf16?) is
checked again in the worker.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from gputui.bench.catalog import (
    AUTO_PRECISION,
    CNN_MODELS,
    MODES,
    PRECISIONS,
    VIT_MODELS,
    Benchmark,
    get,
)
from gputui.errors import UsageError

TEST_HOOKS: tuple[str, ...] = ("crash", "hang", "oom", "exit")
# Spec "params" a caller may give although no benchmark has them by default. Test-only:
# the worker honours them only when test hooks are enabled (GPUTUI_BENCH_TEST_HOOKS=1).
# oom_above_batch: with test_hook "oom", batch-finder/sweep probes above this batch fail
# with a simulated out-of-memory error (and no other step does).
TEST_PARAMS: tuple[str, ...] = ("oom_above_batch",)

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


def _int(spec: Mapping[str, Any], key: str, *, minimum: int) -> None:
    v = spec.get(key)
    if v is None:
        return
    if isinstance(v, bool) or not isinstance(v, int):
        raise UsageError(f"{key.replace('_', ' ')} must be an integer, got {v!r}")
    if v < minimum:
        raise UsageError(f"{key.replace('_', ' ')} must be ≥ {minimum}, got {v}")


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
