"""`python -m gputui.bench.worker --spec-json '<JSON>'`: run one benchmark, print events.

The contract is shared_notes/bench_protocol.md. Our events go to a private duplicate of
the original stdout; fd 1 itself is pointed at stderr, so anything torch or a C library
prints can never split one of our JSON lines.
"""

from __future__ import annotations

import argparse
import gc
import json
import logging
import os
import platform
import signal
import socket
import sys
import time
import traceback
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from gputui.bench import catalog, events
from gputui.bench.memory import PeakRss
from gputui.errors import UsageError

if TYPE_CHECKING:
    import torch

    from gputui.bench.energy import NvmlLink
    from gputui.bench.timing import LoopStats

log = logging.getLogger("gputui.bench.worker")

HOOK_ENV = "GPUTUI_BENCH_TEST_HOOKS"


class Cancelled(Exception):
    """SIGTERM arrived between measurements: report what we have."""


class SimulatedCrash(RuntimeError):
    pass


def now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


# ---- output ---------------------------------------------------------------------------------

class Emitter:
    def __init__(self, fd: int, t0: float) -> None:
        self.fd = fd
        self.t0 = t0

    def __call__(self, event: dict[str, Any]) -> None:
        data = (events.encode(event, time.monotonic() - self.t0) + "\n").encode()
        while data:
            n = os.write(self.fd, data)
            data = data[n:]


def claim_stdout() -> int:
    """Keep the real stdout for events; send everything else written to fd 1 to stderr."""
    sys.stdout.flush()
    fd = os.dup(1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return fd


# ---- cancellation and test hooks ---------------------------------------------------------------

class CancelFlag:
    def __init__(self) -> None:
        self.set_ = False

    def set(self, *_: object) -> None:
        self.set_ = True

    def is_set(self) -> bool:
        return self.set_


@dataclass
class Ctx:
    spec: dict[str, Any]
    device: torch.device
    env: dict[str, Any]
    emit: Callable[[dict[str, Any]], None]
    cancel: CancelFlag
    hooks: bool
    link: NvmlLink | None = None
    doc: dict[str, Any] = field(default_factory=dict)
    current_batch: int | None = None
    hook_fired: bool = False

    @property
    def bench(self) -> catalog.Benchmark:
        return catalog.get(self.spec["benchmark"])

    @property
    def params(self) -> dict[str, Any]:
        return self.spec.get("params", {})

    def should_stop(self) -> bool:
        return self.cancel.is_set()

    def checkpoint(self) -> None:
        if self.cancel.is_set():
            raise Cancelled

    def fire_hook(self) -> None:
        """Simulated failures for the runner's tests; inert unless the env var is set."""
        hook = self.spec.get("test_hook")
        if not self.hooks or hook is None or self.hook_fired:
            return
        if hook == "oom" and "oom_above_batch" in self.params:
            return  # the batch-threshold variant: see probe_hook
        self.hook_fired = True
        log.warning("test hook %r firing", hook)
        if hook == "crash":
            raise SimulatedCrash("simulated crash (test hook)")
        if hook == "oom":
            import torch

            raise torch.cuda.OutOfMemoryError(
                "CUDA out of memory. Tried to allocate 2.00 GiB (simulated by test hook)")
        if hook == "exit":
            os._exit(3)
        if hook == "hang":
            # Like a hung kernel: SIGTERM's handler only sets a flag nobody reads now, so
            # the runner's SIGKILL escalation is what ends this.
            while True:
                time.sleep(3600)

    def probe_hook(self, batch: int) -> None:
        """test_hook "oom" + params.oom_above_batch N: any probe above batch N "OOMs"."""
        limit = self.params.get("oom_above_batch")
        if not self.hooks or self.spec.get("test_hook") != "oom" or limit is None:
            return
        if batch > int(limit):
            import torch

            raise torch.cuda.OutOfMemoryError(
                f"CUDA out of memory at batch {batch} (simulated above batch {int(limit)} "
                "by test hook)")


# ---- error classification ---------------------------------------------------------------------

def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    msg = text[0] if text else ""
    return f"{type(exc).__name__}: {msg}" if msg else type(exc).__name__


def is_oom(exc: BaseException) -> bool:
    try:
        import torch

        if isinstance(exc, torch.cuda.OutOfMemoryError):
            return True
    except ImportError:
        pass
    if isinstance(exc, MemoryError):
        return True
    msg = str(exc).lower()
    return isinstance(exc, RuntimeError) and (
        "out of memory" in msg or "can't allocate memory" in msg)


def is_cuda_error(exc: BaseException) -> bool:
    try:
        import torch

        accel = getattr(torch, "AcceleratorError", None)
        if accel is not None and isinstance(exc, accel):
            return True
    except ImportError:
        pass
    if not isinstance(exc, RuntimeError) or isinstance(exc, SimulatedCrash):
        return False
    msg = str(exc)
    return any(s in msg for s in ("CUDA error", "CUDA driver", "cuDNN error", "CUBLAS_STATUS",
                                  "NCCL", "device-side assert", "CUDA kernel"))


def oom_suggestion(batch: int | None, spec: dict[str, Any]) -> str:
    parts = []
    if batch and batch > 1:
        parts.append(f"try --batch-size {max(1, batch // 2)}")
    if spec.get("precision") == "fp32":
        parts.append("--precision bf16 or fp16")
    model = spec.get("model")
    finder = "gputui bench run batch-finder" + (f" --model {model}" if model and
                                            model in catalog.CNN_MODELS else "")
    parts.append(f"`{finder}` finds the largest batch that fits")
    return "; ".join(parts)


def classify(exc: BaseException, batch: int | None, spec: dict[str, Any]) -> dict[str, Any]:
    if isinstance(exc, UsageError):
        return events.error("invalid", str(exc))
    if is_oom(exc):
        where = f" at batch {batch}" if batch else ""
        return events.error("oom", f"out of memory{where}: {_first_line(exc)}",
                            batch_size=batch, suggestion=oom_suggestion(batch, spec))
    if is_cuda_error(exc):
        return events.error("cuda", _first_line(exc), batch_size=batch,
                            suggestion="check `nvidia-smi` and the kernel log (dmesg) for "
                            "Xid errors; rerun with CUDA_LAUNCH_BLOCKING=1 to locate it")
    return events.error("crash", _first_line(exc), batch_size=batch)


# ---- environment and common result fields -------------------------------------------------------

def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


# Host memory peaks on CPU are per measured interval (see gputui.bench.memory).
HOST_PEAK = PeakRss()


def torchvision_version() -> str | None:
    """Without importing torchvision (over a second) when the benchmark does not use it."""
    mod = sys.modules.get("torchvision")
    if mod is not None:
        return str(mod.__version__)
    import importlib.util
    import re

    # torchvision/version.py holds the full version ("0.29.1+cu130"); the distribution
    # metadata may not carry the local "+cu..." part.
    spec = importlib.util.find_spec("torchvision")
    if spec is None:
        return None
    for folder in spec.submodule_search_locations or []:
        try:
            with open(os.path.join(folder, "version.py"), encoding="utf-8") as f:
                m = re.search(r"^__version__\s*=\s*['\"]([^'\"]+)['\"]", f.read(), re.M)
        except OSError:
            continue
        if m:
            return m.group(1)
    try:
        from importlib.metadata import version

        return version("torchvision")
    except Exception:
        return None


def collect_env(device: torch.device, link: NvmlLink | None) -> dict[str, Any]:
    import torch

    try:
        cudnn = torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None
    except Exception:
        cudnn = None
    env: dict[str, Any] = {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "hostname": socket.gethostname(),
        "cpu": cpu_model(),
        "cpu_count": os.cpu_count(),
        "torch": torch.__version__,
        "torchvision": torchvision_version(),
        "cuda": torch.version.cuda,
        "cudnn": cudnn,
        "driver": None,
        "device": str(device),
        "device_name": cpu_model(),
        "clocks_at_start": None,
        "num_threads": torch.get_num_threads(),
        "num_interop_threads": torch.get_num_interop_threads(),
    }
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        env.update({
            "device_name": props.name,
            "device_total_memory_bytes": int(props.total_memory),
            "sm_count": int(props.multi_processor_count),
            "compute_capability": f"{props.major}.{props.minor}",
            "cuda_device_count": torch.cuda.device_count(),
            "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
        })
        if link is not None and link.available:
            env["driver"] = link.driver_version()
            env["clocks_at_start"] = link.clocks_now()
            env["nvml"] = link.static_info()
    return env


def base_settings(ctx: Ctx) -> dict[str, Any]:
    import torch

    from gputui.bench.workloads import configure_precision

    s = ctx.spec
    settings: dict[str, Any] = {
        "benchmark": s["benchmark"], "model": s["model"], "mode": s.get("mode"),
        "precision": s["precision"], "batch_size": s.get("batch_size"),
        "image_size": s.get("image_size"), "seq_len": s.get("seq_len"),
        "steps": s.get("steps"), "duration_s": s.get("duration_s"), "warmup": s.get("warmup"),
        "channels_last": s["channels_last"], "compile": s["compile"], "sweep": s["sweep"],
        "nproc": s["nproc"], "seed": s["seed"], "profile": s["profile"],
        "threads": torch.get_num_threads(), "interop_threads": torch.get_num_interop_threads(),
        "params": dict(ctx.params),
        "timing": "cuda_events" if ctx.device.type == "cuda" else "host_clock",
        "sync": "window ends only (windows of ~0.5 s)",
        "peak_memory": ("torch.cuda.max_memory_allocated since the timed loop (or probe) "
                        "began" if ctx.device.type == "cuda" else _host_peak_text()),
    }
    settings.update(configure_precision(ctx.device, s["precision"]))
    return settings


def new_doc(ctx: Ctx, started_at: str) -> dict[str, Any]:
    s = ctx.spec
    return {
        "id": uuid.uuid4().hex,
        "benchmark": s["benchmark"], "model": s["model"], "device": str(ctx.device),
        "device_name": ctx.env.get("device_name"), "precision": s["precision"],
        "batch_size": s.get("batch_size"), "status": "ok",
        "throughput": None, "latency_ms": None, "phases_ms": None, "step_time_ms": None,
        "peak_memory_bytes": None, "energy_j_per_sample": None, "avg_power_w": None,
        "throttle_episodes": [], "settings": {}, "env": ctx.env,
        "started_at": started_at, "finished_at": None, "duration_s": None,
        "steps": 0, "samples": 0, "points": [], "error": None, "extra": {},
    }


def _host_peak_text() -> str:
    probe = PeakRss()
    probe.reset()  # finds the method this platform allows
    probe.peak()
    return probe.description


def reset_peak(device: torch.device) -> None:
    """Start a measured interval: peak memory is reported per interval, not per process."""
    import torch

    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    else:
        HOST_PEAK.reset()


def peak_memory(device: torch.device) -> int:
    import torch

    if device.type == "cuda":
        return int(torch.cuda.max_memory_allocated(device))
    return HOST_PEAK.peak()


def free_memory(device: torch.device) -> None:
    import torch

    gc.collect()
    if device.type == "cuda":
        torch.cuda.empty_cache()
    else:
        _malloc_trim()


def _malloc_trim() -> None:
    """Give freed heap back to the OS (glibc), so the next probe starts from a low RSS."""
    if not sys.platform.startswith("linux"):
        return
    try:
        import ctypes

        ctypes.CDLL(None).malloc_trim(0)
    except (OSError, AttributeError):
        pass


# ---- device ---------------------------------------------------------------------------------

def resolve_device(spec: dict[str, Any]) -> torch.device:
    import torch

    want = spec["device"]
    if want == "auto":
        want = "cuda" if torch.cuda.is_available() else "cpu"
    if want.startswith("cuda"):
        if not torch.cuda.is_available():
            raise UsageError(
                f"--device {spec['device']}: no CUDA device available "
                f"(torch {torch.__version__}, CUDA build {torch.version.cuda or 'none'})")
        count = torch.cuda.device_count()
        index = int(want.split(":", 1)[1]) if ":" in want else torch.cuda.current_device()
        if index >= count:
            raise UsageError(f"--device {want}: only {count} CUDA device(s) visible")
        torch.cuda.set_device(index)
        device = torch.device("cuda", index)
    else:
        device = torch.device("cpu")
    prec = spec["precision"]
    if device.type == "cpu" and prec in ("fp16", "tf32"):
        raise UsageError(f"{prec} needs a CUDA device; on CPU use bf16 or fp32")
    if device.type == "cuda":
        major, _ = torch.cuda.get_device_capability(device)
        if prec == "bf16" and not torch.cuda.is_bf16_supported():
            raise UsageError(f"bf16 is not supported on {torch.cuda.get_device_name(device)}")
        if prec == "tf32" and major < 8:
            raise UsageError("tf32 needs compute capability 8.0 or newer")
    return device


# ---- shared measurement pieces ----------------------------------------------------------------

def do_warmup(ctx: Ctx, step: Callable[[int], None], n: int) -> None:
    from gputui.bench.timing import sync

    for i in range(n):
        ctx.checkpoint()
        step(i)
        ctx.emit(events.warmup(i + 1, n))
    sync(ctx.device)


def hooked(ctx: Ctx, step: Callable[[int], None], at: int) -> Callable[[int], None]:
    def run(i: int) -> None:
        if i == at:
            ctx.fire_hook()
        step(i)

    return run


def measure(ctx: Ctx, step: Callable[[int], None], samples_per_step: int, unit: str,
            *, steps: int | None = None, duration_s: float | None = None,
            use_spec_bounds: bool = True) -> LoopStats:
    from gputui.bench.timing import timed_loop

    if use_spec_bounds:
        steps, duration_s = ctx.spec.get("steps"), ctx.spec.get("duration_s")
    at = 1 if steps is None or steps > 1 else 0
    return timed_loop(
        hooked(ctx, step, at), device=ctx.device, samples_per_step=samples_per_step,
        steps=steps, duration_s=duration_s, unit=unit, emit=ctx.emit,
        should_stop=ctx.should_stop, make_progress=events.progress,
    )


def fill_loop(doc: dict[str, Any], stats: LoopStats, samples_per_step: int, unit: str,
              scale: int = 1) -> None:
    from gputui.bench.timing import summary_ms, throughput_summary

    doc["throughput"] = throughput_summary(stats.step_ms, samples_per_step * scale,
                                           stats.samples, stats.wall_s, unit)
    s = summary_ms(stats.step_ms)
    doc["step_time_ms"] = {k: s[k] for k in ("p50", "p90", "p99", "median", "mean")}
    doc["steps"] = stats.steps
    doc["samples"] = stats.samples
    if stats.stopped_early:
        doc["status"] = "cancelled"


def measure_phases(ctx: Ctx, step: Any, n: int) -> dict[str, float]:
    from gputui.bench.timing import PhaseTimer

    timer = PhaseTimer(ctx.device)
    for i in range(n):
        step.instrumented(i, timer)
    phases = timer.medians()
    out = {k: phases.get(k, 0.0) for k in events.PHASES}
    out["total"] = sum(out.values())
    return out


def maybe_profile(ctx: Ctx, step: Callable[[int], None]) -> None:
    if not ctx.spec["profile"] or ctx.cancel.is_set():
        return
    from gputui.bench.profiling import profile_steps

    n = 5 if ctx.device.type == "cuda" else 2
    ctx.doc["extra"]["profile"] = profile_steps(
        step, ctx.device, steps=n, out_dir=ctx.spec.get("profile_dir"),
        name=f"{ctx.spec['benchmark']}-{ctx.spec['model']}")


def energy_meter(ctx: Ctx) -> Any:
    from gputui.bench.energy import EnergyMeter

    return EnergyMeter(ctx.link if ctx.link is not None and ctx.link.available else None)


def record_energy(doc: dict[str, Any], reading: dict[str, Any]) -> None:
    """EnergyMeter.stop() → the result's two energy fields and extra.energy."""
    doc["energy_j_per_sample"] = reading["energy_j_per_sample"]
    doc["avg_power_w"] = reading["avg_power_w"]
    if reading.get("extra") is not None:
        doc["extra"]["energy"] = reading["extra"]


def point_doc(ev: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in ev.items() if k != "event"}


# ---- benchmarks --------------------------------------------------------------------------------

def start_timed(ctx: Ctx, step_cls: Any) -> tuple[Any, Any, Any]:
    """Build the workload and its step, warm up, then start the peak-memory and energy
    windows: everything before the timed loop that training and inference share."""
    from gputui.bench.workloads import make_workload

    spec, dev = ctx.spec, ctx.device
    wl = make_workload(spec, dev, spec["batch_size"])
    ctx.current_batch = spec["batch_size"]
    ctx.doc["settings"]["shapes"] = wl.shapes
    ctx.checkpoint()
    step = step_cls(wl, dev, spec["precision"], spec["compile"])
    do_warmup(ctx, step, spec["warmup"])
    reset_peak(dev)
    meter = energy_meter(ctx)
    meter.start()
    return wl, step, meter


def run_train(ctx: Ctx) -> None:
    from gputui.bench.workloads import TrainStep

    doc, dev = ctx.doc, ctx.device
    unit = ctx.bench.unit
    wl, step, meter = start_timed(ctx, TrainStep)
    stats = measure(ctx, step, wl.samples_per_step, unit)
    record_energy(doc, meter.stop(stats.samples))
    doc["peak_memory_bytes"] = peak_memory(dev)
    fill_loop(doc, stats, wl.samples_per_step, unit)
    if not stats.stopped_early:
        n = 10 if dev.type == "cuda" else 3
        doc["phases_ms"] = measure_phases(ctx, step, n)
        doc["settings"]["phases"] = (
            f"separate instrumented pass of {n} steps with a device sync between phases, "
            "after the timed loop (which has none); medians per phase")
        ctx.emit(events.phase(doc["phases_ms"]))
        maybe_profile(ctx, step)


def run_infer(ctx: Ctx) -> None:
    from gputui.bench.timing import latency_loop, latency_summary, percentile, summary_ms
    from gputui.bench.workloads import InferStep

    spec, doc, dev = ctx.spec, ctx.doc, ctx.device
    unit = ctx.bench.unit
    wl, step, meter = start_timed(ctx, InferStep)
    if spec["mode"] == "latency":
        doc["settings"]["latency"] = ("single-stream: one request at a time; each includes "
                                      "host→device copy, forward and a device sync")
        steps = spec.get("steps")
        lat, wall, stopped = latency_loop(
            hooked(ctx, step, 1 if steps is None or steps > 1 else 0), device=dev,
            steps=steps, duration_s=spec.get("duration_s"), emit=ctx.emit,
            make_progress=events.progress, unit=unit, samples_per_request=wl.samples_per_step,
            should_stop=ctx.should_stop)
        samples = len(lat) * wl.samples_per_step
        record_energy(doc, meter.stop(samples))
        rates = [wl.samples_per_step / (ms / 1000.0) for ms in lat if ms > 0]
        doc["throughput"] = {"median": percentile(rates, 50),
                             "mean": samples / wall if wall > 0 else None,
                             "p10": percentile(rates, 10), "p90": percentile(rates, 90),
                             "unit": unit}
        doc["latency_ms"] = latency_summary(lat)
        s = summary_ms(lat)
        doc["step_time_ms"] = {k: s[k] for k in ("p50", "p90", "p99", "median", "mean")}
        doc["steps"], doc["samples"] = len(lat), samples
        if stopped:
            doc["status"] = "cancelled"
    else:
        stats = measure(ctx, step, wl.samples_per_step, unit)
        record_energy(doc, meter.stop(stats.samples))
        fill_loop(doc, stats, wl.samples_per_step, unit)
        # In offline mode each step is one batch: its time is the batch's latency.
        doc["latency_ms"] = latency_summary(stats.step_ms)
        doc["settings"]["latency"] = "offline: per-batch step time from the timed loop"
    doc["peak_memory_bytes"] = peak_memory(dev)
    maybe_profile(ctx, step)


def sweep_sizes(max_batch: int, start: int = 1) -> list[int]:
    sizes, b = [], min(start, max_batch)
    while b < max_batch:
        sizes.append(b)
        b *= 2
    sizes.append(max_batch)
    return sizes


def run_sweep(ctx: Ctx) -> None:
    from gputui.bench.timing import latency_summary, throughput_summary
    from gputui.bench.workloads import InferStep, TrainStep, make_workload

    spec, doc, dev = ctx.spec, ctx.doc, ctx.device
    unit, train = ctx.bench.unit, ctx.bench.kind == "train"
    # Training starts at 2: BatchNorm cannot train on one sample with a 1×1 feature map.
    sizes = sweep_sizes(spec["batch_size"], 2 if train else 1)
    doc["extra"]["sweep_sizes"] = sizes
    best: tuple[float, int, dict[str, Any]] | None = None
    for b in sizes:
        if ctx.cancel.is_set():
            doc["status"] = "cancelled"
            break
        ctx.current_batch = b
        failed: str | None = None
        # The previous point's model and batches go before this one's are built, and their
        # heap goes back to the OS: the per-point peak starts from a clean baseline.
        wl = step = None  # type: ignore[assignment]
        free_memory(dev)
        try:
            wl = make_workload(spec, dev, b)
            step = (TrainStep if train else InferStep)(wl, dev, spec["precision"],
                                                       spec["compile"])
            ctx.probe_hook(b)
            do_warmup(ctx, step, spec["warmup"])
            reset_peak(dev)
            stats = measure(ctx, step, wl.samples_per_step, unit)
            tp = throughput_summary(stats.step_ms, wl.samples_per_step, stats.samples,
                                    stats.wall_s, unit)
            ev = events.point(label=f"batch {b}", batch_size=b, throughput=tp["median"],
                              unit=unit,
                              latency_ms=None if train else latency_summary(stats.step_ms),
                              peak_memory_bytes=peak_memory(dev), samples=stats.samples)
            if best is None or (tp["median"] or 0) > best[0]:
                best = (tp["median"] or 0.0, b, tp)
            doc["steps"] += stats.steps
            doc["samples"] += stats.samples
        except Exception as exc:
            if not is_oom(exc):
                raise
            failed = f"out of memory: {_first_line(exc)}"
            ev = events.point(label=f"batch {b}", batch_size=b, throughput=None, unit=unit,
                              ok=False, error=failed)
        ctx.emit(ev)
        doc["points"].append(point_doc(ev))
        if failed:
            # Larger batches need more memory still.
            wl = step = None  # type: ignore[assignment]
            free_memory(dev)
            break
    doc["peak_memory_bytes"] = peak_memory(dev)
    if best is not None:
        doc["throughput"], doc["batch_size"] = best[2], best[1]
        doc["extra"]["best_batch"] = best[1]
    else:
        doc["extra"]["best_batch"] = None


def run_batch_finder(ctx: Ctx) -> None:
    from gputui.bench.timing import throughput_summary
    from gputui.bench.workloads import TrainStep, make_workload

    spec, doc, dev = ctx.spec, ctx.doc, ctx.device
    unit = ctx.bench.unit
    cap = int(spec["batch_size"])
    budget: int | None = None
    if dev.type == "cpu":
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
        budget = int(total * float(ctx.params.get("memory_budget_frac", 0.5)))
    doc["settings"]["max_batch"] = cap
    doc["settings"]["memory_budget_bytes"] = budget
    doc["settings"]["probe"] = "training step; doubling from 2, then bisection after a failure"
    doc["settings"]["probe_memory"] = (
        "peak per probe: torch.cuda.max_memory_allocated after a reset" if dev.type == "cuda"
        else "peak per probe: " + _host_peak_text())
    results: dict[int, dict[str, Any]] = {}

    def probe(b: int) -> bool:
        ctx.checkpoint()
        ctx.current_batch = b
        err: str | None = None
        tp: dict[str, Any] | None = None
        mem: int | None = None
        n_steps = n_samples = 0
        # Each probe's peak is its own: reset before the model is built, so weights,
        # activations and optimizer state all count, and an earlier, larger probe does not.
        free_memory(dev)
        reset_peak(dev)
        try:
            ctx.probe_hook(b)
            wl = make_workload(spec, dev, b)
            step = TrainStep(wl, dev, spec["precision"], spec["compile"])
            do_warmup(ctx, step, spec["warmup"])
            stats = measure(ctx, step, wl.samples_per_step, unit,
                            steps=spec.get("steps") or 2, use_spec_bounds=False)
            tp = throughput_summary(stats.step_ms, wl.samples_per_step, stats.samples,
                                    stats.wall_s, unit)
            n_steps, n_samples = stats.steps, stats.samples
            mem = peak_memory(dev)
            if budget is not None and mem > budget:
                err = f"over the memory budget ({mem} > {budget} bytes)"
        except Exception as exc:
            if not is_oom(exc):
                raise
            err = f"out of memory: {_first_line(exc)}"
        wl = step = None  # type: ignore[assignment]
        free_memory(dev)
        ev = events.point(label=f"batch {b}", batch_size=b,
                          throughput=tp["median"] if tp else None, unit=unit, ok=err is None,
                          error=err, peak_memory_bytes=mem, samples=n_samples)
        ctx.emit(ev)
        doc["points"].append(point_doc(ev))
        doc["steps"] += n_steps
        doc["samples"] += n_samples
        if err is None:
            results[b] = {"throughput": tp, "peak_memory_bytes": mem}
        return err is None

    ok_max: int | None = None
    fail_min: int | None = None
    b = min(2, cap)  # BatchNorm cannot train on a single sample at small image sizes
    limit = "cap"
    while True:
        if probe(b):
            ok_max = b
            if b >= cap:
                break
            b = min(b * 2, cap)
        else:
            fail_min = b
            limit = "oom" if budget is None or "budget" not in doc["points"][-1]["error"] \
                else "memory_budget"
            break
    # Bisect between the last fit and the first failure, a few probes at most.
    for _ in range(4):
        if ok_max is None or fail_min is None or fail_min - ok_max <= 1:
            break
        mid = (ok_max + fail_min) // 2
        if probe(mid):
            ok_max = mid
        else:
            fail_min = mid
    fits = sum(1 for p in doc["points"] if p.get("ok"))
    doc["extra"].update({"max_batch_fit": ok_max, "first_failed_batch": fail_min,
                         "limit": limit, "probes": len(doc["points"]), "probes_fit": fits,
                         "probes_failed": len(doc["points"]) - fits})
    doc["batch_size"] = ok_max
    if ok_max is not None:
        doc["throughput"] = results[ok_max]["throughput"]
        doc["peak_memory_bytes"] = results[ok_max]["peak_memory_bytes"]
    # steps/samples are the timed ones summed over every probe (warm-up excluded).


def run_train_to_accuracy(ctx: Ctx) -> None:
    import torch
    from torch import nn

    from gputui.bench.timing import sync
    from gputui.bench.workloads import SmallCNN, Teacher, autocast, synthetic_images

    spec, doc, dev, p = ctx.spec, ctx.doc, ctx.device, ctx.params
    b, size, classes = spec["batch_size"], spec["image_size"], int(p["classes"])
    ctx.current_batch = b
    target = float(p["target_accuracy"])
    # Bounds: --steps N stops after exactly N steps, --duration S after the step that
    # crosses S seconds of training time (evaluation excluded); the target ends it earlier.
    eval_every = int(p["eval_every"])
    max_steps: int | None = spec.get("steps")
    duration_s: float | None = spec.get("duration_s")
    channels_last = bool(spec["channels_last"])
    torch.manual_seed(spec["seed"])
    gen = torch.Generator(device=dev).manual_seed(spec["seed"] + 1)
    calib = torch.randn(4096, 3, size, size, device=dev, generator=gen)
    teacher = Teacher(classes, calib).to(dev).eval()
    del calib
    student = SmallCNN(classes).to(dev)
    if spec["channels_last"]:
        student = student.to(memory_format=torch.channels_last)
    x_val = synthetic_images(int(p["val_samples"]), size, dev, gen, channels_last)
    y_val = teacher(x_val).argmax(1)
    opt = torch.optim.AdamW(student.parameters(), lr=3e-3)
    loss_fn = nn.CrossEntropyLoss()
    scaler = (torch.amp.GradScaler("cuda")
              if spec["precision"] == "fp16" and dev.type == "cuda" else None)
    doc["settings"].update({
        "shapes": {"input": [b, 3, size, size], "classes": classes},
        "task": "labels = argmax of a fixed random linear teacher on 2×2-pooled Gaussian "
                "images (balanced classes); fresh training images every step; fixed "
                "validation set",
        "optimizer": "AdamW lr=3e-3", "target_accuracy": target, "eval_every": eval_every,
        "max_steps": max_steps, "max_duration_s": duration_s,
        "val_samples": int(p["val_samples"]),
        "input_memory_format": "channels_last" if channels_last else "contiguous",
    })

    def accuracy() -> float:
        student.eval()
        with torch.inference_mode(), autocast(dev, spec["precision"]):
            pred = student(x_val).argmax(1)
        student.train()
        return float((pred == y_val).float().mean().item())

    curve: list[list[float]] = []
    train_s = eval_s = 0.0
    reached_at: int | None = None
    sync(dev)
    t_start = time.perf_counter()
    t_last_progress = t_start
    step = 0
    acc = 0.0
    bound = None

    def out_of_budget(in_chunk_s: float) -> str | None:
        if max_steps is not None and step >= max_steps:
            return "steps"
        if duration_s is not None and train_s + in_chunk_s >= duration_s:
            return "duration"
        return None

    while not ctx.cancel.is_set():
        if step == 1:
            ctx.fire_hook()
        t0 = time.perf_counter()
        chunk = 0
        while chunk < eval_every:
            # A host clock read, no device sync: on CUDA the bound may be crossed by the
            # queued work of one chunk at most.
            bound = out_of_budget(time.perf_counter() - t0)
            if bound is not None:
                break
            chunk += 1
            x = synthetic_images(b, size, dev, gen, channels_last)
            y = teacher(x).argmax(1)
            with autocast(dev, spec["precision"]):
                loss = loss_fn(student(x).float(), y)
            if scaler is not None:
                scaler.scale(loss).backward()
                scaler.step(opt)
                scaler.update()
            else:
                loss.backward()
                opt.step()
            opt.zero_grad(set_to_none=True)
            step += 1
        if chunk == 0:
            break
        sync(dev)
        t1 = time.perf_counter()
        train_s += t1 - t0
        acc = accuracy()  # the .item() here is the sync every eval_every steps
        eval_s += time.perf_counter() - t1
        curve.append([step, round(acc, 4)])
        now = time.perf_counter()
        bound = bound or out_of_budget(0.0)
        done = acc >= target or bound is not None
        if now - t_last_progress >= 0.5 or done:
            ctx.emit(events.progress(step=step, of=max_steps, elapsed_s=now - t_start,
                                     duration_s=duration_s, throughput=chunk * b / (t1 - t0),
                                     unit=ctx.bench.unit, window_s=t1 - t0,
                                     samples=chunk * b))
            t_last_progress = now
        if acc >= target:
            reached_at = step
            break
        if bound is not None:
            break
    wall = time.perf_counter() - t_start
    samples = step * b
    doc["throughput"] = {"median": samples / train_s if train_s else None,
                         "mean": samples / train_s if train_s else None, "p10": None,
                         "p90": None, "unit": ctx.bench.unit}
    doc["steps"], doc["samples"] = step, samples
    doc["peak_memory_bytes"] = peak_memory(dev)
    doc["extra"].update({
        "target_accuracy": target, "reached": reached_at is not None,
        "steps_to_target": reached_at, "final_accuracy": acc,
        "time_to_target_s": wall if reached_at is not None else None,
        "train_time_s": train_s, "eval_time_s": eval_s, "curve": curve,
        "stopped_by": "target" if reached_at is not None else (
            "cancel" if ctx.cancel.is_set() else bound),
    })
    if ctx.cancel.is_set() and reached_at is None:
        doc["status"] = "cancelled"


def run_matmul(ctx: Ctx) -> None:
    import torch

    from gputui.bench.timing import throughput_summary

    spec, doc, dev = ctx.spec, ctx.doc, ctx.device
    n = int(ctx.params["size"])
    flops = 2 * n**3
    dtypes: list[str] = ["fp32"]
    if dev.type == "cuda":
        major, _ = torch.cuda.get_device_capability(dev)
        if major >= 8:
            dtypes.append("tf32")
        dtypes.append("fp16")
        if torch.cuda.is_bf16_supported():
            dtypes.append("bf16")
    else:
        dtypes.append("bf16")
    peak, source = peak_table(ctx, "tflops")
    doc["settings"].update({"size": n, "shapes": {"a": [n, n], "b": [n, n]},
                            "flops_per_step": flops, "dtypes": dtypes})
    torch_dtype = {"fp32": torch.float32, "tf32": torch.float32, "fp16": torch.float16,
                   "bf16": torch.bfloat16}
    by_dtype: dict[str, float | None] = {}
    saved = torch.backends.cuda.matmul.allow_tf32
    for dt in dtypes:
        ctx.checkpoint()
        if dev.type == "cuda":
            torch.backends.cuda.matmul.allow_tf32 = dt == "tf32"
        gen = torch.Generator(device=dev).manual_seed(spec["seed"])
        a = torch.randn(n, n, device=dev, dtype=torch_dtype[dt], generator=gen)
        bm = torch.randn(n, n, device=dev, dtype=torch_dtype[dt], generator=gen)
        c = torch.empty(n, n, device=dev, dtype=torch_dtype[dt])

        def step(_: int, a: Any = a, bm: Any = bm, c: Any = c) -> None:
            torch.mm(a, bm, out=c)

        do_warmup(ctx, step, spec["warmup"])
        stats = measure(ctx, step, 1, "steps/s")
        tp = throughput_summary(stats.step_ms, flops / 1e12, stats.samples * flops / 1e12,
                                stats.wall_s, "TFLOP/s")
        pk = peak.get(dt) if peak else None
        pct = catalog.pct_of_peak(tp["median"], pk)
        ev = events.point(label=dt, batch_size=None, throughput=tp["median"], unit="TFLOP/s",
                          dtype=dt, peak_tflops=pk, pct_of_peak=pct, peak_source=source if pk
                          else None, mean=tp["mean"])
        ctx.emit(ev)
        doc["points"].append(point_doc(ev))
        by_dtype[dt] = tp["median"]
        doc["steps"] += stats.steps
        if dt == spec["precision"] or doc["throughput"] is None:
            doc["throughput"] = tp
        if stats.stopped_early:
            doc["status"] = "cancelled"
            break
    if dev.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = saved
    doc["extra"].update({"tflops": by_dtype, "peak_tflops": dict(peak) if peak else None,
                         "peak_source": source})
    doc["peak_memory_bytes"] = peak_memory(dev)


def peak_table(ctx: Ctx, what: str) -> tuple[dict[str, float] | None, str | None]:
    """(peaks, "table"|"estimated") for the device, or (None, None)."""
    if ctx.device.type != "cuda":
        return None, None
    known = catalog.known_peak(ctx.env.get("device_name"))
    if known is not None:
        return dict(known), "table"
    if what != "tflops":
        return None, None
    cap = ctx.env.get("compute_capability")
    nv = ctx.env.get("nvml") or {}
    capability = tuple(int(x) for x in cap.split(".")) if cap else None
    est = catalog.estimated_peak_tflops(capability, ctx.env.get("sm_count"),  # type: ignore[arg-type]
                                        nv.get("clock_sm_max_mhz"))
    return (est, "estimated") if est else (None, None)


def run_membw(ctx: Ctx) -> None:
    import torch

    from gputui.bench.timing import throughput_summary

    spec, doc, dev = ctx.spec, ctx.doc, ctx.device
    nbytes = int(ctx.params["array_bytes"])
    n = nbytes // 4
    peak, source = peak_table(ctx, "gbps")
    peak_gbps = peak.get("mem_gbps") if peak else None
    doc["settings"].update({"array_bytes": n * 4, "dtype": "float32",
                            "bytes_counted": "copy 2×array (read+write), triad 3×array",
                            "shapes": {"array": [n]}})
    a = torch.ones(n, device=dev)
    b = torch.full((n,), 2.0, device=dev)
    c = torch.full((n,), 0.5, device=dev)
    def copy(_: int) -> None:
        b.copy_(a)

    def triad(_: int) -> None:
        torch.add(b, c, alpha=3.0, out=a)

    kernels: list[tuple[str, Callable[[int], None], int, float | None]] = [
        ("copy", copy, 2 * n * 4, peak_gbps),
        ("triad", triad, 3 * n * 4, peak_gbps),
    ]
    if dev.type == "cuda":
        hb = int(ctx.params.get("host_bytes", nbytes)) // 4
        dev_buf = torch.empty(hb, device=dev)
        pinned = torch.empty(hb, pin_memory=True)
        pageable = torch.empty(hb)
        doc["settings"]["host_bytes"] = hb * 4

        def transfer(dst: torch.Tensor, src: torch.Tensor, nb: bool) -> Callable[[int], None]:
            def run(_: int) -> None:
                dst.copy_(src, non_blocking=nb)

            return run

        kernels += [
            ("h2d_pinned", transfer(dev_buf, pinned, True), hb * 4, None),
            ("h2d_pageable", transfer(dev_buf, pageable, False), hb * 4, None),
            ("d2h_pinned", transfer(pinned, dev_buf, True), hb * 4, None),
            ("d2h_pageable", transfer(pageable, dev_buf, False), hb * 4, None),
        ]
    by_kernel: dict[str, float | None] = {}
    for label, fn, moved, pk in kernels:
        ctx.checkpoint()
        do_warmup(ctx, fn, spec["warmup"])
        stats = measure(ctx, fn, 1, "steps/s")
        tp = throughput_summary(stats.step_ms, moved / 1e9, stats.samples * moved / 1e9,
                                stats.wall_s, "GB/s")
        pct = catalog.pct_of_peak(tp["median"], pk)
        ev = events.point(label=label, batch_size=None, throughput=tp["median"], unit="GB/s",
                          bytes_per_step=moved, peak_gbps=pk, pct_of_peak=pct,
                          peak_source=source if pk else None, mean=tp["mean"])
        ctx.emit(ev)
        doc["points"].append(point_doc(ev))
        by_kernel[label] = tp["median"]
        doc["steps"] += stats.steps
        if label == "triad":
            doc["throughput"] = tp
        if stats.stopped_early:
            doc["status"] = "cancelled"
            break
    if doc["throughput"] is None and doc["points"]:
        doc["throughput"] = {"median": doc["points"][0]["throughput"], "mean": None,
                             "p10": None, "p90": None, "unit": "GB/s"}
    doc["extra"].update({"gbps": by_kernel, "peak_gbps": peak_gbps, "peak_source": source})
    doc["peak_memory_bytes"] = peak_memory(dev)


def run_benchmark(ctx: Ctx) -> None:
    bench = ctx.bench
    if bench.name == "matmul":
        return run_matmul(ctx)
    if bench.name == "membw":
        return run_membw(ctx)
    if bench.name == "batch-finder":
        return run_batch_finder(ctx)
    if bench.name == "train-to-accuracy":
        return run_train_to_accuracy(ctx)
    if ctx.spec["sweep"]:
        return run_sweep(ctx)
    if ctx.spec["nproc"] > 1:
        from gputui.bench.distributed import run_ddp

        return run_ddp(ctx)
    if bench.kind == "train":
        return run_train(ctx)
    return run_infer(ctx)


# ---- entry ------------------------------------------------------------------------------------

def finish(ctx: Ctx, t_start: float) -> dict[str, Any]:
    doc = ctx.doc
    doc["finished_at"] = now_iso()
    doc["duration_s"] = time.monotonic() - t_start
    return doc


def main(argv: list[str] | None = None) -> int:
    t0 = time.monotonic()
    started_at = now_iso()
    emit = Emitter(claim_stdout(), t0)
    cancel = CancelFlag()
    signal.signal(signal.SIGTERM, cancel.set)
    signal.signal(signal.SIGINT, cancel.set)
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING,
                        format="gputui-worker: %(message)s")

    parser = argparse.ArgumentParser(prog="python -m gputui.bench.worker")
    parser.add_argument("--spec-json", required=True)
    try:
        args = parser.parse_args(argv)
    except SystemExit:
        emit(events.error("invalid", "worker needs --spec-json '<JSON>'"))
        return 2
    try:
        raw = json.loads(args.spec_json)
        spec = catalog.validate_spec(raw)
    except ValueError as exc:
        emit(events.error("invalid", f"spec is not valid JSON: {exc}"))
        return 2
    except UsageError as exc:
        emit(events.error("invalid", str(exc)))
        return 2

    ctx: Ctx | None = None
    link: NvmlLink | None = None
    try:
        try:
            import torch
        except ImportError:
            raise UsageError("benchmarks need torch: pip install 'gputui[bench]'") from None
        if spec["threads"]:
            torch.set_num_threads(spec["threads"])
        device = resolve_device(spec)
        spec = catalog.resolve_spec(spec, device.type)
        from gputui.bench.energy import NvmlLink

        link = NvmlLink(device)
        env = collect_env(device, link)
        ctx = Ctx(spec=spec, device=device, env=env, emit=emit, cancel=cancel,
                  hooks=os.environ.get(HOOK_ENV) == "1", link=link)
        ctx.doc = new_doc(ctx, started_at)
        ctx.doc["settings"] = base_settings(ctx)
        emit(events.started(os.getpid(), spec["benchmark"], spec, env))
        run_benchmark(ctx)
        if cancel.is_set() and ctx.doc["status"] == "ok":
            ctx.doc["status"] = "cancelled"
        emit(events.result(finish(ctx, t0)))
        return 0
    except Cancelled:
        if ctx is None:
            emit(events.result({"benchmark": spec["benchmark"], "status": "cancelled",
                                "started_at": started_at, "finished_at": now_iso()}))
        else:
            ctx.doc["status"] = "cancelled"
            emit(events.result(finish(ctx, t0)))
        return 0
    except Exception as exc:
        batch = ctx.current_batch if ctx is not None else None
        # A failed DDP rank has already classified its own exception.
        ev = getattr(exc, "event", None) or classify(exc, batch, spec)
        if ev["kind"] != "invalid":
            traceback.print_exc(file=sys.stderr)
        emit(ev)
        return 2 if ev["kind"] == "invalid" else 1
    finally:
        if link is not None:
            link.close()


if __name__ == "__main__":
    sys.exit(main())
