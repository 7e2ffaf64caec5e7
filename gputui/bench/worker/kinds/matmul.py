"""matmul: achieved TFLOP/s per dtype and shape, and the percentage of the device's peak.

Each point is bounded by time (on CUDA at least 2 s of timed work by default, --duration
overrides): a few dozen products last milliseconds, a boost-clock burst before power
capping. A point records its timed seconds, iterations, and the SM clock and power the
GPU held over its window. --sweep tries a few standard shapes and reports the best.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from gputui.bench import events, peaks
from gputui.bench.kind_extras import MatmulExtra
from gputui.bench.request import RunRequest
from gputui.bench.worker.context import Ctx
from gputui.bench.worker.kinds import register
from gputui.bench.worker.measure import (
    do_warmup,
    energy_meter,
    loop_throughput,
    measure,
    peak_memory,
    peak_row,
)

# Square products from small to large, plus a long-K one: the best of these is the
# "achievable" figure (cf. mamf-finder, which searches far more shapes).
SWEEP_CUDA: tuple[tuple[int, int, int], ...] = (
    (2048, 2048, 2048), (4096, 4096, 4096), (8192, 8192, 8192), (12288, 12288, 12288),
    (16384, 16384, 16384), (8192, 8192, 32768))
SWEEP_CPU: tuple[tuple[int, int, int], ...] = ((128, 128, 128), (256, 256, 256),
                                               (512, 512, 512))


def shapes_of(req: RunRequest, params: dict[str, Any],
              device_type: str) -> list[tuple[int, int, int]]:
    if req.shapes:
        return [(int(m), int(n), int(k)) for m, n, k in req.shapes]
    if req.sweep:
        return list(SWEEP_CUDA if device_type == "cuda" else SWEEP_CPU)
    n = int(params["size"])
    return [(n, n, n)]


def dtypes_for(device: Any) -> list[str]:
    import torch

    dtypes = ["fp32"]
    if device.type == "cuda":
        major, _ = torch.cuda.get_device_capability(device)
        if major >= 8:
            dtypes.append("tf32")
        dtypes.append("fp16")
        if torch.cuda.is_bf16_supported():
            dtypes.append("bf16")
    else:
        dtypes.append("bf16")
    return dtypes


@register("matmul")
def run_matmul(ctx: Ctx) -> None:
    import torch

    req, res, dev = ctx.request, ctx.result, ctx.device
    shapes = shapes_of(req, ctx.params, dev.type)
    single = len(shapes) == 1
    dtypes = dtypes_for(dev)
    row, source = peak_row(ctx)
    res.settings.update({
        "shapes": {"mnk": [list(s) for s in shapes]}, "dtypes": dtypes,
        "flops_per_step": {f"{m}x{n}x{k}": 2 * m * n * k for m, n, k in shapes},
        "bound": (f"{req.duration_s:g} s of timed work per point"
                  if req.duration_s else f"{req.steps} steps per point")})
    if single:
        res.settings["size"] = shapes[0][0] if len(set(shapes[0])) == 1 else None
    torch_dtype = {"fp32": torch.float32, "tf32": torch.float32, "fp16": torch.float16,
                   "bf16": torch.bfloat16}
    best: dict[str, tuple[float, tuple[int, int, int]]] = {}
    saved = torch.backends.cuda.matmul.allow_tf32
    try:
        for dt in dtypes:
            if dev.type == "cuda":
                torch.backends.cuda.matmul.allow_tf32 = dt == "tf32"
            for m, n, k in shapes:
                ctx.checkpoint()
                if not _point(ctx, torch, dt, torch_dtype[dt], (m, n, k), single, row, source,
                              best):
                    return
    finally:
        if dev.type == "cuda":
            torch.backends.cuda.matmul.allow_tf32 = saved
        res.extra = replace(res.extra, kind=MatmulExtra(
            tflops={dt: v for dt, (v, _) in best.items()},
            best_shape={dt: s for dt, (_, s) in best.items()},
            peak_tflops=({d: row.tflops(d) for d in peaks.DTYPES} if row else None),
            peak_source=source, peak_gpu=row.name if row else None))
        res.peak_memory_bytes = peak_memory(dev)


def _point(ctx: Ctx, torch: Any, dt: str, dtype: Any, shape: tuple[int, int, int],
           single: bool, row: peaks.PeakRow | None, source: str | None,
           best: dict[str, tuple[float, tuple[int, int, int]]]) -> bool:
    """Measure one dtype × shape; False when the run was cancelled during it."""
    req, res, dev = ctx.request, ctx.result, ctx.device
    m, n, k = shape
    flops = 2 * m * n * k
    gen = torch.Generator(device=dev).manual_seed(req.seed)
    a = torch.randn(m, k, device=dev, dtype=dtype, generator=gen)
    b = torch.randn(k, n, device=dev, dtype=dtype, generator=gen)
    c = torch.empty(m, n, device=dev, dtype=dtype)

    def step(_: int) -> None:
        torch.mm(a, b, out=c)

    do_warmup(ctx, step, req.warmup)
    meter = energy_meter(ctx)
    meter.start()
    loop = measure(ctx, step, 1, "steps/s")
    reading = meter.stop(loop.steps)
    tp = loop_throughput(loop, "TFLOP/s", per_sample=flops / 1e12)
    pk = row.tflops(dt) if row else None
    window = reading.window
    ctx.add_point(events.Point(
        label=dt if single else f"{dt} {m}x{n}x{k}", batch_size=None, throughput=tp.value,
        unit="TFLOP/s",
        extra={"dtype": dt, "shape": [m, n, k], "peak_tflops": pk,
               "pct_of_peak": peaks.pct_of_peak(tp.value, pk),
               "peak_source": source if pk else None, "steps": loop.steps,
               "iterations": loop.steps, "timed_s": loop.wall_s,
               "clock_sm_mhz_mean": window.clock_sm_mhz_mean if window else None,
               "power_w_mean": reading.avg_power_w or (window.power_w_mean if window
                                                       else None),
               "throttle_mask": window.throttle_mask if window else None}))
    res.add_counts(loop.steps, None)  # steps, not samples: a probe has none
    if tp.value is not None and (dt not in best or tp.value > best[dt][0]):
        best[dt] = (tp.value, shape)
        if dt == req.precision or res.throughput is None:
            res.throughput = tp
            res.extra = replace(res.extra, headline_point=f"{dt} {m}x{n}x{k}")
            res.avg_power_w = reading.avg_power_w
            if window is not None:
                res.extra = replace(res.extra, gpu_window=window)
    if loop.stopped_early:
        res.status = "cancelled"
        return False
    return True
