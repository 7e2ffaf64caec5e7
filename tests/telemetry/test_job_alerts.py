"""job_slowdown: what a throttle cost a training job, from hand-built snapshots."""

from __future__ import annotations

from gputui.telemetry.alerts import Alert, AlertEngine
from gputui.telemetry.job_alerts import SLOWED_WORDS
from gputui.telemetry.model import GpuSample, JobReading, Snapshot
from tests.factories import gpu, snapshot

PID = 4242
BATCH = 32


class Job:
    """A job's readings tick by tick: its rate (samples/s) each second, counted up."""

    def __init__(self, pid: int = PID, gpus: tuple[int, ...] = (0,)) -> None:
        self.pid = pid
        self.gpus = gpus
        self.samples = 0.0
        self.step = 0

    def reading(self, rate: float) -> JobReading:
        self.samples += rate
        self.step += round(rate / BATCH)
        return JobReading(pid=self.pid, name="train.py", gpus=self.gpus, step=self.step,
                          samples=int(self.samples), tokens=0, samples_per_s=rate,
                          tokens_per_s=None, step_time_s=BATCH / rate if rate else None,
                          updated=None)


def run(engine: AlertEngine, ticks: range, gpus: callable, jobs: callable  # type: ignore[valid-type]
        ) -> tuple[list[Alert], list[Alert], list[Snapshot]]:
    raised: list[Alert] = []
    ended: list[Alert] = []
    snaps = []
    for t in ticks:
        s = snapshot(t, gpus(t), jobs=tuple(jobs(t)))
        raised += engine.update(s, {})
        ended += engine.last_cleared
        snaps.append(s)
    return raised, ended, snaps


def job_alerts(alerts: list[Alert]) -> list[Alert]:
    return [a for a in alerts if a.kind == "job_slowdown"]


def both_throttle_from(start: int, end: int) -> callable:  # type: ignore[valid-type]
    def gpus(t: int) -> list[GpuSample]:
        mask = 0x40 if start <= t < end else 0
        return [gpu(0, throttle_mask=mask), gpu(1, throttle_mask=mask)]
    return gpus


def test_a_job_slowed_by_its_throttling_gpu_raises_one_alert_and_ends_with_its_cost() -> None:
    engine = AlertEngine()
    job = Job(gpus=(0,))  # on GPU 0 only; GPU 1 throttles too
    rate = {t: 320.0 if t < 21 or t >= 40 else 160.0 for t in range(60)}
    raised, ended, _ = run(engine, range(60), both_throttle_from(20, 38),
                           lambda t: [job.reading(rate[t])])
    (alert,) = job_alerts(raised)
    assert alert.gpu_index == 0 and alert.severity == "warning"
    values = dict(alert.values or {})
    assert values["pid"] == PID and values["gpu"] == 0 and values["job"] == "train.py"
    assert values["throughput_change_pct"] == -50.0
    assert values["reasons"] == ("hw_thermal_slowdown",)
    assert "GPU 0: job train.py (PID 4242) runs 50 % slower" in alert.message
    assert "HW thermal slowdown" in alert.message
    # The throttle alerts of both GPUs are there as ever; only GPU 0 cost the job.
    assert {a.gpu_index for a in raised if a.kind == "throttle"} == {0, 1}
    (done,) = job_alerts(ended)
    assert done.key == alert.key and not done.active and done.until is not None
    v = dict(done.values or {})
    # Confirmed on its second slow reading (t=22), recovered at t=40: 18 s, of which the
    # seconds 23..39 ran at half pace (what ran before the confirmation is not counted).
    assert v["duration_s"] == 18.0
    assert v["samples_lost"] == 17 * 160
    assert "about 2,720 samples lost" in done.message
    assert engine.jobs.states()[0].status == "ok"


def test_a_job_slowed_while_its_gpus_are_calm_is_marked_slowed_and_sends_nothing() -> None:
    engine = AlertEngine()
    job = Job()
    raised, ended, _ = run(engine, range(40), lambda t: [gpu(0), gpu(1)],
                           lambda t: [job.reading(320.0 if t < 20 else 200.0)])
    assert job_alerts(raised) == [] and job_alerts(ended) == []
    (state,) = engine.jobs.states()
    assert state.status == "slowed" and state.words == SLOWED_WORDS
    assert round(state.change_pct or 0) == -38


def test_a_gpu_throttling_under_a_job_that_keeps_its_pace_sends_nothing() -> None:
    engine = AlertEngine()
    job = Job()
    raised, _, _ = run(engine, range(40), both_throttle_from(10, 30),
                       lambda t: [job.reading(320.0 - (t % 3))])
    assert job_alerts(raised) == []
    assert [a.kind for a in raised].count("throttle") == 2
    assert engine.jobs.states()[0].status == "ok"


def test_a_young_job_is_judged_from_five_seconds_of_history_on() -> None:
    young = AlertEngine()
    job = Job()
    # Slow from its third second, its GPU throttling: under 5 s of history, not judged.
    raised, _, _ = run(young, range(5), both_throttle_from(2, 5),
                       lambda t: [job.reading(320.0 if t < 2 else 100.0)])
    assert job_alerts(raised) == []
    older = AlertEngine()
    job = Job()
    raised, _, _ = run(older, range(12), both_throttle_from(7, 12),
                       lambda t: [job.reading(320.0 if t < 7 else 100.0)])
    assert len(job_alerts(raised)) == 1


def test_a_lost_gpu_under_a_slowed_job_is_its_cause() -> None:
    engine = AlertEngine()
    job = Job()

    def gpus(t: int) -> list[GpuSample]:
        if t >= 15:
            return [GpuSample(info=gpu(0).info, lost=True), gpu(1)]
        return [gpu(0), gpu(1)]

    raised, _, _ = run(engine, range(25), gpus,
                       lambda t: [job.reading(320.0 if t < 15 else 0.0)])
    (alert,) = job_alerts(raised)
    assert alert.values is not None and alert.values["reasons"] == ("lost",)
    assert "while the GPU is lost" in alert.message


def test_a_job_that_exits_while_slowed_ends_its_alert() -> None:
    engine = AlertEngine()
    job = Job()
    raised, ended, _ = run(engine, range(30), both_throttle_from(10, 30),
                           lambda t: [job.reading(320.0 if t < 11 else 100.0)] if t < 20 else [])
    assert len(job_alerts(raised)) == 1
    (done,) = job_alerts(ended)
    assert done.values is not None and done.values["ended"] == "the job exited"
    assert engine.jobs.states() == ()
