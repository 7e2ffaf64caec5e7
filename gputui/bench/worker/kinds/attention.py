"""attention: torch.nn.functional.scaled_dot_product_attention TFLOP/s at FlashAttention's
benchmark shapes — forward and forward+backward, causal and not.

Shapes as FlashAttention's benchmark_flash_attention.py: a fixed number of tokens per batch
(16k on CUDA), batch = tokens ÷ sequence, heads = hidden (2,048) ÷ head dim (64 and 128),
sequence 512 … 16k. FLOPs as it counts them (bench.flops.attention_flops): 4·b·s²·h·d for
the forward pass, halved when causal; backward 2.5× the forward. Each point records the
SDPA backend that ran (flash, efficient, cudnn, math; on the CPU its flash kernel), found
from the aten op the call dispatched to, and its % of the dense peak at the precision.
The backward pass runs through torch.autograd.grad: no .grad accumulation in the step.

Finding the backend takes torch's dispatch modes, a private API
(`torch.utils._python_dispatch.TorchDispatchMode`): where it is missing or fails, the
backend reads "unknown" and the benchmark runs on (`backend_label`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from gputui.bench import events, flops, peaks
from gputui.bench.kind_extras import AttentionExtra
from gputui.bench.worker.context import Ctx
from gputui.bench.worker.kinds import register
from gputui.bench.worker.kinds.flop_count import device_peak
from gputui.bench.worker.measure import (
    do_warmup,
    energy_meter,
    loop_throughput,
    measure,
    peak_memory,
    reset_peak,
)

log = logging.getLogger("gputui.bench.worker.attention")

HEAD_DIMS_CUDA = (64, 128)
PASSES = ("fwd", "fwd+bwd")
# aten op (substring) → backend name, most specific first.
_BACKENDS = (("flash_attention_for_cpu", "flash (cpu)"), ("cudnn_attention", "cudnn"),
             ("flash_attention", "flash"), ("efficient_attention", "efficient"))


def backend_of(op_names: list[str]) -> str:
    """The SDPA backend from the aten ops one call dispatched to; "math" when none of the
    fused kernels ran (the math path decomposes into matmuls and a softmax)."""
    for key, name in _BACKENDS:
        if any(key in op for op in op_names):
            return name
    return "math"


UNKNOWN = "unknown"


def backend_label(fn: Callable[[], Any]) -> str:
    """The SDPA backend of one untimed call of `fn`, or "unknown" where torch's dispatch
    recorder is missing or fails: a torch change costs the label, never the benchmark
    (a call that fails for its own reasons fails again where it is measured)."""
    try:
        return backend_of(ops_of(fn))
    except Exception as exc:  # ImportError, AttributeError, TypeError ... of a private API
        log.warning("attention backend unknown (torch's dispatch recorder: %s: %s)",
                    type(exc).__name__, exc)
        return UNKNOWN


def ops_of(fn: Callable[[], Any]) -> list[str]:
    """The aten ops `fn` dispatches to (one untimed call)."""
    from torch.utils._python_dispatch import TorchDispatchMode

    class Record(TorchDispatchMode):
        def __init__(self) -> None:
            super().__init__()
            self.names: list[str] = []

        def __torch_dispatch__(self, func: Any, types: Any, args: Any = (),
                               kwargs: Any = None) -> Any:
            self.names.append(str(func))
            return func(*args, **(kwargs or {}))

    with Record() as rec:
        fn()
    return rec.names


def shapes(params: dict[str, Any], device_type: str) -> list[tuple[int, int, int, int]]:
    """(batch, heads, seq, head_dim) per point, FlashAttention's way."""
    dims = ([int(params["head_dim"])] if params.get("head_dim") else
            list(HEAD_DIMS_CUDA) if device_type == "cuda" else [32])
    tokens, hidden = int(params["tokens"]), int(params["hidden"])
    seqs, s = [], int(params["min_seq"])
    while s <= int(params["max_seq"]):
        seqs.append(s)
        s *= 2
    return [(max(1, tokens // seq), max(1, hidden // d), seq, d) for d in dims for seq in seqs]


@register("attention")
def run_attention(ctx: Ctx) -> None:
    import torch

    req, res, dev = ctx.request, ctx.result, ctx.device
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(req.precision, torch.float32)
    peak, peak_dtype = device_peak(ctx)
    points = shapes(ctx.params, dev.type)
    res.settings.update({
        "shapes": {"bhsd": [list(p) for p in points]}, "dtype": str(dtype).removeprefix(
            "torch."), "flops": "4·b·s²·h·d forward, halved when causal; backward 2.5× "
            "forward (FlashAttention's benchmark)",
        "bound": (f"{req.duration_s:g} s of timed work per point"
                  if req.duration_s else f"{req.steps} steps per point")})
    best: tuple[float, str] | None = None
    reset_peak(dev)
    meter = energy_meter(ctx)
    meter.start()
    for b, h, s, d in points:
        gen = torch.Generator(device=dev).manual_seed(req.seed)
        q, k, v = (torch.randn(b, h, s, d, device=dev, dtype=dtype, generator=gen)
                   for _ in range(3))
        dout = torch.randn(b, h, s, d, device=dev, dtype=dtype, generator=gen)
        for causal in (False, True):
            for what in PASSES:
                ctx.checkpoint()
                tp = _point(ctx, q, k, v, dout, causal, what, peak, peak_dtype)
                if tp is None:
                    return
                label = f"d{d} s{s} {'causal' if causal else 'full'} {what}"
                if what == "fwd+bwd" and (best is None or tp.value > best[0]):
                    best = (tp.value, label)
                    res.throughput = tp
        del q, k, v, dout
    reading = meter.stop(0)
    res.avg_power_w = reading.avg_power_w
    res.extra = replace(res.extra, headline_point=best[1] if best is not None else None,
                        kind=AttentionExtra(peak_tflops=peak, peak_dtype=peak_dtype))
    res.peak_memory_bytes = peak_memory(dev)


def _point(ctx: Ctx, q: Any, k: Any, v: Any, dout: Any, causal: bool, what: str,
           peak: float | None, peak_dtype: str | None) -> Any:
    """Measure one pass at one shape; None when the run was cancelled during it."""
    import torch
    import torch.nn.functional as F

    b, h, s, d = q.shape
    backward = what == "fwd+bwd"
    for t in (q, k, v):
        t.requires_grad_(backward)

    def step(_: int) -> None:
        if backward:
            out = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
            torch.autograd.grad(out, (q, k, v), dout)
        else:
            with torch.no_grad():
                F.scaled_dot_product_attention(q, k, v, is_causal=causal)

    backend = backend_label(lambda: step(0))
    do_warmup(ctx, step, ctx.request.warmup or 0)
    loop = measure(ctx, step, 1, "steps/s")
    per_step = flops.attention_flops(b, s, h, d, causal, backward)
    tp = loop_throughput(loop, "TFLOP/s", per_sample=per_step / 1e12)
    ctx.add_point(events.Point(
        label=f"d{d} s{s} {'causal' if causal else 'full'} {what}", batch_size=b,
        throughput=tp.value, unit="TFLOP/s",
        extra={"seq_len": s, "head_dim": d, "heads": h, "causal": causal, "pass": what,
               "backend": backend, "flops_per_step": per_step, "peak_tflops": peak,
               "peak_dtype": peak_dtype, "pct_of_peak": peaks.pct_of_peak(tp.value, peak),
               "steps": loop.steps, "timed_s": loop.wall_s}))
    ctx.result.add_counts(loop.steps, None)
    if loop.stopped_early:
        ctx.result.status = "cancelled"
        return None
    return tp
