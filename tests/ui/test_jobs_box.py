"""The Jobs box, the job_slowdown toast and the job cost beside a throttle episode, from
hand-built frames; and a recording that carries jobs, replayed."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

from gputui.telemetry.model import JobReading, Snapshot
from gputui.telemetry.record import Recorder, load_recording
from gputui.telemetry.sampler import Sampler
from gputui.ui.app import GputuiApp
from gputui.ui.options import AppOptions
from gputui.ui.screens.alerts import AlertsScreen
from gputui.ui.widgets.jobs_box import JobsBox
from tests.ui.helpers import T0, gpu, proc, screen_text, snap, spy_notifications

PID = 5150


def job(t: int, rate: float, pid: int = PID, gpus: tuple[int, ...] = (0,),
        name: str = "train_gpt.py", tokens: bool = True) -> JobReading:
    return JobReading(pid=pid, name=name, gpus=gpus, step=10 * t, samples=int(rate * t),
                      tokens=int(rate * t * 512) if tokens else 0, samples_per_s=rate,
                      tokens_per_s=rate * 512 if tokens else None, step_time_s=32 / rate,
                      updated=T0 + timedelta(seconds=t))


def frame_at(t: int, *, throttle_from: int = 10**9, slow_from: int = 10**9,
             second_job: bool = False) -> Snapshot:
    hot = t >= throttle_from
    gpus = [gpu(0, t, throttle_mask=0x40 if hot else 0, clock_sm_mhz=945 if hot else 1980),
            gpu(1, t)]
    jobs = [job(t, 160.0 if t >= slow_from else 320.0)]
    if second_job:
        jobs.append(job(t, 50.0, pid=6160, gpus=(1,), name="data-bound.py", tokens=False))
    return snap(t, gpus, [proc(PID, 0, 30)], jobs=tuple(jobs))


def make_app() -> tuple[GputuiApp, Sampler]:
    sampler = Sampler(interval=1.0, nvml=None)
    return GputuiApp(AppOptions(), sampler=sampler), sampler


async def test_no_jobs_no_box() -> None:
    app, sampler = make_app()
    async with app.run_test(size=(140, 44)) as pilot:
        sampler.ingest(snap(0, [gpu(0), gpu(1)]))
        await pilot.pause()
        assert not app.query_one(JobsBox).display
        assert "SAMPLES/S" not in screen_text(app)


async def test_jobs_show_their_gpus_rates_and_step_time() -> None:
    app, sampler = make_app()
    async with app.run_test(size=(160, 48)) as pilot:
        for t in range(12):
            sampler.ingest(frame_at(t, second_job=True))
        await pilot.pause()
        text = screen_text(app)
        assert "Jobs" in text and "STEP p50" in text
        row = next(line for line in text.splitlines() if "train_gpt.py" in line)
        assert "5150" in row and "320.0" not in row and "320" in row
        assert "163,840" in row  # tokens/s
        assert "100 ms" in row and "ok +0 %" in row
        other = next(line for line in text.splitlines() if "data-bound.py" in line)
        assert "6160" in other and "50.0" in other and "N/A" in other  # no tokens reported


async def test_a_throttle_that_slows_a_job_toasts_and_marks_it() -> None:
    app, sampler = make_app()
    seen = spy_notifications(app)
    async with app.run_test(size=(160, 48)) as pilot:
        for t in range(30):
            sampler.ingest(frame_at(t, throttle_from=12, slow_from=12))
        await pilot.pause()
        text = screen_text(app)
        row = next(line for line in text.splitlines() if "train_gpt.py" in line)
        assert "⚠ -50 %" in row and "GPU 0 throttled" in row
        toasts = [m for _s, m in seen if "train_gpt.py" in m]
        assert len(toasts) == 1 and "runs 50 % slower" in toasts[0]
        # The alerts screen: the alert is active, and the episode shows what it costs.
        await pilot.press("a")
        await pilot.pause()
        assert isinstance(app.screen, AlertsScreen)
        text = screen_text(app)
        assert "job_slowdown" in text and "train_gpt.py -50 % (ongoing)" in text
        await pilot.press("escape")
        # Both end: the episode keeps the job's cost.
        for t in range(30, 50):
            sampler.ingest(frame_at(t))
        await pilot.press("a")
        await pilot.pause()
        text = screen_text(app)
        assert "samples lost" in text and "(ongoing)" not in text


async def test_a_job_slowed_on_calm_gpus_is_said_so_without_a_toast() -> None:
    app, sampler = make_app()
    seen = spy_notifications(app)
    async with app.run_test(size=(180, 48)) as pilot:
        for t in range(30):
            sampler.ingest(frame_at(t, slow_from=12))
        await pilot.pause()
        text = screen_text(app)
        assert "job slowed; its GPUs were not throttled: input pipeline?" in text
        assert not [m for _s, m in seen if "train_gpt.py" in m]


async def test_a_recording_carries_the_jobs_and_replay_shows_them(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    rec = Recorder(path, interval=1.0)
    for t in range(10):
        rec.write(frame_at(t))
    rec.close()
    lines = path.read_text().splitlines()
    assert json.loads(lines[-1])["jobs"][0]["name"] == "train_gpt.py"
    recording = load_recording(path)
    assert recording.snapshots[-1].jobs == frame_at(9).jobs
    app = GputuiApp(AppOptions(replay=recording, replay_speed=1.0))
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.press("end")
        await pilot.pause()
        text = screen_text(app)
        assert "train_gpt.py" in text and "5150" in text and "SAMPLES/S" in text


async def test_at_80_columns_the_pid_and_status_still_fit() -> None:
    app, sampler = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        for t in range(30):
            sampler.ingest(frame_at(t, throttle_from=12, slow_from=12))
        await pilot.pause()
        row = next(line for line in screen_text(app).splitlines() if "train_gpt.py" in line)
        assert "5150" in row and "⚠ -50 %" in row and "160" in row


def with_energy(j: JobReading, *, estimate: bool) -> JobReading:
    from dataclasses import replace

    return replace(j, energy_j=12_345.0, power_w=250.0, energy_per_step_j=25.0,
                   energy_per_sample_j=0.78125, energy_per_token_j=0.0015,
                   energy_estimate=estimate)


async def test_jobs_show_their_energy_and_an_ended_job_stays_with_its_totals() -> None:
    app, sampler = make_app()
    exact = with_energy(job(5, 320.0), estimate=False)
    shared = with_energy(job(5, 50.0, pid=6160, gpus=(1,), name="data-bound.py"),
                         estimate=True)
    async with app.run_test(size=(200, 48)) as pilot:
        sampler.ingest(snap(5, [gpu(0), gpu(1)], [proc(PID, 0, 30)], jobs=(exact, shared)))
        await pilot.pause()
        text = screen_text(app)
        for label in ("POWER", "ENERGY", "J/STEP", "J/SAMPLE", "J/TOKEN"):
            assert label in text
        row = next(line for line in text.splitlines() if "train_gpt.py" in line)
        assert "250W" in row and "12.3kJ" in row and "25 J" in row and "0.781 J" in row
        assert "1.5 mJ" in row and "~" not in row  # its GPU was its own: exact
        other = next(line for line in text.splitlines() if "data-bound.py" in line)
        assert "~250W" in other and "~25 J" in other  # a shared GPU: an estimate
        # The job ends: its row stays, dimmed, with its totals, for a while.
        sampler.ingest(snap(6, [gpu(0), gpu(1)], [], jobs=(shared,), jobs_ended=(exact,)))
        await pilot.pause()
        row = next(line for line in screen_text(app).splitlines() if "train_gpt.py" in line)
        assert "ended at step 50" in row and "12.3kJ" in row
        sampler.ingest(snap(6 + 121, [gpu(0), gpu(1)], [], jobs=(shared,)))
        await pilot.pause()
        assert "train_gpt.py" not in screen_text(app)


async def test_a_narrow_box_keeps_power_and_joules_per_step() -> None:
    app, sampler = make_app()
    async with app.run_test(size=(100, 40)) as pilot:
        sampler.ingest(snap(5, [gpu(0)], [], jobs=(with_energy(job(5, 320.0), estimate=False),)))
        await pilot.pause()
        text = screen_text(app)
        assert "POWER" in text and "J/STEP" in text and "J/TOKEN" not in text


async def test_the_box_grows_and_shrinks_with_its_jobs() -> None:
    """Figures moving keep the box's height (no layout pass each tick); a job coming or
    going changes it, and every row is shown."""
    app, sampler = make_app()
    async with app.run_test(size=(160, 48)) as pilot:
        for t in range(3):
            sampler.ingest(frame_at(t))
            await pilot.pause()
        box = app.query_one(JobsBox)
        one = box.size.height
        assert "train_gpt.py" in screen_text(app)
        for t in range(3, 6):
            sampler.ingest(frame_at(t, second_job=True))
            await pilot.pause()
        assert box.size.height == one + 1
        text = screen_text(app)
        assert "train_gpt.py" in text and "data-bound.py" in text
        # The second job is no longer reported: its row goes, and the box shrinks.
        sampler.ingest(frame_at(6))
        await pilot.pause()
        assert box.size.height == one and "data-bound.py" not in screen_text(app)
