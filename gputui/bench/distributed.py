"""`--nproc N`: data-parallel training with torch.distributed (DDP).

The worker process spawns N ranks (NCCL on GPUs, Gloo on CPU) that meet at a free port on
127.0.0.1. Ranks cannot write events themselves (spawned children do not inherit the
worker's private event fd), so rank 0 sends them through a queue and the worker emits
them. Ranks agree at every window end (one all-reduce: samples, stop flag, next window
size), so they stop on the same step whether the run ends, times out or is cancelled.

Ranks die with the worker: each arms PR_SET_PDEATHSIG (SIGKILL) on Linux, and every
window end also checks os.getppid() (carried in the same all-reduce, so all ranks leave
together instead of one waiting for the others in a collective).
"""

from __future__ import annotations

import contextlib
import os
import queue
import signal
import socket
import sys
import time
from datetime import timedelta
from typing import TYPE_CHECKING, Any

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from gputui.bench import catalog, events
from gputui.errors import UsageError

if TYPE_CHECKING:
    from gputui.bench.worker import Ctx


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def run_ddp(ctx: Ctx) -> None:
    spec, dev = ctx.spec, ctx.device
    world = int(spec["nproc"])
    backend = "nccl" if dev.type == "cuda" else "gloo"
    if dev.type == "cuda" and torch.cuda.device_count() < world:
        raise UsageError(f"--nproc {world} needs {world} GPUs; "
                         f"{torch.cuda.device_count()} visible")
    # Each rank gets its share of the cores: N ranks × all cores would oversubscribe.
    threads = spec.get("threads") or max(1, (os.cpu_count() or 1) // world)
    port = free_port()
    mpc = mp.get_context("spawn")
    q: Any = mpc.Queue()
    stop = mpc.Event()
    procs = [
        mpc.Process(target=rank_main, args=(r, world, port, backend, spec, dev.type, threads,
                                            q, stop, os.getpid()), daemon=True)
        for r in range(world)
    ]
    for p in procs:
        p.start()
    payload: dict[str, Any] | None = None
    failure: dict[str, Any] | None = None
    try:
        while True:
            if ctx.cancel.is_set():
                stop.set()
            try:
                kind, body = q.get(timeout=0.2)
            except queue.Empty:
                dead = [p for p in procs if not p.is_alive()]
                if len(dead) == len(procs):
                    break
                bad = [p for p in dead if p.exitcode not in (0, None)]
                if bad and failure is None and payload is None:
                    failure = events.error("crash", f"rank {procs.index(bad[0])} exited with "
                                           f"code {bad[0].exitcode}")
                    break
                continue
            if kind == "event":
                ctx.emit(body)
            elif kind == "result":
                payload = body
            elif kind == "error" and failure is None:
                failure = body
                stop.set()
    finally:
        deadline = time.monotonic() + 10
        for p in procs:
            p.join(max(0.1, deadline - time.monotonic()))
        for p in procs:
            if p.is_alive():
                p.terminate()
                p.join(2)
    if failure is not None:
        raise RankFailed(failure)
    if payload is None:
        raise RuntimeError("distributed run ended without a result")
    _fill(ctx, payload, world, backend, threads)


class RankFailed(Exception):
    """A rank reported an error event; the worker re-emits it as is."""

    def __init__(self, event: dict[str, Any]) -> None:
        super().__init__(event["message"])
        self.event = event


def _fill(ctx: Ctx, p: dict[str, Any], world: int, backend: str, threads: int) -> None:
    from gputui.bench.timing import LoopStats
    from gputui.bench.worker import fill_loop

    doc = ctx.doc
    stats = LoopStats(steps=p["steps"], samples=p["samples"], wall_s=p["wall_s"],
                      step_ms=p["step_ms"], stopped_early=p["stopped_early"])
    # throughput.mean = all ranks' samples / rank 0's wall time of the timed loop; the
    # median is rank 0's per-step rate × world size (every rank does the same steps).
    fill_loop(doc, stats, p["samples_per_step"], ctx.bench.unit, scale=world)
    doc["phases_ms"] = p["phases_ms"]
    if p["phases_ms"] is not None:
        ctx.emit(events.phase(p["phases_ms"]))
    doc["peak_memory_bytes"] = p["peak_memory_bytes"]
    doc["settings"].update({
        "shapes": p["shapes"], "world_size": world, "backend": backend,
        # What each rank's torch ran with (the worker process itself only coordinates).
        "threads": p["threads"], "interop_threads": p["interop_threads"],
        "threads_per_rank": p["threads"], "threads_total": p["threads"] * world,
        "ddp": "DistributedDataParallel, one process per rank",
        "throughput_scope": "aggregated over all ranks (batch_size is per rank)",
        "phases": "rank 0, separate instrumented pass with syncs between phases",
    })
    # Each rank's own samples over its own timed-loop wall time; they add up to about
    # throughput.mean (ranks start together after a barrier and stop on the same step).
    doc["extra"]["per_rank_samples_per_s"] = p["per_rank_rates"]
    doc["extra"]["per_rank_samples"] = p["per_rank_samples"]
    doc["energy_j_per_sample"] = None
    doc["avg_power_w"] = None


def die_with_parent(parent_pid: int) -> None:
    """SIGKILL this process when its parent dies (Linux), and exit now if it already has."""
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            import ctypes

            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
    if os.getppid() != parent_pid:  # died before the prctl took effect
        os._exit(1)


PR_SET_PDEATHSIG = 1


def rank_main(rank: int, world: int, port: int, backend: str, spec: dict[str, Any],
              device_type: str, threads: int, q: Any, stop: Any, parent_pid: int) -> None:
    die_with_parent(parent_pid)
    from gputui.bench.timing import PhaseTimer, sync, timed_loop
    from gputui.bench.worker import classify, peak_memory, reset_peak
    from gputui.bench.workloads import TrainStep, configure_precision, make_workload

    local_stop = {"v": False}

    def on_term(*_: object) -> None:
        local_stop["v"] = True

    # The runner may signal the whole process group: stop with the others, not alone.
    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, on_term)
    batch = spec["batch_size"]
    try:
        torch.set_num_threads(threads)
        if device_type == "cuda":
            torch.cuda.set_device(rank)
            dev = torch.device("cuda", rank)
        else:
            dev = torch.device("cpu")
        dist.init_process_group(backend, init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                                world_size=world, timeout=timedelta(minutes=5))
        configure_precision(dev, spec["precision"])
        # DDP broadcasts rank 0's weights at construction; every rank starts identical.
        wl = make_workload(spec, dev, batch)
        ddp = torch.nn.parallel.DistributedDataParallel(
            wl.model, device_ids=[rank] if dev.type == "cuda" else None)
        step = TrainStep(wl, dev, spec["precision"], spec["compile"], ddp_model=ddp)

        def emit(ev: dict[str, Any]) -> None:
            if rank == 0:
                q.put(("event", ev))

        n_warm = int(spec["warmup"])
        for i in range(n_warm):
            step(i)
            emit(events.warmup(i + 1, n_warm))
        sync(dev)
        reset_peak(dev)
        # Start the timed loops together: per-rank walls then cover the same interval.
        dist.barrier()
        local_samples = {"n": 0}

        def window(local: int, done: bool, next_ws: int) -> tuple[int, bool, int]:
            local_samples["n"] += local
            want_stop = done or local_stop["v"] or stop.is_set()
            orphan = os.getppid() != parent_pid
            t = torch.tensor([local, int(want_stop), next_ws if rank == 0 else 0, int(orphan)],
                             dtype=torch.int64, device=dev)
            dist.all_reduce(t)
            total, stops, ws, orphans = (int(v) for v in t.tolist())
            if orphans:
                os._exit(1)  # the worker is gone: nobody is left to report to
            return total, stops > 0, max(1, ws)

        stats = timed_loop(step, device=dev, samples_per_step=wl.samples_per_step,
                           steps=spec.get("steps"), duration_s=spec.get("duration_s"),
                           unit=catalog.get(spec["benchmark"]).unit, emit=emit,
                           make_progress=events.progress, window_hook=window)
        stopped = local_stop["v"] or stop.is_set()
        # stats.samples is the all-rank total (the window hook sums it); per rank, count
        # this rank's own samples over this rank's own wall time.
        mine = torch.tensor([local_samples["n"] / stats.wall_s if stats.wall_s else 0.0,
                             float(local_samples["n"])], dtype=torch.float64, device=dev)
        gathered = [torch.zeros_like(mine) for _ in range(world)]
        dist.all_gather(gathered, mine)
        phases: dict[str, float] | None = None
        if not stopped:
            timer = PhaseTimer(dev)
            for i in range(3):
                step.instrumented(i, timer)  # all ranks: backward all-reduces gradients
            med = timer.medians()
            phases = {k: med.get(k, 0.0) for k in events.PHASES}
            phases["total"] = sum(phases.values())
        if rank == 0:
            q.put(("result", {
                "steps": stats.steps, "samples": stats.samples, "wall_s": stats.wall_s,
                "step_ms": stats.step_ms, "stopped_early": stats.stopped_early or stopped,
                "samples_per_step": wl.samples_per_step, "phases_ms": phases,
                "peak_memory_bytes": peak_memory(dev), "shapes": wl.shapes,
                "per_rank_rates": [float(g[0].item()) for g in gathered],
                "per_rank_samples": [int(g[1].item()) for g in gathered],
                "threads": torch.get_num_threads(),
                "interop_threads": torch.get_num_interop_threads(),
            }))
        dist.destroy_process_group()
    except Exception as exc:
        import traceback

        traceback.print_exc()
        q.put(("error", classify(exc, batch, spec)))
