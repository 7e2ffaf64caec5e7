"""What a throttle cost a training job: the job_slowdown alert.

Fed every snapshot in order (live or replayed, by the AlertEngine), it follows each
job's throughput (gputui.telemetry.jobs: samples/s over the last few seconds of steps)
against the job's own median over the BASELINE_S before — or over all its history
while it is younger than that, once it has MIN_HISTORY_S of it. While a job runs
SLOWDOWN_PCT or more below that median, on readings that span several of its steps:

- if a GPU it runs on throttles for a throttling reason (now or within the rate's
  window, which lags the GPU by up to WINDOW_S), is stale or is lost, a job_slowdown
  alert is raised for that GPU (one per job and GPU), carrying the figures in `values`
  (pid, job, gpu, throughput_change_pct, reasons); it ends when the job runs within
  RECOVER_PCT of its median again (or exits), with duration_s and samples_lost: the
  median rate over the episode minus what the job did in it;
- otherwise the job is only marked slowed (JobState, for the TUI: "its GPUs were not
  throttled: input pipeline?"), and nothing is sent.

The median is frozen while a job is slowed, so a long slowdown does not become the
job's new normal. No textual here.
"""

from __future__ import annotations

import statistics
from collections import deque
from dataclasses import dataclass, field, replace
from datetime import datetime
from types import MappingProxyType
from typing import Literal

from gputui.safe_text import printable
from gputui.telemetry.alert import Alert
from gputui.telemetry.jobs import WINDOW_S
from gputui.telemetry.model import GpuSample, JobReading, Snapshot
from gputui.telemetry.throttle import (
    THROTTLE_MASK,
    is_throttling,
    mask_from_keys,
    reason_keys,
    throttle_words,
)
from gputui.telemetry.units import fmt_duration

SLOWDOWN_PCT = 15.0  # raise at this drop or more
RECOVER_PCT = 10.0  # ends once the job is back within this of its median
BASELINE_S = 180.0  # "the minutes before"
MIN_HISTORY_S = 5.0
MIN_STEPS = 3  # a slowdown holds over at least this many of the job's steps
MAX_LOG = 200  # job_slowdown episodes kept for the alerts screen
MAX_READINGS = 4096  # per job: BASELINE_S at the shortest interval (0.1 s) and then some
SLOWED_WORDS = "job slowed; its GPUs were not throttled: input pipeline?"

JobStatus = Literal["learning", "ok", "slowed", "slowdown"]


@dataclass(frozen=True, slots=True)
class JobState:
    """How a job is doing against its own median, for a view."""

    pid: int
    status: JobStatus
    change_pct: float | None = None  # throughput now vs its median, in %
    baseline: float | None = None  # the median (samples/s, or tokens/s, or steps/s)
    gpus: tuple[int, ...] = ()  # the GPUs a job_slowdown names
    words: str = ""


@dataclass
class _Slowed:
    """A job's confirmed slowdown: when it started and how deep it went."""

    since_mono: float
    since: datetime
    baseline: float
    total_at_start: float
    worst_pct: float
    alerts: dict[int, Alert] = field(default_factory=dict)  # GPU → its job_slowdown


@dataclass
class _Job:
    """One job's recent throughput and its slowdown state."""

    readings: deque[tuple[float, float]] = field(
        default_factory=lambda: deque(maxlen=MAX_READINGS))  # (mono, throughput)
    first_mono: float | None = None
    slow_since: float | None = None  # first reading of a drop not yet confirmed
    slowed: _Slowed | None = None
    state: JobState | None = None


def _slowdown_words(alerts: dict[int, Alert]) -> str:
    """"job slowed while GPU 0 throttled, GPU 2 lost"."""
    parts = []
    for idx, a in alerts.items():
        reasons = (a.values or {}).get("reasons")
        state = reasons[0] if reasons in (("lost",), ("stale",)) else "throttled"
        parts.append(f"GPU {idx} {state}")
    return "job slowed while " + ", ".join(parts)


def _unit(j: JobReading) -> str:
    if j.samples_per_s is not None:
        return "samples"
    return "tokens" if j.tokens_per_s is not None else "steps"


class JobSlowdowns:
    """Not thread-safe: the AlertEngine's thread calls it."""

    def __init__(self) -> None:
        self._jobs: dict[int, _Job] = {}
        self._throttled_at: dict[int, tuple[float, int]] = {}  # GPU → (mono, mask)
        # Every job_slowdown as it stands now (ongoing or ended), oldest first, bounded.
        self._log: dict[tuple[str, datetime], Alert] = {}

    def reset(self) -> None:
        self._jobs.clear()
        self._throttled_at.clear()
        self._log.clear()

    def log(self) -> tuple[Alert, ...]:
        """The job_slowdown episodes, ongoing and ended, oldest first (bounded)."""
        return tuple(self._log.values())

    def states(self) -> tuple[JobState, ...]:
        return tuple(j.state for _pid, j in sorted(self._jobs.items()) if j.state is not None)

    def update(self, snap: Snapshot) -> list[Alert]:
        """Apply one snapshot; returns the job_slowdown alerts raised, changed or ended
        on it (`active` False: ended)."""
        now = snap.mono
        gpus = {g.index: g for g in snap.gpus}
        for g in snap.gpus:
            if not g.lost and not g.stale and is_throttling(g.throttle_mask):
                self._throttled_at[g.index] = (now, g.throttle_mask or 0)
        out: list[Alert] = []
        seen = set()
        for reading in snap.jobs:
            seen.add(reading.pid)
            job = self._jobs.setdefault(reading.pid, _Job())
            self._job(job, reading, snap, gpus, out)
        for pid in [p for p in self._jobs if p not in seen]:  # exited
            job = self._jobs.pop(pid)
            if job.slowed is not None:
                out.extend(self._end(job.slowed, snap, None, "the job exited"))
        for a in out:
            self._log[(a.key, a.since)] = a
        while len(self._log) > MAX_LOG:
            del self._log[next(iter(self._log))]
        return out

    # --- one job -------------------------------------------------------------------------

    def _baseline(self, job: _Job, now: float) -> float | None:
        if job.first_mono is None or now - job.first_mono < MIN_HISTORY_S:
            return None
        while job.readings and job.readings[0][0] < now - BASELINE_S:
            job.readings.popleft()
        if len(job.readings) < 3:
            return None
        return statistics.median(r for _t, r in job.readings)

    def _job(self, job: _Job, j: JobReading, snap: Snapshot, gpus: dict[int, GpuSample],
             out: list[Alert]) -> None:
        now = snap.mono
        rate = j.throughput
        if rate is None:
            job.state = JobState(j.pid, "learning")
            return
        if job.first_mono is None:
            job.first_mono = now
        slowed = job.slowed
        baseline = slowed.baseline if slowed is not None else self._baseline(job, now)
        if baseline is None or baseline <= 0:
            job.readings.append((now, rate))
            job.state = JobState(j.pid, "learning")
            return
        change = 100.0 * (rate - baseline) / baseline
        if slowed is None:
            if change > -SLOWDOWN_PCT:
                job.slow_since = None
                job.readings.append((now, rate))
                job.state = JobState(j.pid, "ok", change, baseline)
                return
            if job.slow_since is None:
                job.slow_since = now
            several = MIN_STEPS * (j.step_time_s or 0.0)
            if job.slow_since == now or now - job.slow_since < several:
                # Not yet confirmed: neither normal (kept out of the median) nor slowed.
                job.state = JobState(j.pid, "ok", change, baseline)
                return
            slowed = job.slowed = _Slowed(now, snap.time, baseline, j.throughput_total, change)
        elif change > -RECOVER_PCT:
            out.extend(self._end(slowed, snap, j, "recovered"))
            job.slowed = None
            job.slow_since = None
            job.readings.append((now, rate))
            job.state = JobState(j.pid, "ok", change, baseline)
            return
        slowed.worst_pct = min(slowed.worst_pct, change)
        for idx, reasons in self._culprits(j, gpus, now).items():
            prev = slowed.alerts.get(idx)
            alert = self._alert(j, idx, reasons, change, rate, baseline,
                                prev.since if prev else snap.time)
            slowed.alerts[idx] = alert
            out.append(alert)
        if slowed.alerts:
            job.state = JobState(j.pid, "slowdown", change, baseline, tuple(slowed.alerts),
                                 _slowdown_words(slowed.alerts))
        else:
            job.state = JobState(j.pid, "slowed", change, baseline, (), SLOWED_WORDS)

    def _culprits(self, j: JobReading, gpus: dict[int, GpuSample], now: float
                  ) -> dict[int, tuple[str, ...]]:
        """The job's GPUs that can explain its slowdown, with their reasons."""
        out: dict[int, tuple[str, ...]] = {}
        for idx in j.gpus:
            g = gpus.get(idx)
            if g is not None and g.lost:
                out[idx] = ("lost",)
            elif g is not None and g.stale:
                out[idx] = ("stale",)
            else:
                at = self._throttled_at.get(idx)
                if at is not None and now - at[0] <= WINDOW_S:
                    out[idx] = tuple(reason_keys(at[1] & THROTTLE_MASK))
        return out

    @staticmethod
    def _alert(j: JobReading, gpu: int, reasons: tuple[str, ...], change: float, rate: float,
               baseline: float, since: datetime) -> Alert:
        unit = _unit(j)
        if reasons in (("lost",), ("stale",)):
            why = "is lost" if reasons == ("lost",) else "is not answering (stale)"
        else:
            why = f"throttles ({throttle_words(mask_from_keys(list(reasons)))})"
        message = (f"GPU {gpu}: job {printable(j.name)} (PID {j.pid}) runs {-change:.0f} % slower "
                   f"({rate:,.0f} vs {baseline:,.0f} {unit}/s) while the GPU {why}")
        values = MappingProxyType({
            "pid": j.pid, "job": j.name, "gpu": gpu,
            "throughput_change_pct": round(change, 1), "reasons": reasons,
            "throughput_per_s": round(rate, 3), "baseline_per_s": round(baseline, 3),
            "unit": unit})
        return Alert(f"job_slowdown:{gpu}:{j.pid}", gpu, "job_slowdown", "warning", message,
                     since, reasons=reasons, values=values)

    @staticmethod
    def _end(slowed: _Slowed, snap: Snapshot, j: JobReading | None, how: str) -> list[Alert]:
        """The ended alerts: how long, and what the slowdown cost (estimated)."""
        if not slowed.alerts:
            return []
        duration = max(0.0, snap.mono - slowed.since_mono)
        lost = None
        if j is not None:
            done = j.throughput_total - slowed.total_at_start
            lost = max(0.0, slowed.baseline * duration - done)
        out = []
        for a in slowed.alerts.values():
            values = dict(a.values or {})
            values.update(duration_s=round(duration, 1), worst_change_pct=round(
                slowed.worst_pct, 1), samples_lost=None if lost is None else round(lost),
                ended=how)
            cost = "" if lost is None else f"; about {lost:,.0f} {values['unit']} lost"
            message = (f"{a.message.split(' runs ')[0]}: slowdown over after "
                       f"{fmt_duration(duration)} ({how}){cost}")
            out.append(replace(a, active=False, until=snap.time, message=message,
                               values=MappingProxyType(values)))
        return out
