"""The measuring steps every benchmark kind shares: warm-up, the timed loop, the phase split,
peak memory, energy, the profiler pass, and turning loop statistics into result fields."""

from __future__ import annotations

import gc
import sys
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from gputui.bench import events, peaks, stats
from gputui.bench.result import ResultBuilder
from gputui.bench.worker import nvtx
from gputui.bench.worker.context import Ctx
from gputui.bench.worker.memory import PeakRss

if TYPE_CHECKING:
    import torch

    from gputui.bench.worker.energy import EnergyReading, RunMeter
    from gputui.bench.worker.timing import LoopStats

# Host memory peaks on CPU are per measured interval (see gputui.bench.worker.memory).
HOST_PEAK = PeakRss()


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


def forget_compiled(compiled: bool) -> None:
    """Before a sweep point with --compile: drop every compiled graph (and, on CUDA, the
    CUDA-graph pools) of the points before. Each batch size compiles a graph of its own
    anyway (shapes are static: the KV cache is a module buffer), and dynamo caps the graphs
    one function may have at 8 — with fullgraph=True the 9th batch size would fail instead
    of falling back. The previous point's model outputs must be gone before this runs."""
    if compiled:
        import torch

        torch.compiler.reset()


def _malloc_trim() -> None:
    """Give freed heap back to the OS (glibc), so the next probe starts from a low RSS."""
    if not sys.platform.startswith("linux"):
        return
    try:
        import ctypes

        ctypes.CDLL(None).malloc_trim(0)
    except (OSError, AttributeError):
        pass


def do_warmup(ctx: Ctx, step: Callable[[int], None], n: int) -> None:
    """`n` untimed steps — at least one with --compile: a compiled model's first call
    compiles it (seconds to minutes), which must never land in the timed loop."""
    from gputui.bench.worker.timing import sync

    if ctx.request.compile and n < 1:
        n = 1
        ctx.result.settings["warmup"] = n

    with nvtx.span("warmup"):
        for i in range(n):
            ctx.checkpoint()
            nvtx.push(f"warmup step {i}")
            step(i)
            nvtx.pop()
            ctx.emit(events.Warmup(i + 1, n))
        sync(ctx.device)


def hooked(ctx: Ctx, step: Callable[[int], None], at: int) -> Callable[[int], None]:
    """`step` with the test hook fired before step `at` (inert outside the runner's tests)."""
    def run(i: int) -> None:
        if i == at:
            ctx.fire_hook()
        step(i)

    return run


def hook_step(steps: int | None) -> int:
    return 1 if steps is None or steps > 1 else 0


def measure(ctx: Ctx, step: Callable[[int], None], samples_per_step: int, unit: str,
            *, steps: int | None = None, duration_s: float | None = None,
            use_spec_bounds: bool = True) -> LoopStats:
    """The timed loop, bounded by the request's --steps/--duration unless told otherwise;
    with the request's bounds it runs --repeat times (timing.repeat_trials)."""
    from gputui.bench.worker.timing import repeat_trials, timed_loop

    repeat = 1
    if use_spec_bounds:
        steps, duration_s = ctx.request.steps, ctx.request.duration_s
        repeat = int(ctx.request.repeat or 1)
    return repeat_trials(lambda: timed_loop(
        hooked(ctx, step, hook_step(steps)), device=ctx.device,
        samples_per_step=samples_per_step, steps=steps, duration_s=duration_s, unit=unit,
        emit=ctx.emit, should_stop=ctx.should_stop, make_progress=events.Progress,
    ), repeat)


def trial_values(loop: LoopStats, per_sample: float = 1.0) -> tuple[float, ...] | None:
    """Each repeated trial's headline in the result's unit; None for one trial."""
    if len(loop.trials) < 2:
        return None
    return tuple(n * per_sample / s for n, s in loop.trials if s > 0) or None


def loop_throughput(loop: LoopStats, unit: str, per_sample: float = 1.0) -> stats.Throughput:
    """The headline of one timed loop; `per_sample` scales samples into the unit
    (FLOPs or bytes per step for the probes)."""
    return replace(stats.headline(loop.samples * per_sample, loop.wall_s,
                                  [r * per_sample for r in loop.window_rates], unit),
                   trials=trial_values(loop, per_sample))


def fill_loop(res: ResultBuilder, loop: LoopStats, unit: str) -> None:
    """Throughput, step times and counts of the run's one timed loop."""
    res.throughput = loop_throughput(loop, unit)
    res.step_time_ms = stats.spread(loop.step_ms)
    res.steps = loop.steps
    res.samples = loop.samples
    if loop.stopped_early:
        res.status = "cancelled"


def measure_phases(ctx: Ctx, step: Any, n: int) -> dict[str, float]:
    from gputui.bench.worker.timing import PhaseTimer

    timer = PhaseTimer(ctx.device)
    with nvtx.span("phase split"):
        for i in range(n):
            step.instrumented(i, timer)
    phases = timer.medians()
    out = {k: phases.get(k, 0.0) for k in events.PHASES}
    out["total"] = sum(out.values())
    return out


def maybe_profile(ctx: Ctx, step: Callable[[int], None]) -> None:
    if not ctx.request.profile or ctx.cancel.is_set():
        return
    from gputui.bench.worker.profiling import profile_steps

    n = 5 if ctx.device.type == "cuda" else 2
    with nvtx.span("profiler pass"):
        profile = profile_steps(step, ctx.device, steps=n,
                                out_dir=ctx.request.profile_dir,
                                name=f"{ctx.request.benchmark}-{ctx.request.model}")
    ctx.result.extra = replace(ctx.result.extra, profile=profile)


def energy_meter(ctx: Ctx) -> RunMeter:
    """Energy and the GPU's clocks/power over the timed loop."""
    from gputui.bench.clock_window import WindowSampler
    from gputui.bench.worker.energy import EnergyMeter, RunMeter

    link = ctx.link if ctx.link is not None and ctx.link.available else None
    return RunMeter(EnergyMeter(link), WindowSampler(link))


def record_energy(res: ResultBuilder, reading: EnergyReading) -> None:
    """A timed loop's energy reading → the result's two energy fields, extra.energy and
    extra.gpu_window."""
    res.energy_j_per_sample = reading.energy_j_per_sample
    res.avg_power_w = reading.avg_power_w
    if reading.note is not None:
        res.extra = replace(res.extra, energy=reading.note)
    if reading.window is not None:
        res.extra = replace(res.extra, gpu_window=reading.window)


def start_timed(ctx: Ctx, step_cls: Any) -> tuple[Any, Any, Any]:
    """Build the workload and its step, warm up, then start the peak-memory and energy
    windows: everything before the timed loop that training and inference share."""
    from gputui.bench.worker.workloads import make_workload

    req, dev = ctx.request, ctx.device
    wl = make_workload(req, dev, req.batch_size)
    ctx.current_batch = req.batch_size
    ctx.result.settings["shapes"] = wl.shapes
    ctx.checkpoint()
    step = step_cls(wl, dev, req.precision, req.compile)
    ctx.result.settings.update({**wl.settings, **step.settings})  # data placement, optimizer
    do_warmup(ctx, step, req.warmup)
    reset_peak(dev)
    meter = energy_meter(ctx)
    meter.start()
    return wl, step, meter


def peak_row(ctx: Ctx) -> tuple[peaks.PeakRow | None, str | None]:
    """The device's row of the peak table ("table"), or an estimate from SM count × max SM
    clock ("estimated", no bandwidth), or (None, None) — always None on CPU."""
    if ctx.device.type != "cuda":
        return None, None
    cap = ctx.env.get("compute_capability")
    nv = ctx.env.get("nvml") or {}
    capability = (int(cap.split(".")[0]), int(cap.split(".")[1])) if cap else None
    found = peaks.lookup(ctx.env.get("device_name"), capability, ctx.env.get("sm_count"),
                         nv.get("clock_sm_max_mhz"))
    if found.row is None:
        return None, None
    return found.row, "estimated" if found.estimated else "table"
