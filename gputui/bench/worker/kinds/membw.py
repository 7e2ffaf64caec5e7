"""membw: copy and triad GB/s (and host↔device on CUDA), and the percentage of peak."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING

from gputui.bench import events, peaks, stats
from gputui.bench.kind_extras import MembwExtra
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

if TYPE_CHECKING:
    import torch


@register("membw")
def run_membw(ctx: Ctx) -> None:
    import torch

    req, res, dev = ctx.request, ctx.result, ctx.device
    nbytes = int(ctx.params["array_bytes"])
    n = nbytes // 4
    row, source = peak_row(ctx)
    # A bandwidth is never estimated: without a table row there is no peak.
    peak_gbps = row.mem_bw_gbps if row is not None and source == "table" else None
    res.settings.update({"array_bytes": n * 4, "dtype": "float32",
                         "bytes_counted": "copy 2×array (read+write), triad 3×array",
                         "shapes": {"array": [n]},
                         "bound": (f"{req.duration_s:g} s of timed work per point"
                                   if req.duration_s else
                                   f"{req.steps} steps per point")})
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
        res.settings["host_bytes"] = hb * 4

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
    first: stats.Throughput | None = None
    for label, fn, moved, pk in kernels:
        ctx.checkpoint()
        do_warmup(ctx, fn, req.warmup)
        meter = energy_meter(ctx)
        meter.start()
        loop = measure(ctx, fn, 1, "steps/s")
        reading = meter.stop(loop.steps)
        window = reading.window
        tp = loop_throughput(loop, "GB/s", per_sample=moved / 1e9)
        pct = peaks.pct_of_peak(tp.value, pk)
        ctx.add_point(events.Point(
            label=label, batch_size=None, throughput=tp.value, unit="GB/s",
            extra={"bytes_per_step": moved, "peak_gbps": pk, "pct_of_peak": pct,
                   "peak_source": source if pk else None, "steps": loop.steps,
                   "iterations": loop.steps, "timed_s": loop.wall_s,
                   "clock_mem_mhz_mean": window.clock_mem_mhz_mean if window else None,
                   "clock_sm_mhz_mean": window.clock_sm_mhz_mean if window else None,
                   "power_w_mean": reading.avg_power_w or (window.power_w_mean if window
                                                           else None),
                   "throttle_mask": window.throttle_mask if window else None}))
        by_kernel[label] = tp.value
        first = first or tp
        res.add_counts(loop.steps, None)  # steps, not samples: a probe has none
        if label == "triad":
            res.throughput = tp
            res.avg_power_w = reading.avg_power_w
            if window is not None:
                res.extra = replace(res.extra, gpu_window=window)
        if loop.stopped_early:
            res.status = "cancelled"
            break
    if res.throughput is None:
        res.throughput = first  # cancelled before triad: copy's figure
    res.extra = replace(res.extra, kind=MembwExtra(
        gbps=by_kernel, peak_gbps=peak_gbps, peak_source=source if peak_gbps else None,
        peak_gpu=row.name if row is not None and peak_gbps else None))
    res.peak_memory_bytes = peak_memory(dev)

