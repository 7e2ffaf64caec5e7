"""p2p and allreduce: how fast the GPUs of one box talk to each other (CUDA, 2+ GPUs).

p2p copies a buffer from each GPU to each other GPU (one point per ordered pair, GB/s of
bytes moved). allreduce runs NCCL's all-reduce over every visible GPU from this one
process (`torch.cuda.nccl.all_reduce`, one communicator per device) and reports the bus
bandwidth as nccl-tests does: algbw × 2(n−1)/n, algbw = bytes per rank ÷ time.

Both time many operations between synchronisations of every GPU involved: a copy or a
collective is finished only when all its devices are.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING

from gputui.bench import events, stats
from gputui.bench.kind_extras import P2pExtra
from gputui.bench.worker import nvtx
from gputui.bench.worker.context import Ctx
from gputui.bench.worker.kinds import register
from gputui.errors import UsageError

if TYPE_CHECKING:
    import torch

SYNC_EVERY = 5  # operations between synchronisations


def _cuda_devices(ctx: Ctx, what: str) -> list[torch.device]:
    import torch

    n = torch.cuda.device_count() if ctx.device.type == "cuda" else 0
    if n < 2:
        raise UsageError(f"{what} needs two or more CUDA GPUs (this run sees {n})")
    return [torch.device("cuda", i) for i in range(n)]


def _timed(ctx: Ctx, op: Callable[[], None], devices: list[torch.device]) -> tuple[int, float]:
    """Operations done and seconds taken, bounded by the request's steps or duration."""
    import torch

    def sync() -> None:
        for d in devices:
            torch.cuda.synchronize(d)

    with nvtx.span("warmup"):
        for _ in range(int(ctx.request.warmup or 1)):
            op()
        sync()
    with nvtx.span("timed loop"):
        return _loop(ctx, op, sync)


def _loop(ctx: Ctx, op: Callable[[], None], sync: Callable[[], None]) -> tuple[int, float]:
    steps, duration = ctx.request.steps, ctx.request.duration_s
    done, t0 = 0, time.perf_counter()
    while True:
        with nvtx.span(f"step {done}"):
            op()
        done += 1
        if done % SYNC_EVERY == 0 or (steps and done >= steps):
            sync()
            elapsed = time.perf_counter() - t0
            if ((steps and done >= steps) or (duration and elapsed >= duration)
                    or ctx.should_stop() or (not steps and not duration and done >= 20)):
                return done, elapsed


@register("p2p")
def run_p2p(ctx: Ctx) -> None:
    import torch

    devices = _cuda_devices(ctx, "p2p")
    nbytes = int(ctx.params["bytes"])
    res = ctx.result
    res.settings.update({"bytes": nbytes, "pairs": "every ordered pair"})
    bufs = {d.index: torch.empty(nbytes, dtype=torch.uint8, device=d) for d in devices}
    by_pair: dict[str, float] = {}
    for src in devices:
        for dst in devices:
            if src == dst:
                continue
            ctx.checkpoint()
            a, b = bufs[src.index], bufs[dst.index]
            done, secs = _timed(ctx, lambda a=a, b=b: b.copy_(a, non_blocking=True),
                                [src, dst])
            gbps = nbytes * done / secs / 1e9
            label = f"{src.index}->{dst.index}"
            ctx.add_point(events.Point(
                label=label, batch_size=None, throughput=gbps, unit="GB/s",
                extra={"src": src.index, "dst": dst.index, "bytes": nbytes, "copies": done,
                       "peer_access": torch.cuda.can_device_access_peer(src.index,
                                                                        dst.index)}))
            by_pair[label] = gbps
            res.add_counts(done, None)
            if ctx.should_stop():
                res.status = "cancelled"
                break
    # The headline is the slowest pair: the one a collective over all GPUs waits for.
    res.throughput = stats.Throughput(
        value=min(by_pair.values(), default=None), median=None, p10=None, p90=None,
        unit="GB/s", definition="slowest pair's copy GB/s")
    res.extra = replace(res.extra, kind=P2pExtra(gbps=by_pair))


@register("allreduce")
def run_allreduce(ctx: Ctx) -> None:
    import torch
    import torch.cuda.nccl as nccl

    devices = _cuda_devices(ctx, "allreduce")
    n = len(devices)
    nbytes = int(ctx.params["bytes"])
    res = ctx.result
    tensors = [torch.ones(nbytes // 4, dtype=torch.float32, device=d) for d in devices]
    res.settings.update({"bytes": nbytes, "ranks": n, "dtype": "float32", "op": "sum",
                         "busbw": "algbw × 2(n−1)/n (nccl-tests)"})
    ctx.checkpoint()
    done, secs = _timed(ctx, lambda: nccl.all_reduce(tensors), devices)
    algbw = nbytes * done / secs / 1e9
    busbw = algbw * 2 * (n - 1) / n
    ctx.add_point(events.Point(
        label="allreduce", batch_size=None, throughput=busbw, unit="GB/s",
        extra={"algbw_gbps": algbw, "busbw_gbps": busbw, "ranks": n, "bytes": nbytes,
               "ops": done, "nccl_version": _version(nccl.version())}))
    res.add_counts(done, None)
    res.throughput = stats.Throughput(value=busbw, median=None, p10=None, p90=None,
                                      unit="GB/s", definition="NCCL bus bandwidth")


def _version(v: object) -> str:
    # A (major, minor, patch) tuple in current torch, a plain integer in older ones.
    return ".".join(map(str, v)) if isinstance(v, tuple) else str(v)
