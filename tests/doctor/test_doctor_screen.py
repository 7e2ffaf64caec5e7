"""The Doctor screen with Pilot: checks run off the event loop against the fake NVML
(in-process), the table fills in, details follow the cursor, GPU rows stay live."""

from __future__ import annotations

import threading
import time

from textual.app import App, ComposeResult
from textual.widgets import DataTable, ProgressBar, Static

from gputui.doctor.model import Report, Stage
from gputui.doctor.run import Options, StageProgress
from gputui.ui.messages import SnapshotShown
from gputui.ui.screens.doctor import DoctorScreen
from gputui.ui.widgets.gpu_row import GpuRow
from tests.fakenvml.harness import FakeNvml
from tests.ui.helpers import gpu, snap


class Host(App[None]):
    def __init__(self, screen: DoctorScreen) -> None:
        super().__init__()
        self.doctor = screen

    def compose(self) -> ComposeResult:
        yield Static("monitor")

    def on_mount(self) -> None:
        self.push_screen(self.doctor)


async def _until(pilot, cond, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, "timed out waiting for the doctor"
        await pilot.pause(0.05)


async def test_table_fills_and_verdict_matches_the_report(fake_nvml: FakeNvml) -> None:
    fake_nvml.use("doctor_faults")
    screen = DoctorScreen(options=Options(observe_s=0.0))
    app = Host(screen)
    async with app.run_test(size=(150, 45)) as pilot:
        await _until(pilot, lambda: screen.report is not None or screen.error is not None)
        await pilot.pause()
        assert screen.error is None
        report = screen.report
        table = screen.query_one("#doctor-table", DataTable)
        assert table.row_count == len(report.checks) == 69
        statuses = {(c.gpu, c.id): c.status.value for c in screen.checks}
        assert statuses[(0, "pcie_width")] == "fail"
        assert statuses[(1, "remapped_rows")] == "fail"
        assert statuses[(0, "xid")] == "pass"  # the fake's clock stays at 0 s: no XID 79
        verdict = str(screen.query_one("#doctor-verdict", Static).render())
        assert verdict == report.verdict(False)
        assert verdict.startswith("doctor: FAIL — 11 failed")
        for stage in (Stage.CONFIG, Stage.HEALTH, Stage.EVENTS):
            bar = screen.query_one(f"#stage-{stage.name.lower()}", ProgressBar)
            assert bar.percentage == 1.0
        assert not screen.query_one("#row-performance").display  # quick: no probes
        # Details follow the cursor: row 1 is GPU 0's pcie_width.
        table.move_cursor(row=1)
        await pilot.pause()
        detail = str(screen.query_one("#doctor-detail", Static).render())
        assert "GPU 0 · pcie_width: FAIL — measured x8, expected x16" in detail
        assert "why it matters: fewer lanes" in detail
        assert "\\n" not in detail and detail.count("\n") == 2  # three real lines


async def test_checks_run_off_the_event_loop_and_can_be_stopped() -> None:
    gate = threading.Event()
    seen: dict[str, object] = {}

    def slow_runner(options, *, on_check, on_stage, cancel):
        seen["thread"] = threading.current_thread()
        on_stage(StageProgress(Stage.CONFIG, 0, 3))
        gate.wait(10)  # a hung NVML call, until the test lets it go
        cancel.wait(10)
        return Report(checks=(), interrupted=cancel.is_set())

    screen = DoctorScreen(runner=slow_runner, options=Options(observe_s=0.0))
    app = Host(screen)
    async with app.run_test(size=(150, 45)) as pilot:
        await _until(pilot, lambda: "thread" in seen)
        assert seen["thread"] is not threading.main_thread()
        # The UI still answers while the runner is blocked: live GPU rows update.
        screen.post_message(SnapshotShown(snap(1, [gpu(0, 1), gpu(1, 1)])))
        await pilot.pause()
        assert [r.info.index for r in screen.query(GpuRow)] == [0, 1]
        await pilot.press("x")
        gate.set()
        await _until(pilot, lambda: screen.report is not None)
        assert screen.report.interrupted
        assert "INTERRUPTED" in str(screen.query_one("#doctor-verdict", Static).render())


async def test_without_nvml_the_screen_says_why(no_nvml) -> None:
    screen = DoctorScreen(options=Options(observe_s=0.0))
    app = Host(screen)
    async with app.run_test(size=(150, 45)) as pilot:
        await _until(pilot, lambda: screen.error is not None)
        await pilot.pause()
        text = str(screen.query_one("#doctor-verdict", Static).render())
        assert text.startswith("doctor needs NVML or an AMD GPU: NVML library not found")


async def test_p_runs_again_with_the_probes() -> None:
    runs: list[bool] = []

    def runner(options, *, on_check, on_stage, cancel):
        runs.append(options.quick)
        on_stage(StageProgress(Stage.PERFORMANCE, 1, 2))
        return Report(checks=())

    screen = DoctorScreen(runner=runner, options=Options(observe_s=0.0))
    app = Host(screen)
    async with app.run_test(size=(150, 45)) as pilot:
        await _until(pilot, lambda: screen.report is not None)
        await pilot.press("p")
        await _until(pilot, lambda: len(runs) == 2 and not screen.running)
        await pilot.pause()
        assert runs == [True, False]
        bar = screen.query_one("#stage-performance", ProgressBar)
        assert bar.percentage == 0.5
