"""Model FLOPs of a benchmark step, counted by torch, and the result's `flops` field.

The count runs one untimed step under torch.utils.flop_counter.FlopCounterMode after the
timed loop, through the eager model (a compiled graph hides its aten ops from the counter).
Training counts forward + backward and no optimizer update (no weight changes); the
gradients it leaves are dropped. The arithmetic (per sample, achieved, MFU) is bench.flops.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from gputui.bench import flops
from gputui.bench.worker.context import Ctx
from gputui.bench.worker.measure import peak_row


def count(fn: Callable[[], Any]) -> int | None:
    """Total FLOPs FlopCounterMode sees while `fn` runs; None where torch has no counter
    or it counts nothing (an op torch has no formula for)."""
    try:
        from torch.utils.flop_counter import FlopCounterMode
    except ImportError:
        return None
    with FlopCounterMode(display=False) as mode:
        fn()
    total = int(mode.get_total_flops())
    return total or None


def device_peak(ctx: Ctx) -> tuple[float | None, str | None]:
    """The dense peak TFLOP/s at the precision that ran (TF32 when fp32 ran with TF32
    matmuls allowed), and that dtype; (None, dtype) without a peak (a CPU)."""
    import torch

    tf32 = bool(torch.backends.cuda.matmul.allow_tf32) if ctx.device.type == "cuda" else None
    dtype = flops.peak_dtype(ctx.request.precision, tf32)
    row, _ = peak_row(ctx)
    if row is None or dtype is None:
        return None, dtype
    return row.tflops(dtype), dtype


def attach(ctx: Ctx, per_sample: float | None, method: flops.Method, *,
           counted: float | None = None, formula: str | None = None) -> None:
    """Fill ctx.result.flops from the run's headline (samples/s)."""
    res = ctx.result
    tp = res.throughput.value if res.throughput is not None else None
    peak, dtype = device_peak(ctx)
    res.flops = flops.make(per_sample, method, tp, peak, counted=counted, formula=formula,
                           dtype=dtype)


def counted_per_sample(fn: Callable[[], Any], samples: int) -> float | None:
    total = count(fn)
    return total / samples if total is not None and samples > 0 else None


def train_step_counter(step: Any) -> Callable[[], None]:
    """Forward + backward of a workloads.TrainStep through its eager model."""
    def run() -> None:
        assert step.w.feed is not None
        x, y = step.w.feed.sync_copy(0)
        saved = step.forward_module
        step.forward_module = step.w.model
        try:
            step._loss(x, y).backward()
        finally:
            step.forward_module = saved
            step.opt.zero_grad(set_to_none=True)

    return run


def infer_step_counter(step: Any) -> Callable[[], None]:
    def run() -> None:
        import torch

        from gputui.bench.worker.workloads import autocast

        assert step.w.feed is not None
        x, _ = step.w.feed.sync_copy(0)
        with torch.inference_mode(), autocast(step.device, step.precision):
            step.w.model(x)

    return run


def attach_counted(ctx: Ctx, fn: Callable[[], Any], samples_per_step: int,
                   analytic: float | None = None, formula: str | None = None) -> None:
    """`flops` for a model kind: analytic where a formula is given, counted otherwise.
    A failed count leaves the field without it: a record, never a reason to fail."""
    try:
        counted = counted_per_sample(fn, samples_per_step)
    except Exception as exc:  # the benchmark's numbers stand without it
        counted = None
        ctx.result.settings["flop_count_error"] = f"{type(exc).__name__}: {exc}"
    if analytic is not None:
        attach(ctx, analytic, "analytic", counted=counted, formula=formula)
    else:
        attach(ctx, counted, "counted", counted=counted,
               formula="torch.utils.flop_counter.FlopCounterMode over one untimed step")
