"""--sweep: throughput (and latency, for inference) at doubling batch sizes; the best wins."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from gputui.bench import events, stats
from gputui.bench.kind_extras import SweepExtra
from gputui.bench.worker.context import Ctx
from gputui.bench.worker.failures import first_line, is_oom
from gputui.bench.worker.kinds import register
from gputui.bench.worker.measure import (
    do_warmup,
    forget_compiled,
    free_memory,
    loop_throughput,
    measure,
    peak_memory,
    reset_peak,
)


def sweep_sizes(max_batch: int, start: int = 1) -> list[int]:
    sizes, b = [], min(start, max_batch)
    while b < max_batch:
        sizes.append(b)
        b *= 2
    sizes.append(max_batch)
    return sizes


@register("sweep")
def run_sweep(ctx: Ctx) -> None:
    from gputui.bench.worker.workloads import InferStep, TrainStep, make_workload

    req, res, dev = ctx.request, ctx.result, ctx.device
    unit, train = ctx.bench.unit, ctx.bench.kind == "train"
    # Training starts at 2: BatchNorm cannot train on one sample with a 1×1 feature map.
    sizes = (list(req.batch_sizes) if req.batch_sizes is not None
             else sweep_sizes(req.batch_size, 2 if train else 1))
    res.extra = replace(res.extra, kind=SweepExtra(sweep_sizes=tuple(sizes)))
    res.steps, res.samples = 0, 0
    best: tuple[float, int, stats.Throughput] | None = None
    for b in sizes:
        if ctx.cancel.is_set():
            res.status = "cancelled"
            break
        ctx.current_batch = b
        failed: str | None = None
        # The previous point's model and batches go before this one's are built, and their
        # heap goes back to the OS: the per-point peak starts from a clean baseline.
        wl: Any = None
        step: Any = None
        free_memory(dev)
        forget_compiled(req.compile)
        try:
            wl = make_workload(req, dev, b)
            step = (TrainStep if train else InferStep)(wl, dev, req.precision,
                                                       req.compile)
            res.settings.update({**wl.settings, **step.settings})
            ctx.probe_hook(b)
            do_warmup(ctx, step, req.warmup)
            reset_peak(dev)
            loop = measure(ctx, step, wl.samples_per_step, unit)
            tp = loop_throughput(loop, unit)
            # Offline batches are queued: their step time is not a request latency.
            step_ms = stats.spread(loop.step_ms)
            point = events.Point(label=f"batch {b}", batch_size=b, throughput=tp.value,
                                 unit=unit, latency_ms=None,
                                 extra={"peak_memory_bytes": peak_memory(dev),
                                        "samples": loop.samples,
                                        "step_time_ms": step_ms.to_dict() if step_ms
                                        else None})
            if best is None or (tp.value or 0) > best[0]:
                best = (tp.value or 0.0, b, tp)
            res.add_counts(loop.steps, loop.samples)
        except Exception as exc:
            if not is_oom(exc):
                raise
            failed = f"out of memory: {first_line(exc)}"
            point = events.Point(label=f"batch {b}", batch_size=b, throughput=None, unit=unit,
                                 ok=False, error=failed)
        ctx.add_point(point)
        if failed:
            # Larger batches need more memory still.
            wl = step = None
            free_memory(dev)
            break
    res.peak_memory_bytes = peak_memory(dev)
    if best is not None:
        res.throughput, res.batch_size = best[2], best[1]
        res.extra = replace(res.extra, kind=SweepExtra(tuple(sizes), best_batch=best[1]))
        if res.status == "ok":
            # Model FLOPs per sample do not depend on the batch: counted at the smallest.
            from gputui.bench.worker.kinds.train import model_flops

            wl = step = None
            free_memory(dev)
            wl = make_workload(req, dev, sizes[0])
            step = (TrainStep if train else InferStep)(wl, dev, req.precision, False)
            model_flops(ctx, step, wl, train)
