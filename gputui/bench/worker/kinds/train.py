"""Training throughput: samples/s over the timed loop, then a per-phase split."""

from __future__ import annotations

from gputui.bench import events
from gputui.bench.worker.context import Ctx
from gputui.bench.worker.kinds import register
from gputui.bench.worker.measure import (
    fill_loop,
    maybe_profile,
    measure,
    measure_phases,
    peak_memory,
    record_energy,
    start_timed,
)


@register("train")
def run_train(ctx: Ctx) -> None:
    from gputui.bench.worker.workloads import TrainStep

    res, dev = ctx.result, ctx.device
    unit = ctx.bench.unit
    wl, step, meter = start_timed(ctx, TrainStep)
    loop = measure(ctx, step, wl.samples_per_step, unit)
    record_energy(res, meter.stop(loop.samples))
    res.peak_memory_bytes = peak_memory(dev)
    fill_loop(res, loop, unit)
    if not loop.stopped_early:
        n = 10 if dev.type == "cuda" else 3
        res.phases_ms = measure_phases(ctx, step, n)
        res.settings["phases"] = (
            f"separate instrumented pass of {n} steps with a device sync between phases, "
            "after the timed loop (which has none); medians per phase")
        ctx.emit(events.Phase(res.phases_ms))
        maybe_profile(ctx, step)
