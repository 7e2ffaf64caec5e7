"""Energy per process, per GPU and per training job: computed here, once per tick, on the
sampler's side; every view shows these figures as they are.

NVML and amdgpu give only a whole GPU's energy. Each tick, a GPU's energy since the last
tick is the difference of its energy counter, or where it has none (or it is not read)
its power integrated over the tick (trapezoid). That energy is split:

- idle: up to the idle figure × the tick's length — the configured idle draw
  (config.toml `[energy] idle_w`), else the lowest draw seen on that GPU while no compute
  process ran (unknown until such a tick: then nothing is idle); active: the rest.
- A GPU with one compute process: all of it (idle and active) is that process's,
  `exclusive` — exact unless another (graphics) process is on the GPU too.
- Several: the active part by each one's SM-utilisation share (`sm_share`; a process
  with no sample from the driver in its window ran nothing there and gets none), or
  equally where no process has a sample or all read 0 % (`equal_split`); both are
  estimates. The idle part stays the GPU's (`energy_unattributed_j`).
- No compute process: all of it is the GPU's own (`energy_unattributed_j`).

A tick's energy goes to the processes listed at that tick (the lists are read every few
ticks): a process that starts or ends between two lists is counted from the first list
that shows it, until the first that does not.

So on each GPU, the processes' energy (those that ended included) plus
`energy_unattributed_j` is always `energy_seen_j`. A process's figures run from when
gputui first saw it on that GPU; a job's are its process's, over all its GPUs: exact while
each GPU it ran on was exclusively its own, else an estimate. Its W is averaged over the
same window as its rates (gputui.telemetry.jobs.WINDOW_S), and J/step = W × its median
step time, J/sample = W ÷ samples/s, J/token = W ÷ tokens/s.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from gputui.telemetry.jobs import WINDOW_S
from gputui.telemetry.model import GpuEnergy, GpuProcess, GpuSample, JobReading
from gputui.telemetry.units import fmt_j, fmt_j_per

EXCLUSIVE, SM_SHARE, EQUAL_SPLIT = "exclusive", "sm_share", "equal_split"
METHODS = (EXCLUSIVE, SM_SHARE, EQUAL_SPLIT)


@dataclass(frozen=True, slots=True)
class Attributed:
    """One tick's figures with the energy shares filled in."""

    processes: tuple[GpuProcess, ...]
    jobs: tuple[JobReading, ...]
    jobs_ended: tuple[JobReading, ...] = ()
    gpu_energy: tuple[GpuEnergy, ...] = ()


@dataclass
class _Gpu:
    uuid: str
    mono: float | None = None  # when the last reading was taken (None: no reading yet)
    counter_j: float | None = None
    power_w: float | None = None
    seen_j: float = 0.0
    idle_j: float = 0.0
    unattributed_j: float = 0.0
    lowest_idle_w: float | None = None


@dataclass
class _Proc:
    started: float | None
    energy_j: float = 0.0
    power_w: float | None = None
    method: str | None = None
    estimate: bool = False


@dataclass
class _Job:
    energy_j: float = 0.0
    by_gpu: dict[int, float] = field(default_factory=dict)
    estimate: bool = False
    reached: bool = False  # some GPU energy was attributed to it
    history: deque[tuple[float, float]] = field(default_factory=deque)  # (mono, energy_j)
    last: JobReading | None = None


def shares(procs: Sequence[GpuProcess]) -> tuple[list[float], str]:
    """How the active energy of a GPU is split between its compute processes: fractions
    in the processes' order, and the method."""
    if len(procs) == 1:
        return [1.0], EXCLUSIVE
    sm = [p.sm_util_pct or 0 for p in procs]
    total = sum(sm)
    if total <= 0:
        return [1.0 / len(procs)] * len(procs), EQUAL_SPLIT
    return [v / total for v in sm], SM_SHARE


def _is_compute(p: GpuProcess) -> bool:
    return "compute" in p.kind


class EnergyAccounts:
    """Each GPU's, process's and job's energy since gputui first saw it. `update` once per
    tick, from one thread (the sampler's)."""

    def __init__(self, idle_w: float | None = None, window_s: float = WINDOW_S) -> None:
        self.idle_w = idle_w
        self.window_s = window_s
        self._gpus: dict[int, _Gpu] = {}
        self._procs: dict[tuple[int, int], _Proc] = {}
        self._jobs: dict[int, _Job] = {}

    def update(self, gpus: Sequence[GpuSample], procs: Sequence[GpuProcess],
               jobs: Sequence[JobReading], mono: float) -> Attributed:
        by_gpu: dict[int, list[GpuProcess]] = {}
        for p in procs:
            by_gpu.setdefault(p.gpu_index, []).append(p)
        given: dict[int, list[tuple[int, float, bool]]] = {}  # pid → (GPU, J, estimate)
        out_gpus = tuple(e for g in gpus
                         if (e := self._gpu(g, by_gpu.get(g.index, []), mono, given)))
        live = {(p.gpu_index, p.pid) for p in procs}
        for key in [k for k in self._procs if k not in live]:
            del self._procs[key]  # ended: its energy stays in its GPU's and job's totals
        out_procs = tuple(self._proc(p) for p in procs)
        out_jobs = tuple(self._job(j, given.get(j.pid, ()), mono) for j in jobs)
        seen = {j.pid for j in jobs}
        ended = []
        for pid in [pid for pid in self._jobs if pid not in seen]:
            last = self._jobs.pop(pid).last
            if last is not None:
                ended.append(last)
        return Attributed(out_procs, out_jobs, tuple(ended), out_gpus)

    # --- one GPU -------------------------------------------------------------------------

    def _gpu(self, g: GpuSample, on_gpu: list[GpuProcess], mono: float,
             given: dict[int, list[tuple[int, float, bool]]]) -> GpuEnergy | None:
        acc = self._gpus.get(g.index)
        if acc is None or acc.uuid != g.info.uuid:
            acc = self._gpus[g.index] = _Gpu(g.info.uuid)
            for key in [k for k in self._procs if k[0] == g.index]:
                del self._procs[key]
        if g.stale:
            return self._figures(g, acc)  # an old reading: nothing new to share out
        if g.lost or (g.power_w is None and g.energy_j is None):
            acc.mono = acc.counter_j = acc.power_w = None  # start again when it reads
            return self._figures(g, acc)
        joules = self._energy_since(acc, g, mono)
        dt = None if acc.mono is None else mono - acc.mono
        acc.mono, acc.counter_j, acc.power_w = mono, g.energy_j, g.power_w
        compute = [p for p in on_gpu if _is_compute(p)]
        if not compute:
            drew = g.power_w if g.power_w is not None else (
                joules / dt if joules is not None and dt else None)
            if drew is not None and (acc.lowest_idle_w is None or drew < acc.lowest_idle_w):
                acc.lowest_idle_w = drew
        if joules is None or not dt or dt <= 0:
            for p in compute:
                self._account(p)  # seen from now on; its figures start at 0 J
            return self._figures(g, acc)
        idle_w = self.idle_figure(acc)
        idle_j = min(joules, idle_w * dt) if idle_w is not None else 0.0
        acc.seen_j += joules
        acc.idle_j += idle_j
        if not compute:
            acc.unattributed_j += joules
            return self._figures(g, acc)
        fractions, method = shares(compute)
        if method == EXCLUSIVE:
            to_share, estimate = joules, len(on_gpu) > 1
        else:
            to_share, estimate = joules - idle_j, True
            acc.unattributed_j += idle_j
        for p, frac in zip(compute, fractions, strict=True):
            mine = to_share * frac
            a = self._account(p)
            a.energy_j += mine
            a.power_w = mine / dt
            a.method = method
            a.estimate = a.estimate or estimate
            given.setdefault(p.pid, []).append((p.gpu_index, mine, estimate))
        return self._figures(g, acc)

    @staticmethod
    def _energy_since(acc: _Gpu, g: GpuSample, mono: float) -> float | None:
        """J since the GPU's last reading: the counter's difference, else power × time."""
        if acc.mono is None:
            return None
        if g.energy_j is not None and acc.counter_j is not None and g.energy_j >= acc.counter_j:
            return g.energy_j - acc.counter_j
        if g.power_w is None:
            return None
        before = acc.power_w if acc.power_w is not None else g.power_w
        return max(0.0, (before + g.power_w) / 2 * (mono - acc.mono))

    def idle_figure(self, acc: _Gpu) -> float | None:
        return self.idle_w if self.idle_w is not None else acc.lowest_idle_w

    def _figures(self, g: GpuSample, acc: _Gpu) -> GpuEnergy | None:
        if acc.mono is None and not acc.seen_j:
            return None  # never read: no figures (not 0 J)
        return GpuEnergy(g.index, acc.seen_j, acc.idle_j, acc.unattributed_j,
                         self.idle_figure(acc))

    # --- processes and jobs --------------------------------------------------------------

    def _account(self, p: GpuProcess) -> _Proc:
        key = (p.gpu_index, p.pid)
        a = self._procs.get(key)
        if a is None or (p.started is not None and a.started is not None
                         and p.started != a.started):  # a new process with a reused pid
            a = self._procs[key] = _Proc(p.started)
        return a

    def _proc(self, p: GpuProcess) -> GpuProcess:
        a = self._procs.get((p.gpu_index, p.pid))
        if a is None:
            return p
        return replace(p, power_w=a.power_w, energy_j=a.energy_j, energy_method=a.method,
                       energy_estimate=a.estimate if a.method is not None else None)

    def _job(self, j: JobReading, given: Sequence[tuple[int, float, bool]],
             mono: float) -> JobReading:
        acc = self._jobs.get(j.pid)
        if acc is None:
            acc = self._jobs[j.pid] = _Job()
        for gpu, joules, estimate in given:
            acc.energy_j += joules
            acc.by_gpu[gpu] = acc.by_gpu.get(gpu, 0.0) + joules
            acc.estimate = acc.estimate or estimate
            acc.reached = True
        if not acc.reached:
            acc.last = j
            return j
        h = acc.history
        h.append((mono, acc.energy_j))
        while len(h) > 2 and h[1][0] <= mono - self.window_s:
            h.popleft()  # the oldest kept is the window's anchor
        span = h[-1][0] - h[0][0]
        watts = (h[-1][1] - h[0][1]) / span if span > 0 else None
        acc.last = replace(
            j, energy_j=acc.energy_j, power_w=watts,
            energy_per_step_j=_times(watts, j.step_time_s),
            energy_per_sample_j=_per(watts, j.samples_per_s),
            energy_per_token_j=_per(watts, j.tokens_per_s),
            energy_estimate=acc.estimate,
            energy_by_gpu=tuple(sorted(acc.by_gpu.items())))
        return acc.last


def _times(watts: float | None, seconds: float | None) -> float | None:
    return None if watts is None or seconds is None else watts * seconds


def _per(watts: float | None, rate: float | None) -> float | None:
    return None if watts is None or not rate else watts / rate


def ended_line(j: JobReading) -> str:
    """A job's end-of-run line (the Jobs box and `watch` print it): "job train.py (PID
    5150) ended at step 1,234: 56.7kJ, 46 J/step, 0.36 J/sample (estimate)". The name
    is the job's own text: the caller escapes it for where it is shown."""
    words = f"job {j.name} (PID {j.pid}) ended at step {j.step:,}"
    if j.energy_j is None:
        return words + ": energy N/A (no GPU process seen)"
    figures = [fmt_j(j.energy_j)]
    for value, unit in ((j.energy_per_step_j, "step"), (j.energy_per_sample_j, "sample"),
                        (j.energy_per_token_j, "token")):
        if value is not None:
            figures.append(f"{fmt_j_per(value)}/{unit}")
    kind = "estimate" if j.energy_estimate else "exact"
    return f"{words}: {', '.join(figures)} ({kind})"
