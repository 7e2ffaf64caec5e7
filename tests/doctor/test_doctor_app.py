"""The Doctor screen inside the monitor: key `d`, the command palette, GPU rows kept
live from the monitor's frames while the checks run."""

from __future__ import annotations

import time

from gputui.telemetry.model import Snapshot
from gputui.ui.screens.doctor import DoctorScreen
from gputui.ui.widgets.gpu_row import GpuRow
from tests.fakenvml.harness import FakeNvml
from tests.ui.helpers import feed, gpu, make_app, screen_text, snap, throttled


def healthy(t: int) -> Snapshot:
    return snap(t, [gpu(0, t), gpu(1, t)])


def hot(t: int) -> Snapshot:
    return snap(t, [gpu(0, t), throttled(1, t)])


async def test_d_opens_doctor_with_live_gpu_rows_and_goes_back(fake_nvml: FakeNvml) -> None:
    fake_nvml.use("doctor_clean")
    app, sampler = make_app()
    async with app.run_test(size=(160, 45)) as pilot:
        feed(sampler, 0, 2, healthy)
        await pilot.pause()
        await pilot.press("d")
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, DoctorScreen)
        # The rows show the monitor's last frame at once, and follow new frames.
        assert [r.info.index for r in screen.query(GpuRow)] == [0, 1]
        feed(sampler, 2, 4, hot)
        await pilot.pause()
        assert "HW thermal" in screen_text(app)
        deadline = time.monotonic() + 30
        while screen.report is None and screen.error is None:
            assert time.monotonic() < deadline
            await pilot.pause(0.1)
        await pilot.pause()
        assert screen.error is None
        assert screen.report.verdict(False) == (
            "doctor: PASS — 0 failed, 0 warnings, 35 passed, 0 skipped on 2 GPUs")
        assert "doctor: PASS" in screen_text(app)
        await pilot.press("escape")
        await pilot.pause()
        assert not isinstance(app.screen, DoctorScreen)


async def test_doctor_is_in_the_command_palette() -> None:
    app, sampler = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        feed(sampler, 0, 1, healthy)
        await pilot.pause()
        titles = [c.title for c in app.get_system_commands(app.screen)]
        assert "Doctor" in titles
