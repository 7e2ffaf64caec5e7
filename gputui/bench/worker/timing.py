"""Measuring without disturbing what is measured.

- The timed loop never synchronises the device per step. On CUDA each step boundary is a
  CUDA event recorded in the stream; the events are read after the window ends with one
  synchronisation. On CPU, work is synchronous, so a host clock at each boundary is exact.
- Windows are sized to last about half a second, so progress events arrive about twice a
  second without a host sync per step.
- Consecutive boundaries share one event: step i lasts from boundary i to boundary i+1 and
  the step times add up to the stream's busy-or-starved time (host overhead included).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from gputui.bench.stats import percentile
from gputui.bench.worker import nvtx


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


class StepClock:
    """Step boundaries: CUDA events in the stream on CUDA, host clock on CPU."""

    def __init__(self, device: torch.device) -> None:
        self.device = device
        self.cuda = device.type == "cuda"
        self._marks: list[Any] = []

    def mark(self) -> None:
        if self.cuda:
            ev = torch.cuda.Event(enable_timing=True)
            ev.record()
            self._marks.append(ev)
        else:
            self._marks.append(time.perf_counter())

    def collect(self) -> list[float]:
        """Durations (ms) between the marks so far; keeps the last mark as the next start.

        On CUDA the caller must have synchronised first (we do it here to be safe: this is
        called only at window ends).
        """
        if len(self._marks) < 2:
            return []
        if self.cuda:
            self._marks[-1].synchronize()
            out = [a.elapsed_time(b) for a, b in zip(self._marks, self._marks[1:], strict=False)]
        else:
            out = [(b - a) * 1000.0 for a, b in zip(self._marks, self._marks[1:], strict=False)]
        self._marks = self._marks[-1:]
        return out


# (local samples in window, stop?, next window steps) -> (total samples, stop?, next steps).
# Distributed runs use it to agree across ranks at window ends.
WindowHook = Callable[[int, bool, int], tuple[int, bool, int]]


@dataclass
class LoopStats:
    steps: int = 0
    samples: int = 0  # across all ranks when a window hook aggregates
    wall_s: float = 0.0
    step_ms: list[float] = field(default_factory=list)
    window_rates: list[float] = field(default_factory=list)
    stopped_early: bool = False
    # --repeat N: (samples, seconds) of each timed trial; empty for a single trial.
    trials: list[tuple[int, float]] = field(default_factory=list)


def repeat_trials(run_once: Callable[[], LoopStats], n: int) -> LoopStats:
    """Run the timed phase `n` times (after the caller's one warm-up) and pool them: the
    headline over all trials is still samples ÷ timed seconds, and each trial's own
    (samples, seconds) is kept so its headline can be reported. A cancelled trial ends
    the series; it is kept (its numbers are real, and the run is marked cancelled)."""
    if n <= 1:
        return run_once()
    pooled = LoopStats()
    for _ in range(n):
        one = run_once()
        pooled.steps += one.steps
        pooled.samples += one.samples
        pooled.wall_s += one.wall_s
        pooled.step_ms.extend(one.step_ms)
        pooled.window_rates.extend(one.window_rates)
        pooled.trials.append((one.samples, one.wall_s))
        if one.stopped_early:
            pooled.stopped_early = True
            break
    return pooled


def timed_loop(
    step: Callable[[int], None],
    *,
    device: torch.device,
    samples_per_step: int,
    steps: int | None,
    duration_s: float | None,
    unit: str,
    emit: Callable[[Any], None] | None = None,
    should_stop: Callable[[], bool] = lambda: False,
    window_target_s: float = 0.5,
    window_hook: WindowHook | None = None,
    make_progress: Callable[..., Any] | None = None,
) -> LoopStats:
    """Run `step(i)` until `steps` or `duration_s`; sync only at window ends."""
    with nvtx.span("timed loop"):
        return _timed_loop(step, device, samples_per_step, steps, duration_s, unit, emit,
                           should_stop, window_target_s, window_hook, make_progress)


def _timed_loop(step: Callable[[int], None], device: torch.device, samples_per_step: int,
                steps: int | None, duration_s: float | None, unit: str,
                emit: Callable[[Any], None] | None, should_stop: Callable[[], bool],
                window_target_s: float, window_hook: WindowHook | None,
                make_progress: Callable[..., Any] | None) -> LoopStats:
    stats = LoopStats()
    clock = StepClock(device)
    window_steps = 1  # first window is one step: it sizes the next ones
    sync(device)
    t_start = time.perf_counter()
    t_win = t_start
    clock.mark()
    in_window = 0
    i = 0
    while True:
        nvtx.push(f"step {i}")
        step(i)
        nvtx.pop()
        clock.mark()
        i += 1
        in_window += 1
        stop_now = should_stop()
        reached = steps is not None and i >= steps
        if in_window < window_steps and not reached and not stop_now:
            continue
        sync(device)
        now = time.perf_counter()
        win_ms = clock.collect()
        stats.step_ms.extend(win_ms)
        win_s = now - t_win
        local = in_window * samples_per_step
        done = reached or stop_now
        if duration_s is not None and now - t_start >= duration_s:
            done = True
        per_step = (sum(win_ms) / len(win_ms) / 1000.0) if win_ms else win_s / in_window
        next_ws = max(1, min(10_000, round(window_target_s / per_step))) if per_step > 0 else 1
        total = local
        if window_hook is not None:
            total, done, next_ws = window_hook(local, done, next_ws)
        stats.steps = i
        stats.samples += total
        stats.wall_s = now - t_start
        rate = total / win_s if win_s > 0 else 0.0
        stats.window_rates.append(rate)
        if emit is not None and make_progress is not None:
            emit(make_progress(step=i, of=steps, elapsed_s=now - t_start, duration_s=duration_s,
                               throughput=rate, unit=unit, window_s=win_s, samples=total,
                               total_samples=stats.samples))
        t_win = now
        in_window = 0
        window_steps = next_ws
        if done:
            stats.stopped_early = stop_now and not reached
            return stats


def latency_loop(
    request: Callable[[int], None],
    *,
    device: torch.device,
    steps: int | None,
    duration_s: float | None,
    emit: Callable[[Any], None] | None,
    make_progress: Callable[..., Any] | None,
    unit: str,
    samples_per_request: int = 1,
    should_stop: Callable[[], bool] = lambda: False,
) -> LoopStats:
    """Single-stream: one request at a time, each waited for (that is what latency means).

    `step_ms` holds the per-request latencies. The sync after each request is part of the
    measurement here, not a disturbance: a request is done when its result is ready.
    """
    with nvtx.span("timed loop (single-stream)"):
        return _latency_loop(request, device, steps, duration_s, emit, make_progress, unit,
                             samples_per_request, should_stop)


def _latency_loop(request: Callable[[int], None], device: torch.device, steps: int | None,
                  duration_s: float | None, emit: Callable[[Any], None] | None,
                  make_progress: Callable[..., Any] | None, unit: str,
                  samples_per_request: int, should_stop: Callable[[], bool]) -> LoopStats:
    stats = LoopStats()
    t_start = time.perf_counter()
    t_last = t_start
    n_last = 0
    i = 0
    while True:
        t0 = time.perf_counter()
        nvtx.push(f"request {i}")
        request(i)
        sync(device)
        nvtx.pop()
        t1 = time.perf_counter()
        stats.step_ms.append((t1 - t0) * 1000.0)
        i += 1
        stop_now = should_stop()
        reached = steps is not None and i >= steps
        done = reached or stop_now or (duration_s is not None and t1 - t_start >= duration_s)
        stats.steps, stats.samples, stats.wall_s = i, i * samples_per_request, t1 - t_start
        if t1 - t_last >= 0.5 or done:
            win = t1 - t_last
            n = (i - n_last) * samples_per_request
            rate = n / win if win > 0 else 0.0
            stats.window_rates.append(rate)
            if emit is not None and make_progress is not None:
                emit(make_progress(step=i, of=steps, elapsed_s=t1 - t_start,
                                   duration_s=duration_s, throughput=rate, unit=unit,
                                   window_s=win, samples=n, total_samples=stats.samples))
            t_last, n_last = t1, i
        if done:
            stats.stopped_early = stop_now and not reached
            return stats


class PhaseTimer:
    """Per-phase split for one instrumented step: sync, then host clock, at each boundary.

    Used only in a separate short pass after the timed loop: the syncs would slow the main
    loop and hide overlap between phases.
    """

    def __init__(self, device: torch.device) -> None:
        self.device = device
        self.totals: dict[str, list[float]] = {}
        self._t = 0.0
        self._name: str | None = None

    def start(self, name: str) -> None:
        sync(self.device)
        now = time.perf_counter()
        if self._name is not None:
            self.totals.setdefault(self._name, []).append((now - self._t) * 1000.0)
        self._name = name
        self._t = now

    def stop(self) -> None:
        sync(self.device)
        now = time.perf_counter()
        if self._name is not None:
            self.totals.setdefault(self._name, []).append((now - self._t) * 1000.0)
        self._name = None

    def medians(self) -> dict[str, float]:
        return {k: percentile(v, 50) or 0.0 for k, v in self.totals.items()}
