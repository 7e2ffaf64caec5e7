"""Inference: single-stream latency (batch 1, one request at a time) or offline throughput."""

from __future__ import annotations

from gputui.bench import events, stats
from gputui.bench.worker.context import Ctx
from gputui.bench.worker.kinds import register
from gputui.bench.worker.measure import (
    fill_loop,
    hook_step,
    hooked,
    loop_throughput,
    maybe_profile,
    measure,
    peak_memory,
    record_energy,
    start_timed,
)


@register("infer")
def run_infer(ctx: Ctx) -> None:
    from gputui.bench.worker.timing import latency_loop, repeat_trials
    from gputui.bench.worker.workloads import InferStep

    req, res, dev = ctx.request, ctx.result, ctx.device
    unit = ctx.bench.unit
    wl, step, meter = start_timed(ctx, InferStep)
    if req.mode == "latency":
        copy = "host→device copy, " if wl.data == "host" and dev.type == "cuda" else ""
        res.settings["latency"] = ("single-stream: one request at a time; each includes "
                                   f"{copy}forward and a device sync")
        res.settings["sync"] = "after every request: a request ends when its output is ready"
        loop = repeat_trials(lambda: latency_loop(
            hooked(ctx, step, hook_step(req.steps)), device=dev,
            steps=req.steps, duration_s=req.duration_s, emit=ctx.emit,
            make_progress=events.Progress, unit=unit, samples_per_request=wl.samples_per_step,
            should_stop=ctx.should_stop), int(req.repeat or 1))
        record_energy(res, meter.stop(loop.samples))
        res.throughput = loop_throughput(loop, unit)
        res.latency_ms = stats.spread(loop.step_ms)
        res.step_time_ms = stats.spread(loop.step_ms)
        res.steps, res.samples = loop.steps, loop.samples
        if loop.stopped_early:
            res.status = "cancelled"
    else:
        loop = measure(ctx, step, wl.samples_per_step, unit)
        record_energy(res, meter.stop(loop.samples))
        fill_loop(res, loop, unit)
        # Offline steps are queued back to back: a step's time is the gap between two
        # completions, not how long a request waited. That is step_time_ms, not latency.
        res.latency_ms = None
        res.settings["latency"] = ("offline: not measured (queued batches have no request "
                                   "latency); per-batch step time is in step_time_ms")
    res.peak_memory_bytes = peak_memory(dev)
    if res.status == "ok":
        from gputui.bench.worker.kinds.train import model_flops

        model_flops(ctx, step, wl, train=False)
    maybe_profile(ctx, step)
