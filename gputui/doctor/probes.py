"""The doctor's performance probes, run as benchmarks in the benchmark worker process.

Each GPU gets the `matmul` and `membw` benchmarks (bf16 and tf32 TFLOP/s; device copy
GB/s; pinned host→device and device→host GB/s on CUDA), duration-bounded, one worker at
a time, with the worker pinned to that GPU by UUID (CUDA_VISIBLE_DEVICES) so that CUDA's
device order cannot point a probe at another GPU. The benchmarks' isolation holds: a
probe that crashes, runs out of memory or hangs past its timeout fails its checks with
the reason; the doctor goes on with the next. Throttle episodes the runner saw during a
probe are attributed to it.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from gputui.bench import events
from gputui.bench.request import make_request
from gputui.bench.result import Result
from gputui.bench.runner import BenchRun
from gputui.doctor.perf import ProbeFigure
from gputui.telemetry.throttle import throttle_words

# Benchmark point label → doctor probe id, per benchmark.
POINTS: Mapping[str, Mapping[str, str]] = {
    "matmul": {"bf16": "matmul_bf16", "tf32": "matmul_tf32"},
    "membw": {"copy": "membw", "h2d_pinned": "h2d", "d2h_pinned": "d2h"},
}
# Probes the benchmarks measure only on a CUDA device.
CUDA_ONLY = frozenset({"matmul_tf32", "h2d", "d2h"})
# The point's extra field holding the datasheet peak, per benchmark.
PEAK_KEY = {"matmul": "peak_tflops", "membw": "peak_gbps"}


@dataclass(frozen=True, slots=True)
class ProbePlan:
    """How the probes run. The defaults are for a GPU: every point timed for
    `duration_s`; tests pass a CPU device and tiny sizes."""

    device: str | None = None  # None: the GPU under test (cuda:0 behind its UUID)
    duration_s: float | None = 2.0
    steps: int | None = None
    warmup: int | None = None
    params: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    timeout_s: float = 300.0  # a probe still running after this has hung
    grace_s: float = 5.0  # SIGTERM → SIGKILL, as for benchmarks
    benchmarks: tuple[str, ...] = tuple(POINTS)
    test_hook: str | None = None  # the worker's simulated failures (tests only)


# Called every half second while a probe runs; returns the GPU's clocks-event reasons
# then (None: unknown), which are attributed to the probe point being measured.
Tick = Callable[[], int | None]


def probe_gpu(gpu: int, uuid: str, plan: ProbePlan, cancel: threading.Event,
              on_tick: Tick | None = None) -> list[ProbeFigure]:
    """Run every benchmark probe on one GPU; never raises for a probe's failure."""
    figures: list[ProbeFigure] = []
    on_cuda = plan.device is None or plan.device.startswith("cuda")
    for bench in plan.benchmarks:
        if cancel.is_set():
            break
        result, masks = _run_one(bench, uuid, plan, cancel, on_tick)
        figures.extend(figures_of(bench, gpu, result, on_cuda=on_cuda,
                                  masks=masks if on_tick is not None else None))
    return figures


def probe_interconnect(gpus: Sequence[tuple[int, str]], plan: ProbePlan,
                       cancel: threading.Event, link_of: Callable[[int, int], str | None],
                       on_tick: Tick | None = None) -> list[ProbeFigure]:
    """GPU-to-GPU copies for every ordered pair, and NCCL all-reduce over all of them, in
    one worker that sees exactly these GPUs (by UUID, in this order)."""
    figures: list[ProbeFigure] = []
    uuids = ",".join(u for _, u in gpus)
    order = [i for i, _ in gpus]
    for bench in ("p2p", "allreduce"):
        if cancel.is_set():
            break
        result, _ = _run_one(bench, uuids, plan, cancel, on_tick)
        figures.extend(interconnect_figures(bench, result, order, link_of))
    return figures


def interconnect_figures(bench: str, result: Result, order: Sequence[int],
                         link_of: Callable[[int, int], str | None]) -> list[ProbeFigure]:
    """Figures from a p2p or allreduce result; the worker's CUDA index k is GPU order[k]."""
    throttle = _throttle_words(result)
    reason = None
    if result.status != "ok":
        reason = (f"{result.error.message} ({result.error.kind})" if result.error
                  else f"the probe ended {result.status}")
    if bench == "allreduce":
        point = next((p for p in result.points if p.label == "allreduce"), None)
        value = point.throughput if point is not None and point.ok else None
        return [ProbeFigure("allreduce", None, value, error=reason if value is None else None,
                            throttle=throttle)]
    got: dict[tuple[int, int], ProbeFigure] = {}
    for p in result.points:
        src, dst = p.get("src"), p.get("dst")
        if src is None or dst is None or not p.ok:
            continue
        a, b = order[int(src)], order[int(dst)]
        got[(a, b)] = ProbeFigure("p2p", a, p.throughput, peer=b, link=link_of(a, b),
                                  throttle=throttle)
    if reason is not None:
        for a in order:
            for b in order:
                if a != b:
                    got.setdefault((a, b), ProbeFigure("p2p", a, None, peer=b,
                                                       link=link_of(a, b), error=reason,
                                                       throttle=throttle))
    return list(got.values())


def _throttle_words(result: Result) -> str | None:
    return ", ".join(sorted({str(e.get("reasons_text") or "")
                             for e in result.throttle_episodes} - {""})) or None


def _run_one(bench: str, uuid: str, plan: ProbePlan, cancel: threading.Event,
             on_tick: Tick | None) -> tuple[Result, dict[str, int]]:
    """Run one benchmark; `uuid`: the GPU (or comma-separated GPUs) the worker may see.

    Also returns, per point label, the clocks-event reasons `on_tick` saw while that
    point was being measured (see `attribute`)."""
    env = dict(os.environ)
    device = plan.device
    if device is None:
        env["CUDA_VISIBLE_DEVICES"] = uuid
        device = "cuda:0"
    request = make_request(bench, device=device, duration_s=plan.duration_s, steps=plan.steps,
                           warmup=plan.warmup, params=dict(plan.params.get(bench, {})) or None,
                           test_hook=plan.test_hook)
    lock = threading.Lock()
    ticks: list[tuple[float, int]] = []
    points: list[tuple[float, str]] = []

    def on_event(event: object) -> None:  # the runner's reader thread
        if isinstance(event, events.Point):
            with lock:
                points.append((time.monotonic(), event.label))

    run = BenchRun(request, timeout_s=plan.timeout_s, grace_s=plan.grace_s, env=env,
                   on_event=on_event)
    run.start()
    try:
        while not run.wait(0.5):
            if on_tick is not None:
                mask = on_tick()
                with lock:
                    ticks.append((time.monotonic(), mask or 0))
            if cancel.is_set():
                run.cancel("doctor stopped")
    except KeyboardInterrupt:
        # The worker leads its own process group (the terminal's Ctrl-C never reaches
        # it): stop it the benchmarks' way before the doctor reports what it checked.
        run.cancel("interrupted")
        run.wait(plan.grace_s + 2.0)
        raise
    assert run.result is not None
    with lock:
        return run.result, attribute(ticks, points)


def attribute(ticks: Sequence[tuple[float, int]],
              points: Sequence[tuple[float, str]]) -> dict[str, int]:
    """Each point's clocks-event reasons: the ticks between the previous point's end and
    its own (OR-ed); a point shorter than the tick interval takes the nearest tick."""
    out: dict[str, int] = {}
    start = float("-inf")
    for end, label in points:
        inside = [m for t, m in ticks if start < t <= end]
        if not inside and ticks:
            inside = [min(ticks, key=lambda tm: abs(tm[0] - end))[1]]
        mask = 0
        for m in inside:
            mask |= m
        out[label] = mask
        start = end
    return out


def figures_of(bench: str, gpu: int, result: Result, *, on_cuda: bool,
               masks: Mapping[str, int] | None = None) -> list[ProbeFigure]:
    """The doctor's figures from one benchmark result. A probe the result lacks because
    the run failed (crash, out of memory, timeout) is a failed figure with the reason.

    `masks`: the throttle reasons seen while each point ran (label → mask); without
    them, the episodes the runner saw anywhere in the run are shown with every point."""
    wanted = POINTS[bench]
    run_throttle = _throttle_words(result)
    got: dict[str, ProbeFigure] = {}
    for p in result.points:
        probe = wanted.get(p.label)
        if probe is None:
            continue
        peak = p.get(PEAK_KEY[bench])
        throttle = (throttle_words(masks.get(p.label, 0)) or None if masks is not None
                    else run_throttle)
        got[probe] = ProbeFigure(probe, gpu, p.throughput if p.ok else None,
                                 peak=float(peak) if peak else None,
                                 error=p.error, throttle=throttle)
    if result.status != "ok":
        reason = (f"{result.error.message} ({result.error.kind})" if result.error
                  else f"the probe ended {result.status}")
        expected = wanted.values() if on_cuda else [
            p for p in wanted.values() if p not in CUDA_ONLY]
        for probe in expected:
            got.setdefault(probe, ProbeFigure(probe, gpu, None, error=reason,
                                              throttle=run_throttle))
    return list(got.values())
