"""deepbench: the operations of DeepBench's own problem lists, timed one shape at a time.

The shapes, their names and FLOP counts are `gputui.bench.deepbench.problems`'. Each shape
gets its inputs made once on the device, a warm-up, then a timed loop like matmul's
(CUDA events per call, bounded by --steps or --duration per shape); its time is the median
call. What a call is follows DeepBench:
- GEMM: `torch.mm` of the operands as DeepBench lays them out (a_t: A is the transpose of
  a contiguous k×m matrix, b_t: B of an n×k one). Training and inference both time the
  product alone: DeepBench's training list is a list of GEMMs.
- Convolution: NCHW `conv2d`; in training, the forward pass plus the input and filter
  gradients (one `convolution_backward`), the three DeepBench times, as one call.
- RNN: one unidirectional layer (`nn.RNN` with ReLU for DeepBench's "vanilla",
  `nn.LSTM`, `nn.GRU`) over the whole sequence; in training, also the gradients of the
  input and of the weights (`torch.autograd.grad`).
- All-reduce: NCCL's sum over every visible GPU from this process, as the `allreduce`
  kind does; with fewer than two CUDA GPUs each size gets a row saying so, no figure.
"""

from __future__ import annotations

import time
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from gputui.bench import peaks, stats
from gputui.bench.deepbench import problems
from gputui.bench.deepbench.problems import AllReduce, Conv, Gemm, Problem, Rnn
from gputui.bench.kind_extras import DeepbenchExtra, DeepbenchRow
from gputui.bench.worker import nvtx
from gputui.bench.worker.context import Ctx
from gputui.bench.worker.kinds import register
from gputui.bench.worker.measure import (
    do_warmup,
    free_memory,
    measure,
    peak_memory,
    peak_row,
    reset_peak,
)

if TYPE_CHECKING:
    from collections.abc import Callable

    import torch

DTYPES = {"fp32": "float32", "tf32": "float32", "fp16": "float16", "bf16": "bfloat16"}
SYNC_EVERY = 5  # all-reduces between synchronisations of every GPU


def gemm_operands(g: Gemm, device: torch.device, dtype: torch.dtype,
                  gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """A (m×k), B (k×n) and C (m×n); a transposed operand is a transposed view of a
    contiguous matrix, as cuBLAS's OP_T reads it."""
    import torch

    def rand(rows: int, cols: int) -> torch.Tensor:
        return torch.randn(rows, cols, device=device, dtype=dtype, generator=gen)

    a = rand(g.k, g.m).t() if g.a_t else rand(g.m, g.k)
    b = rand(g.n, g.k).t() if g.b_t else rand(g.k, g.n)
    return a, b, torch.empty(g.m, g.n, device=device, dtype=dtype)


def _gemm_step(g: Gemm, train: bool, dev: Any, dtype: Any, gen: Any) -> Callable[[int], None]:
    import torch

    a, b, c = gemm_operands(g, dev, dtype, gen)

    def step(_: int) -> None:
        torch.mm(a, b, out=c)

    return step


def _conv_step(p: Conv, train: bool, dev: Any, dtype: Any, gen: Any) -> Callable[[int], None]:
    import torch
    import torch.nn.functional as F

    x = torch.randn(p.n, p.c, p.h, p.w, device=dev, dtype=dtype, generator=gen)
    w = torch.randn(p.k, p.c, p.r, p.s, device=dev, dtype=dtype, generator=gen)
    stride, padding = (p.hstride, p.wstride), (p.pad_h, p.pad_w)
    if not train:
        def infer(_: int) -> None:
            with torch.no_grad():
                F.conv2d(x, w, stride=stride, padding=padding)
        return infer
    out_h, out_w = p.out_hw
    gy = torch.randn(p.n, p.k, out_h, out_w, device=dev, dtype=dtype, generator=gen)

    def step(_: int) -> None:
        with torch.no_grad():
            F.conv2d(x, w, stride=stride, padding=padding)
            torch.ops.aten.convolution_backward(
                gy, x, w, None, list(stride), list(padding), [1, 1], False, [0, 0], 1,
                [True, True, False])

    return step


def _rnn_step(p: Rnn, train: bool, dev: Any, dtype: Any, gen: Any) -> Callable[[int], None]:
    import torch

    torch.manual_seed(int(gen.initial_seed()))  # the layer's weights, reproducibly
    layer: torch.nn.Module
    if p.cell == "vanilla":
        layer = torch.nn.RNN(p.hidden, p.hidden, nonlinearity="relu")
    elif p.cell == "lstm":
        layer = torch.nn.LSTM(p.hidden, p.hidden)
    else:
        layer = torch.nn.GRU(p.hidden, p.hidden)
    layer = layer.to(device=dev, dtype=dtype)
    x = torch.randn(p.steps, p.batch, p.hidden, device=dev, dtype=dtype, generator=gen)
    if not train:
        def infer(_: int) -> None:
            with torch.no_grad():
                layer(x)
        return infer
    x.requires_grad_(True)
    gy = torch.randn(p.steps, p.batch, p.hidden, device=dev, dtype=dtype, generator=gen)
    wrt = [x, *layer.parameters()]

    def step(_: int) -> None:
        y, _h = layer(x)
        torch.autograd.grad(y, wrt, gy)

    return step


BUILDERS: dict[str, Callable[..., Callable[[int], None]]] = {
    "gemm": _gemm_step, "conv": _conv_step, "rnn": _rnn_step}


@register("deepbench")
def run_deepbench(ctx: Ctx) -> None:
    import torch

    req, res, dev = ctx.request, ctx.result, ctx.device
    op, pset = req.op or "all", req.problem_set or "train"
    sset = req.shape_set or "quick"
    scale = max(1, int(ctx.params.get("scale", 1)))
    train = pset == "train"
    chosen = problems.select(op, pset, sset)
    dt = req.precision
    row, source = peak_row(ctx)
    peak = row.tflops(dt) if row else None
    res.settings.update({
        "op": op, "problem_set": pset, "shape_set": sset, "scale": scale,
        "source": problems.SOURCE,
        "problems": len(chosen),
        "flops": "gemm 2·m·n·k; conv 2·N·K·P·Q·C·R·S (training ×3); rnn 4·gates·H²·N·T "
                 "(training ×3); see docs/benchmarks.md",
        "bound": (f"{req.duration_s:g} s of timed calls per shape" if req.duration_s
                  else f"{req.steps} calls per shape")})
    dtype = getattr(torch, DTYPES[dt])
    rows: list[DeepbenchRow] = []
    saved = (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32,
             torch.backends.cudnn.benchmark)
    if dev.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = dt == "tf32"
        torch.backends.cudnn.benchmark = True  # DeepBench asks cuDNN for its fastest algorithm
        # What ran, over the switches' values at the worker's start (base_settings).
        res.settings.update({"tf32_matmul": dt == "tf32", "tf32_cudnn": dt == "tf32",
                             "cudnn_benchmark": True})
    reset_peak(dev)
    try:
        for p in chosen:
            ctx.checkpoint()
            with nvtx.span(f"deepbench {p.op} {p.name}"):
                one = (_allreduce_row(ctx, p.scaled(scale), p.name) if isinstance(p, AllReduce)
                       else timed_row(ctx, p, scale, train, dtype, peak))
            rows.append(one)
            if ctx.should_stop():
                res.status = "cancelled"
                break
    finally:
        if dev.type == "cuda":
            (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32,
             torch.backends.cudnn.benchmark) = saved
        res.extra = replace(res.extra, kind=DeepbenchExtra(
            rows=tuple(rows), peak_tflops=peak, peak_dtype=dt if peak else None,
            peak_source=source if peak else None, peak_gpu=row.name if row else None))
        res.throughput = headline(rows)
        res.peak_memory_bytes = peak_memory(dev)


def timed_row(ctx: Ctx, p: Problem, scale: int, train: bool, dtype: Any,
               peak: float | None) -> DeepbenchRow:
    import torch

    ran = p.scaled(scale)
    flops = ran.flops(train)
    gen = torch.Generator(device=ctx.device).manual_seed(ctx.request.seed)
    try:
        step = BUILDERS[p.op](ran, train, ctx.device, dtype, gen)
        do_warmup(ctx, step, int(ctx.request.warmup or 0))
        loop = measure(ctx, step, 1, "calls/s")
    except torch.OutOfMemoryError:
        free_memory(ctx.device)
        return DeepbenchRow(op=p.op, shape=p.name, ran=ran.name, flops=flops, median_us=None,
                            tflops=None, pct_of_peak=None, busbw_gbps=None, calls=0,
                            note="out of memory")
    ctx.result.add_counts(loop.steps, None)
    median_ms = stats.percentile(loop.step_ms, 50)
    median_us = median_ms * 1000.0 if median_ms else None
    tflops = flops / (median_us * 1e-6) / 1e12 if median_us and flops else None
    return DeepbenchRow(op=p.op, shape=p.name, ran=ran.name, flops=flops, median_us=median_us,
                        tflops=tflops, pct_of_peak=peaks.pct_of_peak(tflops, peak),
                        busbw_gbps=None, calls=loop.steps)


def _allreduce_row(ctx: Ctx, p: AllReduce, name: str) -> DeepbenchRow:
    """NCCL's all-reduce of `p.floats` float32 over every visible GPU; bus bandwidth as
    nccl-tests reports it. Fewer than two GPUs: a row that says so."""
    import torch

    n = torch.cuda.device_count() if ctx.device.type == "cuda" else 0
    if n < 2:
        return DeepbenchRow(op=p.op, shape=name, ran=p.name, flops=None, median_us=None,
                            tflops=None, pct_of_peak=None, busbw_gbps=None, calls=0,
                            note=f"needs 2+ CUDA GPUs (this run sees {n})")
    import torch.cuda.nccl as nccl

    devices = [torch.device("cuda", i) for i in range(n)]
    tensors = [torch.ones(p.floats, dtype=torch.float32, device=d) for d in devices]

    def sync() -> None:
        for d in devices:
            torch.cuda.synchronize(d)

    with nvtx.span("warmup"):
        for _ in range(max(1, int(ctx.request.warmup or 0))):
            nccl.all_reduce(tensors)
        sync()
    per_call: list[float] = []
    steps, duration = ctx.request.steps, ctx.request.duration_s
    done, t0 = 0, time.perf_counter()
    with nvtx.span("timed loop"):
        while True:
            t_batch = time.perf_counter()
            for j in range(SYNC_EVERY):
                with nvtx.span(f"step {done + j}"):
                    nccl.all_reduce(tensors)
            sync()
            now = time.perf_counter()
            per_call.append((now - t_batch) / SYNC_EVERY)
            done += SYNC_EVERY
            if ((steps and done >= steps) or (duration and now - t0 >= duration)
                    or ctx.should_stop()):
                break
    ctx.result.add_counts(done, None)
    median_s = stats.percentile(per_call, 50) or 0.0
    algbw = p.bytes / median_s / 1e9 if median_s > 0 else None
    busbw = algbw * 2 * (n - 1) / n if algbw is not None else None
    return DeepbenchRow(op=p.op, shape=name, ran=p.name, flops=None,
                        median_us=median_s * 1e6 if median_s else None, tflops=None,
                        pct_of_peak=None, busbw_gbps=busbw, calls=done)


def headline(rows: list[DeepbenchRow]) -> stats.Throughput:
    """The compute shapes' FLOPs over their median times, as if each ran once."""
    timed = [r for r in rows if r.flops and r.median_us]
    secs = sum((r.median_us or 0.0) * 1e-6 for r in timed)
    value = sum(r.flops or 0 for r in timed) / secs / 1e12 if secs > 0 else None
    return stats.Throughput(value=value, median=None, p10=None, p90=None, unit="TFLOP/s",
                            definition="Σ FLOPs ÷ Σ median call time over the shapes timed")
