"""batch-finder: the largest training batch that fits, doubling then bisecting, with the
throughput at each size.

Probes use device-resident data (one batch, no pinned host buffers that could fail to pin
or stay cached), tell a device out-of-memory (the limit being searched) from a host one
(which ends the search with its own verdict), and recommend the largest batch that leaves
a stated headroom of device memory for fragmentation and whatever else runs beside it.
"""

from __future__ import annotations

import os
from dataclasses import replace
from typing import Any

from gputui.bench import events, stats
from gputui.bench.kind_extras import BatchFinderExtra
from gputui.bench.worker.context import Ctx
from gputui.bench.worker.environment import host_peak_text
from gputui.bench.worker.failures import first_line, is_oom
from gputui.bench.worker.kinds import register
from gputui.bench.worker.measure import (
    do_warmup,
    free_memory,
    loop_throughput,
    measure,
    peak_memory,
    reset_peak,
)


def oom_kind(exc: BaseException) -> str | None:
    """"device" for a GPU allocation failure, "host" for host memory, None otherwise."""
    import torch

    if isinstance(exc, torch.cuda.OutOfMemoryError):
        return "device"
    if isinstance(exc, MemoryError):
        return "host"
    if not is_oom(exc):
        return None
    msg = str(exc)
    # A failed pin (cudaHostAlloc) reads "CUDA error: out of memory" although the host ran
    # out; probes pin nothing, so a CUDA-worded error here is the device's.
    host = ("DefaultCPUAllocator" in msg or "can't allocate memory" in msg
            or "pinned" in msg.lower() or "CUDAHostAllocator" in msg)
    return "host" if host else "device"


def recommended(fitted: dict[int, int | None], limit_bytes: int | None) -> int | None:
    """The largest fitting batch whose peak memory stays within `limit_bytes`."""
    if limit_bytes is None:
        return max(fitted, default=None)
    ok = [b for b, mem in fitted.items() if mem is not None and mem <= limit_bytes]
    return max(ok, default=None)


@register("batch-finder")
def run_batch_finder(ctx: Ctx) -> None:
    from gputui.bench.worker.workloads import TrainStep, make_workload

    req, res, dev = ctx.request, ctx.result, ctx.device
    unit = ctx.bench.unit
    cap = int(req.batch_size)
    budget: int | None = None
    if dev.type == "cpu":
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
        budget = int(total * float(ctx.params.get("memory_budget_frac", 0.5)))
    res.settings["max_batch"] = cap
    res.settings["memory_budget_bytes"] = budget
    res.settings["probe"] = "training step; doubling from 2, then bisection after a failure"
    res.settings["probe_memory"] = (
        "peak per probe: torch.cuda.max_memory_allocated after a reset" if dev.type == "cuda"
        else "peak per probe: " + host_peak_text())
    headroom = float(ctx.params.get("headroom_frac", 0.1))
    if dev.type == "cuda":
        import torch

        capacity: int | None = int(torch.cuda.get_device_properties(dev).total_memory)
    else:
        capacity = budget
    limit_bytes = int(capacity * (1.0 - headroom)) if capacity else None
    res.settings.update({
        "data": "device", "input_batches": 1,
        "headroom_frac": headroom, "headroom_of_bytes": capacity,
        "headroom": (f"recommended batch: peak memory ≤ {1 - headroom:.0%} of "
                     f"{'device memory' if dev.type == 'cuda' else 'the memory budget'}"),
        "timed_steps_per_probe": req.steps or 2})
    res.steps, res.samples = 0, 0
    fitted: dict[int, tuple[stats.Throughput, int | None]] = {}
    host_oom: list[str] = []

    def probe(b: int) -> bool:
        ctx.checkpoint()
        ctx.current_batch = b
        err: str | None = None
        tp: stats.Throughput | None = None
        mem: int | None = None
        n_steps = n_samples = 0
        # Each probe's peak is its own: reset before the model is built, so weights,
        # activations and optimizer state all count, and an earlier, larger probe does not.
        free_memory(dev)
        reset_peak(dev)
        wl: Any = None
        step: Any = None
        try:
            ctx.probe_hook(b)
            wl = make_workload(replace(req, data="device"), dev, b, pool=1)
            step = TrainStep(wl, dev, req.precision, req.compile)
            do_warmup(ctx, step, req.warmup)
            loop = measure(ctx, step, wl.samples_per_step, unit,
                           steps=req.steps or 2, use_spec_bounds=False)
            tp = loop_throughput(loop, unit)
            n_steps, n_samples = loop.steps, loop.samples
            mem = peak_memory(dev)
            if budget is not None and mem > budget:
                err = f"over the memory budget ({mem} > {budget} bytes)"
        except Exception as exc:
            kind = oom_kind(exc)
            if kind is None:
                raise
            if kind == "host":
                host_oom.append(first_line(exc))
                err = f"host out of memory: {first_line(exc)}"
            else:
                err = f"out of memory: {first_line(exc)}"
        wl = step = None
        free_memory(dev)
        ctx.add_point(events.Point(
            label=f"batch {b}", batch_size=b, throughput=tp.value if tp else None, unit=unit,
            ok=err is None, error=err,
            extra={"peak_memory_bytes": mem, "samples": n_samples}))
        res.add_counts(n_steps, n_samples)
        if err is None and tp is not None:
            fitted[b] = (tp, mem)
        return err is None

    ok_max: int | None = None
    fail_min: int | None = None
    b = min(2, cap)  # BatchNorm cannot train on a single sample at small image sizes
    limit = "cap"
    while True:
        if probe(b):
            ok_max = b
            if b >= cap:
                break
            b = min(b * 2, cap)
        else:
            fail_min = b
            last_error = res.points[-1].error or ""
            limit = ("host_oom" if host_oom else
                     "oom" if budget is None or "budget" not in last_error else "memory_budget")
            break
    # Bisect between the last fit and the first failure, a few probes at most.
    for _ in range(4):
        # A host OOM says nothing about the device's limit: no bisection on it.
        if host_oom or ok_max is None or fail_min is None or fail_min - ok_max <= 1:
            break
        mid = (ok_max + fail_min) // 2
        if probe(mid):
            ok_max = mid
        else:
            fail_min = mid
    fits = sum(1 for p in res.points if p.ok)
    res.extra = replace(res.extra, kind=BatchFinderExtra(
        max_batch_fit=ok_max, first_failed_batch=fail_min, limit=limit,
        probes=len(res.points), probes_fit=fits, probes_failed=len(res.points) - fits,
        recommended_batch=recommended({b: mem for b, (_, mem) in fitted.items()}, limit_bytes),
        host_oom=host_oom[0] if host_oom else None))
    res.batch_size = ok_max
    if ok_max is not None:
        res.throughput, res.peak_memory_bytes = fitted[ok_max]
    # steps/samples are the timed ones summed over every probe (warm-up excluded).
