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


def model_flops(ctx: Ctx, step: object, wl: object, train: bool) -> None:
    """The result's `flops`: counted by torch for CNNs, the RNN formula for LSTM/GRU."""
    from gputui.bench import flops
    from gputui.bench.worker.kinds.flop_count import (
        attach_counted,
        infer_step_counter,
        train_step_counter,
    )

    p, req = ctx.params, ctx.request
    count = train_step_counter(step) if train else infer_step_counter(step)
    analytic = (flops.rnn_per_token(str(req.model), int(p["hidden"]), int(p["layers"]),
                                    int(p["vocab"]), train)
                if req.benchmark.startswith("rnn") else None)
    attach_counted(ctx, count, wl.samples_per_step,  # type: ignore[attr-defined]
                   analytic=analytic, formula=flops.RNN_FORMULA if analytic else None)


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
        model_flops(ctx, step, wl, train=True)
        n = 10 if dev.type == "cuda" else 3
        res.phases_ms = measure_phases(ctx, step, n)
        res.settings["phases"] = (
            f"separate instrumented pass of {n} steps with a device sync between phases, "
            "after the timed loop (which has none); medians per phase")
        ctx.emit(events.Phase(res.phases_ms))
        maybe_profile(ctx, step)
