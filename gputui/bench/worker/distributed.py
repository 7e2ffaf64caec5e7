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
from dataclasses import replace
from datetime import timedelta
from typing import TYPE_CHECKING, Any

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from gputui.bench import catalog, events
from gputui.bench.extras import RanksEnergy
from gputui.bench.kind_extras import AllReduce, DdpExtra, Scaling
from gputui.bench.request import RunRequest
from gputui.errors import UsageError

if TYPE_CHECKING:
    from gputui.bench.worker.context import Ctx


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def run_ddp(ctx: Ctx) -> None:
    from gputui.bench.launch import plan as make_plan

    req, dev = ctx.request, ctx.device
    lp = make_plan(os.environ, nproc=req.nproc, nnodes=req.nnodes, node_rank=req.node_rank,
                   rdzv_endpoint=req.rdzv_endpoint)
    if lp is None:
        raise UsageError("a distributed run needs --nproc or --nnodes above 1")
    world, local = lp.world, lp.local
    backend = "nccl" if dev.type == "cuda" else "gloo"
    # Ranks take consecutive GPUs from --device's index on (cuda:2 --nproc 2: 2 and 3),
    # numbered as CUDA_VISIBLE_DEVICES shows them. Device-count queries create no context.
    first = int(dev.index or 0) if dev.type == "cuda" else 0
    need = first + (lp.local_rank + 1 if lp.launcher else local)
    if dev.type == "cuda" and torch.cuda.device_count() < need:
        raise UsageError(f"{local} rank(s) from cuda:{first} need GPUs {first}.."
                         f"{need - 1}; {torch.cuda.device_count()} visible")
    # Each rank gets its share of the cores: N ranks × all cores would oversubscribe.
    threads = req.threads or max(1, (os.cpu_count() or 1) // local)
    port = lp.port if lp.port is not None else free_port()
    if lp.launcher is not None:
        # torchrun/srun made this worker one rank: run it here, reporting directly.
        here = _Here(ctx)
        rank_main(int(lp.rank or 0), world, port, backend, req, dev.type, threads, here,
                  ctx.cancel, os.getppid(), first, lp.host, lp.local_rank, True)
        if here.failure is not None:
            raise RankFailed(here.failure)
        if here.payload is None:
            raise RuntimeError("distributed run ended without a result")
        _fill(ctx, here.payload, world, backend, threads, first, lp)
        return
    mpc = mp.get_context("spawn")
    q: Any = mpc.Queue()
    stop = mpc.Event()
    procs = [
        mpc.Process(target=rank_main, args=(lp.global_rank(r), world, port, backend, req,
                                            dev.type, threads, q, stop, os.getpid(), first,
                                            lp.host, r), daemon=True)
        for r in range(local)
    ]
    for p in procs:
        p.start()
    payload: dict[str, Any] | None = None
    failure: events.Failed | None = None
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
    _fill(ctx, payload, world, backend, threads, first, lp)


class _Here:
    """The queue a rank reports through, when the rank is this very process."""

    def __init__(self, ctx: Ctx) -> None:
        self.ctx = ctx
        self.payload: dict[str, Any] | None = None
        self.failure: events.Failed | None = None

    def put(self, item: tuple[str, Any]) -> None:
        kind, body = item
        if kind == "event":
            self.ctx.emit(body)
        elif kind == "result":
            self.payload = body
        elif kind == "error" and self.failure is None:
            self.failure = body


class RankFailed(Exception):
    """A rank reported an error event; the worker re-emits it as is."""

    def __init__(self, event: events.Failed) -> None:
        super().__init__(event.message)
        self.event = event


def _fill(ctx: Ctx, p: dict[str, Any], world: int, backend: str, threads: int,
          first: int = 0, lp: Any = None) -> None:
    from gputui.bench.worker.measure import fill_loop
    from gputui.bench.worker.timing import LoopStats

    res = ctx.result
    loop = LoopStats(steps=p["steps"], samples=p["samples"], wall_s=p["wall_s"],
                     step_ms=p["step_ms"], window_rates=p["window_rates"],
                     stopped_early=p["stopped_early"])
    # The headline is all ranks' samples ÷ rank 0's timed-loop seconds; the window rates
    # are all ranks' samples per window (the window hook sums them).
    fill_loop(res, loop, ctx.bench.unit)
    res.phases_ms = p["phases_ms"]
    if p["phases_ms"] is not None:
        ctx.emit(events.Phase(p["phases_ms"]))
    res.peak_memory_bytes = p["peak_memory_bytes"]
    res.settings.update({
        "shapes": p["shapes"], "world_size": world, "backend": backend,
        # What each rank's torch ran with (the worker process itself only coordinates).
        "threads": p["threads"], "interop_threads": p["interop_threads"],
        "threads_per_rank": p["threads"], "threads_total": p["threads"] * world,
        "ddp": "DistributedDataParallel, one process per rank",
        "throughput_scope": "aggregated over all ranks (batch_size is per rank)",
        "phases": "rank 0, separate instrumented pass with syncs between phases",
        "rank_devices": ([f"cuda:{first + r}" for r in range(lp.local if lp else world)]
                         if backend == "nccl" else ["cpu"] * (lp.local if lp else world)),
    })
    # One per global rank; other machines' GPUs are not in this machine's NVML.
    res.settings["rank_gpu_uuids"] = p.get("rank_gpu_uuids")
    if lp is not None:
        res.settings.update(lp.to_settings())
    # Each rank's own samples over its own timed-loop wall time; they add up to about
    # throughput.mean (ranks start together after a barrier and stop on the same step).
    kind = DdpExtra(per_rank_samples_per_s=tuple(p["per_rank_rates"]),
                    per_rank_samples=tuple(p["per_rank_samples"]), allreduce=p.get("allreduce"),
                    scaling=_scaling(ctx, world))
    res.extra = replace(res.extra, kind=kind)
    # Energy: every rank's GPU counter over its own timed loop, summed (None on CPU or
    # when any rank could not read it, or the window was too short to trust).
    joules, windows = p.get("per_rank_joules"), p.get("per_rank_window_s")
    from gputui.bench.worker.energy import MIN_ENERGY_WINDOW_S

    if (joules and all(j is not None and j >= 0 for j in joules) and windows
            and max(windows) >= MIN_ENERGY_WINDOW_S):
        total_j = float(sum(joules))
        wall = max(windows)
        res.energy_j_per_sample = total_j / loop.samples if loop.samples else None
        res.avg_power_w = total_j / wall if wall > 0 else None
        res.extra = replace(res.extra, energy=RanksEnergy(
            source="NVML total energy counter (mJ), summed over ranks",
            per_rank_joules=tuple(joules), window_s=wall))
    else:
        res.energy_j_per_sample = None
        res.avg_power_w = None


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


def rank_main(rank: int, world: int, port: int, backend: str, req: RunRequest,
              device_type: str, threads: int, q: Any, stop: Any, parent_pid: int,
              first: int = 0, host: str = "127.0.0.1", local_rank: int | None = None,
              reporter: bool | None = None) -> None:
    """One rank. `rank` is global (0 … world−1); `local_rank` picks this machine's GPU;
    the reporter (local rank 0 of each node) sends events and the result."""
    local = rank if local_rank is None else local_rank
    reports = local == 0 if reporter is None else reporter
    die_with_parent(parent_pid)
    from gputui.bench.worker.failures import classify
    from gputui.bench.worker.measure import peak_memory, reset_peak
    from gputui.bench.worker.timing import PhaseTimer, sync, timed_loop
    from gputui.bench.worker.workloads import TrainStep, configure_precision, make_workload

    local_stop = {"v": False}

    def on_term(*_: object) -> None:
        local_stop["v"] = True

    # The runner may signal the whole process group: stop with the others, not alone.
    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, on_term)
    batch = req.batch_size
    try:
        torch.set_num_threads(threads)
        if device_type == "cuda":
            torch.cuda.set_device(first + local)
            dev = torch.device("cuda", first + local)
        else:
            dev = torch.device("cpu")
        # Global rank 0 listens at host:port (127.0.0.1 unless --rdzv-endpoint says).
        addr = f"[{host}]" if ":" in host else host
        dist.init_process_group(backend, init_method=f"tcp://{addr}:{port}", rank=rank,
                                world_size=world, timeout=timedelta(minutes=5))
        configure_precision(dev, req.precision)
        # DDP broadcasts rank 0's weights at construction; every rank starts identical.
        wl = make_workload(req, dev, batch)
        ddp = torch.nn.parallel.DistributedDataParallel(
            wl.model, device_ids=[dev.index] if dev.type == "cuda" else None)
        step = TrainStep(wl, dev, req.precision, req.compile, ddp_model=ddp)

        def emit(ev: events.Event) -> None:
            if reports:
                q.put(("event", ev))

        from gputui.bench.worker import nvtx

        nvtx.configure(req.nvtx, dev.type)
        n_warm = int(req.warmup)
        with nvtx.span("warmup"):
            for i in range(n_warm):
                with nvtx.span(f"warmup step {i}"):
                    step(i)
                emit(events.Warmup(i + 1, n_warm))
            sync(dev)
        reset_peak(dev)
        from gputui.bench.worker.energy import EnergyMeter, NvmlLink

        link = NvmlLink(dev) if dev.type == "cuda" else None
        meter = EnergyMeter(link if link is not None and link.available else None,
                            min_window_s=0.0)
        # Start the timed loops together: per-rank walls then cover the same interval.
        dist.barrier()
        meter.start()
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
                           steps=req.steps, duration_s=req.duration_s,
                           unit=catalog.get(req.benchmark).unit, emit=emit,
                           make_progress=events.Progress, window_hook=window)
        stopped = local_stop["v"] or stop.is_set()
        note = meter.stop(0).note
        if link is not None:
            link.close()
        rank_j = note.joules if note is not None else None
        rank_w = note.window_s if note is not None else None
        energy = torch.tensor([-1.0 if rank_j is None else float(rank_j),
                               float(rank_w or 0.0)], dtype=torch.float64, device=dev)
        energies = [torch.zeros_like(energy) for _ in range(world)]
        dist.all_gather(energies, energy)
        # stats.samples is the all-rank total (the window hook sums it); per rank, count
        # this rank's own samples over this rank's own wall time.
        mine = torch.tensor([local_samples["n"] / stats.wall_s if stats.wall_s else 0.0,
                             float(local_samples["n"])], dtype=torch.float64, device=dev)
        gathered = [torch.zeros_like(mine) for _ in range(world)]
        dist.all_gather(gathered, mine)
        # Each rank's GPU by UUID (None on a CPU): the runner maps them to NVML devices
        # for config.topology (cuda:N is not NVML's index N under CUDA_VISIBLE_DEVICES).
        from gputui.bench.worker.energy import torch_uuid

        uuids: list[str | None] = [None] * world
        dist.all_gather_object(uuids, torch_uuid(dev))
        phases: dict[str, float] | None = None
        if not stopped:
            timer = PhaseTimer(dev)
            for i in range(3):
                step.instrumented(i, timer)  # all ranks: backward all-reduces gradients
            med = timer.medians()
            phases = {k: med.get(k, 0.0) for k in events.PHASES}
            phases["total"] = sum(phases.values())
        allreduce = (None if stats.stopped_early else
                     _time_allreduce(wl.model, dev, stats.step_ms))
        if reports:
            q.put(("result", {
                "steps": stats.steps, "samples": stats.samples, "wall_s": stats.wall_s,
                "step_ms": stats.step_ms, "window_rates": stats.window_rates,
                "stopped_early": stats.stopped_early or stopped,
                "samples_per_step": wl.samples_per_step, "phases_ms": phases,
                "peak_memory_bytes": peak_memory(dev), "shapes": wl.shapes,
                "per_rank_rates": [float(g[0].item()) for g in gathered],
                "per_rank_samples": [int(g[1].item()) for g in gathered],
                "per_rank_joules": [None if e[0].item() < 0 else float(e[0].item())
                                    for e in energies],
                "per_rank_window_s": [float(e[1].item()) for e in energies],
                "threads": torch.get_num_threads(),
                "interop_threads": torch.get_num_interop_threads(),
                "allreduce": allreduce, "rank_gpu_uuids": uuids,
            }))
        dist.destroy_process_group()
    except Exception as exc:
        import traceback

        traceback.print_exc()
        q.put(("error", classify(exc, batch, req)))


ALLREDUCE_DEFINITION = ("all-reduce of one gradient's worth of fp32 (every trainable "
                        "parameter), timed alone after the loop, median of 5 ÷ the median "
                        "step time: an upper bound, as DDP overlaps it with backward")


def _time_allreduce(model: Any, dev: torch.device, step_ms: list[float]) -> AllReduce:
    """What share of a step one gradient all-reduce would take (every rank calls this)."""
    from gputui.bench.stats import percentile
    from gputui.bench.worker.timing import sync

    numel = sum(p.numel() for p in model.parameters() if p.requires_grad)
    buf = torch.zeros(numel, dtype=torch.float32, device=dev)
    for _ in range(2):  # connections and buffers set up outside the timing
        dist.all_reduce(buf)
    times = []
    for _ in range(5):
        sync(dev)
        t0 = time.perf_counter()
        dist.all_reduce(buf)
        sync(dev)
        times.append((time.perf_counter() - t0) * 1000.0)
    ms = percentile(times, 50)
    step = percentile(step_ms, 50)
    return AllReduce(ms=ms, bytes=numel * 4, step_ms=step,
                     share_of_step=ms / step if ms is not None and step else None,
                     definition=ALLREDUCE_DEFINITION)


def _scaling(ctx: Ctx, world: int) -> Scaling | None:
    """extra.scaling against --baseline (the same run, one process); None without one."""
    from gputui.bench.launch import scaling

    res, req = ctx.result, ctx.request
    total = res.throughput.value if res.throughput is not None else None
    eff = scaling(total, world, req.baseline_value, req.baseline_world)
    if eff is None or req.baseline_value is None:
        return None
    return Scaling(baseline_id=req.baseline_id, baseline_value=req.baseline_value,
                   baseline_world=req.baseline_world or 1, world_size=world, total=total,
                   efficiency=eff,
                   definition="total ÷ (ranks × the baseline's throughput per process)")
