"""Behaviour of the live monitor, driven with Pilot and a sampler fed by hand."""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from textual.widgets import DataTable

from gputui.telemetry.model import Snapshot
from gputui.telemetry.record import Recording
from gputui.telemetry.sampler import Sampler
from gputui.ui.app import GputuiApp
from gputui.ui.options import AppOptions
from gputui.ui.screens.alerts import AlertsScreen
from gputui.ui.screens.confirm import ConfirmScreen
from gputui.ui.screens.help import HelpScreen
from gputui.ui.widgets.gpu_area import GpuArea
from gputui.ui.widgets.gpu_panel import GpuPanel
from gputui.ui.widgets.gpu_row import GpuRow
from gputui.ui.widgets.process_table import COLUMN_KEYS, ONLY_WHEN_KNOWN, ProcessTable
from tests.ui.helpers import (
    GIB,
    T0,
    feed,
    gpu,
    lost,
    make_app,
    proc,
    screen_text,
    snap,
    spy_notifications,
    throttled,
)


def two_gpus(t: int) -> Snapshot:
    return snap(t, [gpu(0, t), gpu(1, t)], [proc(4242, 0, 30), proc(4243, 1, 12)])


async def test_two_gpus_show_panels_header_host_and_processes() -> None:
    app, sampler = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        feed(sampler, 0, 5, two_gpus)
        await pilot.pause()
        text = screen_text(app)
        assert "GPU 0 · NVIDIA A100-SXM4-80GB" in text
        assert "GPU 1 · NVIDIA A100-SXM4-80GB" in text
        assert "00000000:3B:00.0" in text
        # Header: host, versions, the snapshot's own time (not now()), interval.
        assert "trainbox" in text and "driver 550.54.15" in text and "CUDA 12.4" in text
        assert "09:26:57" in text and "every 1s" in text
        assert "Host · trainbox" in text and "LOAD 3.10 2.75 2.50" in text
        assert "python train.py --run 4242" in text
        assert "✓ not throttled" in text
        assert not app.query_one(GpuArea).compact
        assert len(app.query(GpuPanel)) == 2


async def test_help_screen_and_quit() -> None:
    app, sampler = make_app()
    async with app.run_test(size=(100, 30)) as pilot:
        feed(sampler, 0, 1, two_gpus)
        await pilot.press("question_mark")
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)
        text = screen_text(app)
        for key in ("compact", "history window", "SIGTERM", "SIGKILL", "sort", "theme"):
            assert key.lower() in text.lower()
        await pilot.press("escape")
        assert not isinstance(app.screen, HelpScreen)
        await pilot.press("q")
        await pilot.pause()
    assert app.return_code == 0


async def test_ctrl_c_quits_as_in_top_and_nvitop() -> None:
    app, sampler = make_app()
    async with app.run_test(size=(100, 30)) as pilot:
        feed(sampler, 0, 1, two_gpus)
        await pilot.press("i")  # from any screen, not only the monitor
        await pilot.pause()
        await pilot.press("ctrl+c")
        await pilot.pause()
        assert not app.is_running
    assert app.return_code == 0


async def test_ctrl_c_in_a_text_field_keeps_its_editing_meaning() -> None:
    from textual.widgets import Input

    app, sampler = make_app()
    async with app.run_test(size=(100, 30)) as pilot:
        feed(sampler, 0, 1, two_gpus)
        field = Input("32")
        await app.screen.mount(field)
        field.focus()
        await pilot.pause()
        await pilot.press("ctrl+c")
        await pilot.pause()
        assert app.is_running and field.value == "32"
        app.exit()


async def test_sorting_by_key_and_by_clicking_a_header() -> None:
    app, sampler = make_app()
    procs = [proc(300, 0, 5, cpu_pct=10.0, user="carol"), proc(100, 1, 40, cpu_pct=50.0),
             proc(200, 0, 20, cpu_pct=None, user="bob")]
    async with app.run_test(size=(120, 40)) as pilot:
        sampler.ingest(snap(0, [gpu(0), gpu(1)], procs))
        await pilot.pause()
        table = app.query_one(ProcessTable)

        def pids() -> list[int]:
            return [int(str(table.get_row_at(i)[1].raw)) for i in range(table.row_count)]

        assert pids() == [100, 200, 300]  # default: GPU memory, biggest first
        await pilot.press("S")
        assert pids() == [300, 200, 100]
        await pilot.press("s", "s")  # s cycles the columns in order: gpu_mem → sm_util → …
        assert table.sort_column == "mem_util"
        table.set_sort("cpu")
        assert pids()[-1] == 200  # unknown CPU% sorts last, whichever the direction
        table.set_sort("cpu", reverse=False)
        assert pids() == [300, 100, 200]
        # Clicking the USER header sorts by user; clicking it again reverses.
        x = 1 + sum(c.get_render_width(table) for c in list(table.columns.values())[:2]) + 1
        await pilot.click(ProcessTable, offset=(x, 1))
        assert table.sort_column == "user"
        assert [table.get_row_at(i)[2].raw for i in range(3)] == ["alice", "bob", "carol"]
        await pilot.click(ProcessTable, offset=(x, 1))
        assert table.sort_reverse


async def test_selection_follows_the_process_when_rows_reorder() -> None:
    app, sampler = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        sampler.ingest(snap(0, [gpu(0)], [proc(1, 0, 5), proc(2, 0, 10)]))
        await pilot.pause()
        table = app.query_one(ProcessTable)
        await pilot.press("down")
        selected = table.selected_process()
        assert selected is not None and selected.pid == 1
        sampler.ingest(snap(1, [gpu(0)], [proc(1, 0, 50), proc(2, 0, 10), proc(3, 0, 1)]))
        await pilot.pause()
        assert table.cursor_row == 0  # pid 1 moved to the top; the cursor went with it
        selected = table.selected_process()
        assert selected is not None and selected.pid == 1


async def test_kill_flow_terminates_a_real_child_process() -> None:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        app, sampler = make_app()
        async with app.run_test(size=(120, 40)) as pilot:
            seen = spy_notifications(app)
            sampler.ingest(snap(0, [gpu(0)], [proc(child.pid, 0, 50, started=None)]))
            await pilot.pause()
            await pilot.press("k")
            await pilot.pause()
            assert isinstance(app.screen, ConfirmScreen)
            assert str(child.pid) in screen_text(app)
            await pilot.press("y")
            await pilot.pause()
            assert child.wait(timeout=20) == -signal.SIGTERM
            assert ("information", f"Sent SIGTERM to PID {child.pid}") in seen
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()


async def test_kill_cancelled_leaves_the_process_alone() -> None:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        app, sampler = make_app()
        async with app.run_test(size=(120, 40)) as pilot:
            sampler.ingest(snap(0, [gpu(0)], [proc(child.pid, 0, 50, started=None)]))
            await pilot.pause()
            await pilot.press("K")
            assert isinstance(app.screen, ConfirmScreen)
            await pilot.press("enter")  # the focused button is Cancel
            await pilot.pause()
            assert not isinstance(app.screen, ConfirmScreen)
            assert child.poll() is None
    finally:
        child.kill()
        child.wait()


async def test_kill_of_a_missing_pid_is_an_error_notification() -> None:
    app, sampler = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        seen = spy_notifications(app)
        sampler.ingest(snap(0, [gpu(0)], [proc(2**30 + 7, 0, 5)]))  # above any pid_max
        await pilot.pause()
        await pilot.press("k")
        await pilot.pause()
        assert not isinstance(app.screen, ConfirmScreen)
        assert any(sev == "error" and "no such process" in msg for sev, msg in seen)


async def test_theme_keys_env_and_unknown_theme(monkeypatch: pytest.MonkeyPatch) -> None:
    app, _ = make_app()
    async with app.run_test(size=(100, 30)) as pilot:
        assert app.theme == "gputui-dark"
        seen = []
        for _ in app.theme_names:
            await pilot.press("t")
            seen.append(app.theme)
        assert set(seen) == {"gputui-dark", "gputui-light", "gputui-high-contrast"}
        assert seen[-1] == "gputui-dark"  # the cycle wraps around

    monkeypatch.setenv("GPUTUI_THEME", "gputui-light")
    app, _ = make_app()
    async with app.run_test(size=(100, 30)):
        assert app.theme == "gputui-light"

    app, _ = make_app(theme="no-such-theme")  # --theme beats the environment
    seen = spy_notifications(app)
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.pause()
        assert app.theme == "gputui-dark"
        assert any(sev == "warning" and "no-such-theme" in msg for sev, msg in seen)


async def test_command_palette_offers_gputui_commands() -> None:
    app, _ = make_app()
    async with app.run_test(size=(100, 30)):
        titles = [c.title for c in app.get_system_commands(app.screen)]
        for title in ("Alerts", "Compact mode: toggle", "History window: 15 min",
                      "Theme: gputui-high-contrast", "Sort processes by PID"):
            assert title in titles


async def test_compact_at_80x24_and_toggle() -> None:
    app, sampler = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        feed(sampler, 0, 3, two_gpus)
        await pilot.pause()
        area = app.query_one(GpuArea)
        assert area.compact  # two full panels do not fit in 24 rows
        text = screen_text(app)
        assert " 0 A100-SXM4-80GB" in text and " 1 A100-SXM4-80GB" in text
        assert "Host · trainbox" in text and "Processes (2)" in text
        await pilot.press("c")
        assert not area.compact
        feed(sampler, 3, 4, two_gpus)
        await pilot.pause()
        assert "GPU 0 · NVIDIA" in screen_text(app)
        await pilot.press("c")  # back to what the size says: automatic again
        assert area.compact and app.screen.compact_override is None  # type: ignore[attr-defined]


async def test_eight_gpus_compact_then_grid_when_the_terminal_grows() -> None:
    app, sampler = make_app()

    def eight(t: int):
        return snap(t, [gpu(i, t) for i in range(8)])

    async with app.run_test(size=(120, 40)) as pilot:
        feed(sampler, 0, 3, eight)
        await pilot.pause()
        area = app.query_one(GpuArea)
        assert area.compact
        rows = screen_text(app).splitlines()
        assert sum(1 for r in rows if "A100-SXM4-80GB" in r) == 8
        await pilot.resize_terminal(250, 70)
        await pilot.pause()
        assert not area.compact and area.columns == 2
        feed(sampler, 3, 4, eight)
        await pilot.pause()
        text = screen_text(app)
        assert all(f"GPU {i} · NVIDIA" in text for i in range(8))
        panels = list(app.query(GpuPanel))
        assert panels[0].region.y == panels[1].region.y  # side by side
        await pilot.resize_terminal(80, 24)
        await pilot.pause()
        assert area.compact


async def test_gpu_lost_while_running_other_panel_keeps_updating() -> None:
    app, sampler = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        feed(sampler, 0, 3, two_gpus)
        await pilot.pause()
        sampler.ingest(snap(3, [gpu(0, 3, util_gpu_pct=11), lost(1)]))
        await pilot.pause()
        text = screen_text(app)
        assert "GPU is lost" in text
        assert app.query_one("#gpu-1", GpuPanel).has_class("-lost")
        assert not app.query_one("#gpu-0", GpuPanel).has_class("-lost")
        assert "11%" in text
        sampler.ingest(snap(4, [gpu(0, 4, util_gpu_pct=22), lost(1)]))
        await pilot.pause()
        text = screen_text(app)
        assert "22%" in text and "GPU is lost" in text
        # Compact mode says it too.
        await pilot.press("c")
        assert "✖ GPU is lost" in app.query_one("#row-1", GpuRow).render().plain


async def test_no_nvml_shows_host_only_with_the_reason() -> None:
    reason = "NVML library not found — is the NVIDIA driver installed?"
    sampler = Sampler(interval=1.0, nvml=None, nvml_error=reason)
    app, _ = make_app(sampler)
    async with app.run_test(size=(100, 30)) as pilot:
        sampler.ingest(snap(0, [], nvml_error=reason))
        await pilot.pause()
        text = screen_text(app)
        assert reason in text
        assert "Host · trainbox" in text and "CPU" in text and "RAM" in text
        assert not app.query_one(GpuArea).display
        assert not app.query_one(ProcessTable).display


async def test_throttle_raises_a_toast_and_shows_in_the_alerts_screen() -> None:
    app, sampler = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        seen = spy_notifications(app)
        feed(sampler, 0, 3, two_gpus)
        feed(sampler, 3, 8, lambda t: snap(t, [throttled(0, t), gpu(1, t)]))
        await pilot.pause()
        assert any(sev == "warning" and "HW thermal slowdown" in msg for sev, msg in seen)
        text = screen_text(app)
        assert "THROTTLED: HW thermal slowdown since 09:26:56 (4s)" in text
        assert "SM clock 1980→945 MHz, 88 °C ≥ slowdown 85 °C" in text
        assert app.query_one("#gpu-0", GpuPanel).has_class("-throttling")
        await pilot.press("a")
        await pilot.pause()
        assert isinstance(app.screen, AlertsScreen)
        text = screen_text(app)
        assert "HW thermal slowdown" in text and "ongoing" in text and "945 MHz" in text
        assert "88 °C" in text
        # The episode ends while the screen is open: it refreshes itself.
        feed(sampler, 8, 10, two_gpus)
        await pilot.pause()
        table = app.screen.query_one("#episodes", DataTable)
        assert "09:27:01" in str(table.get_row_at(0)[3])
        await pilot.press("escape")
        assert not isinstance(app.screen, AlertsScreen)


async def test_history_window_key_changes_the_sparklines() -> None:
    app, sampler = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        feed(sampler, 0, 120, two_gpus)  # two minutes of history
        await pilot.pause()
        panel = app.query_one("#gpu-0", GpuPanel)
        drawn_5min = panel.spark_rows_of("util_gpu_pct")[0].strip()
        assert app.screen.window_s == 300  # type: ignore[attr-defined]
        await pilot.press("w")  # 5 → 15 min
        assert app.screen.window_s == 900  # type: ignore[attr-defined]
        await pilot.press("w")  # 15 → 1 min
        await pilot.pause()
        assert app.screen.window_s == 60  # type: ignore[attr-defined]
        assert "history 1 min" in screen_text(app)
        drawn_1min = panel.spark_rows_of("util_gpu_pct")[0].strip()
        # One minute of a two-minute history fills the width; five minutes do not.
        width = panel.part_region("s-util_gpu_pct").width
        assert len(drawn_1min) == width > len(drawn_5min)


async def test_recording_writes_every_snapshot(tmp_path: Path) -> None:
    path = tmp_path / "rec.jsonl"
    app, sampler = make_app(record_path=str(path))
    async with app.run_test(size=(100, 30)) as pilot:
        feed(sampler, 0, 4, two_gpus)
        await pilot.pause()
    lines = path.read_text().splitlines()
    assert len(lines) == 5 and "gputui_recording" in lines[0]


def test_bad_record_path_is_a_one_line_usage_error(capsys: pytest.CaptureFixture[str],
                                                   tmp_path: Path) -> None:
    from gputui.cli import main

    assert main(["--record", str(tmp_path / "missing" / "rec.jsonl")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("gputui: cannot write recording") and err.count("\n") == 1


async def test_replay_keys_seek_step_speed() -> None:
    snaps = [two_gpus(t) for t in range(0, 120)]
    snaps[50:60] = [snap(t, [throttled(0, t), gpu(1, t)]) for t in range(50, 60)]
    rec = Recording(path=Path("/tmp/run.jsonl"), snapshots=snaps, interval_s=1.0)
    app = GputuiApp(AppOptions(replay=rec, replay_speed=1.0))
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        assert app.replay is not None
        player = app.replay.player
        assert player is not None
        # No live sampling in replay.
        assert not any(t.name == "gputui-sampler" for t in threading.enumerate())
        await pilot.press("space")
        await pilot.pause()
        assert not player.playing
        assert "⏸ paused" in screen_text(app)
        await pilot.press("home")  # the timer may have played a snapshot before the pause
        assert player.position == 0
        await pilot.press("right")
        assert player.position == 10
        await pilot.press("right", "right", "right", "right", "right")
        assert player.position == 60
        assert app.latest_frame is not None
        assert any(e.gpu_index == 0 for e in app.latest_frame.episodes)
        await pilot.pause()
        assert "REPLAY run.jsonl" in screen_text(app)
        assert "2026-03-14 09:27:53" in screen_text(app)  # the recorded time
        await pilot.press("left")
        assert player.position == 50
        await pilot.press("full_stop")
        assert player.position == 51
        await pilot.press("comma", "comma")
        assert player.position == 49
        await pilot.press("right_square_bracket")
        assert player.speed == 2.0
        await pilot.press("left_square_bracket", "left_square_bracket")
        assert player.speed == 0.5
        await pilot.press("end")
        assert player.position == 119
        await pilot.press("k")  # no signalling recorded PIDs
        assert not isinstance(app.screen, ConfirmScreen)


async def test_live_keys_do_not_steal_the_tables_arrows() -> None:
    app, sampler = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        sampler.ingest(snap(0, [gpu(0)], [proc(1, 0, 5), proc(2, 0, 10), proc(3, 0, 1)]))
        await pilot.pause()
        table = app.query_one(ProcessTable)
        await pilot.press("down", "down")
        assert table.cursor_row == 2
        await pilot.press("home")
        # In live mode home belongs to the table (replay's binding is inactive).
        assert app.replay is None


async def test_real_fake_nvml_sampler_shows_the_scenario(fake_nvml: object) -> None:
    from tests.fakenvml.harness import scenario_path

    fake_nvml.use(scenario_path("two_gpus"))  # type: ignore[attr-defined]
    sampler = Sampler.open(interval=1.0)
    try:
        app, _ = make_app(sampler)
        async with app.run_test(size=(120, 40)) as pilot:
            sampler.tick()
            await pilot.pause()
            text = screen_text(app)
            names = [g.info.name for g in sampler.latest.gpus]  # type: ignore[union-attr]
            assert len(names) == 2
            for i, name in enumerate(names):
                assert f"GPU {i} · {name}" in text
            assert "NVIDIA A100-SXM4-80GB" in text
            assert "driver 550.54.15" in text
    finally:
        sampler.close()


def _table_rows(app: GputuiApp) -> list[str]:
    """The process table's lines as shown (between its borders), header first."""
    table = app.query_one(ProcessTable)
    region = table.region
    lines = screen_text(app).splitlines()[region.y + 1:region.bottom - 1]
    return [line[region.x + 1:region.right - 1] for line in lines]


async def test_process_table_shows_full_values_even_if_drawn_before_measured() -> None:
    """PIDs, big memory values and long commands, fully or sensibly truncated.

    Regression: the DataTable measured auto-width columns on idle but cached cells
    rendered before that, so a frame drawn in between showed PID 5150 as `515` for good.
    """
    long_cmd = "python -m torch.distributed.run --nproc_per_node 8 " + "--flag x " * 30
    procs = (proc(5150, 0, 60, user="alice"),
             proc(4194303, 1, 1023.5, user="averyveryverylongusername", command=long_cmd,
                  rss_bytes=1000 * GIB),
             proc(7, 1, 0.5, user=None, command=None, cpu_pct=None, rss_bytes=None,
                  started=None))
    app, sampler = make_app()
    async with app.run_test(size=(160, 50)) as pilot:
        sampler.ingest(snap(0, [gpu(0), gpu(1)]))
        await pilot.pause()
        table = app.query_one(ProcessTable)
        table.update_processes(procs, T0.timestamp())
        screen_text(app)  # a frame drawn before the table's idle handler ran
        await pilot.pause()
        rows = _table_rows(app)
        header, body = rows[0], rows[1:4]
        # The table is 120 cells wide here: DEC% (the first to go) made room for COMMAND;
        # no process has a container, pod or energy figure: no such columns.
        assert header.split() == ["GPU", "PID", "USER", "GPU", "MEM▼", "SM%", "MEM%", "ENC%",
                                  "CPU%", "RSS", "TIME", "COMMAND"]
        big, pid5150, small = body
        assert " 4194303 " in big and "1023.5GiB" in big and "1000.0GiB" in big
        assert " averyveryve… " in big  # USER capped, cut with an ellipsis, not wrapped
        # The command fills the rest of the row and ends in an ellipsis at the border.
        assert big.rstrip().endswith("…") and "torch.distributed.run" in big
        assert len(big) == table.region.width - 2
        assert " 5150 " in pid5150 and "60.0GiB" in pid5150 and "alice" in pid5150
        assert "python train.py --run 5150" in pid5150 and "1h05m" in pid5150
        # No per-process sample: "—"; no host-side facts: N/A.
        assert small.split() == ["1", "7", "N/A", "512MiB", "—", "—", "—", "N/A", "N/A",
                                 "N/A", "N/A"]
        # Sorting rewrites the labels (sort mark); the values stay whole.
        table.set_sort("pid")
        await pilot.pause()
        rows = _table_rows(app)
        assert "PID▲" in rows[0]
        assert [r.split()[1] for r in rows[1:4]] == ["7", "5150", "4194303"]
        # Narrower terminal: COMMAND shrinks, the other columns keep their width.
        await pilot.resize_terminal(120, 40)
        await pilot.pause()
        rows = _table_rows(app)
        assert " 4194303 " in rows[3] and rows[3].rstrip().endswith("…")


async def test_process_table_pid_from_fake_nvml_throttle_scenario(fake_nvml: object) -> None:
    from tests.fakenvml.harness import scenario_path

    fake_nvml.use(scenario_path("throttle"))  # type: ignore[attr-defined]
    sampler = Sampler.open(interval=1.0)
    try:
        app, _ = make_app(sampler)
        async with app.run_test(size=(160, 50)) as pilot:
            sampler.tick()
            await pilot.pause()
            await pilot.pause()
            rows = _table_rows(app)
            assert rows[1].split()[:2] == ["0", "5150"], rows[:2]
            assert "60.0GiB" in rows[1]
    finally:
        sampler.close()


# --------------------------------------------------------------------------- kill flow
# against the real sampler on the in-process fake NVML, which lists a real child's PID:
# the row carries the child's real start time, so the PID-reuse guard is in the path.


def _sleeper() -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])


async def test_kill_flow_through_the_real_sampler_on_fake_nvml(fake_nvml: object,
                                                               tmp_path: Path) -> None:
    import psutil

    from tests.fakenvml.harness import write_scenario

    child = _sleeper()
    sampler = None
    try:
        scenario = write_scenario(tmp_path / "kill.conf", {
            "device_count": 1, "gpu.0.name": "NVIDIA A100-SXM4-80GB",
            "gpu.0.processes": {child.pid: 2**30}})
        fake_nvml.use(scenario)  # type: ignore[attr-defined]
        sampler = Sampler.open(interval=1.0)
        app, _ = make_app(sampler)
        async with app.run_test(size=(120, 40)) as pilot:
            seen = spy_notifications(app)
            sampler.tick()
            await pilot.pause()
            table = app.query_one(ProcessTable)
            await pilot.pause()
            assert table.row_count == 1
            table.focus()
            await pilot.press("home")  # select the row
            shown = table.selected_process()
            assert shown is not None and shown.pid == child.pid
            # The guard has something to compare: the start time psutil reports.
            assert shown.started == pytest.approx(psutil.Process(child.pid).create_time())
            await pilot.press("k")
            await pilot.pause()
            assert isinstance(app.screen, ConfirmScreen)
            await pilot.press("y")
            await pilot.pause()
            assert child.wait(timeout=20) == -signal.SIGTERM
            assert ("information", f"Sent SIGTERM to PID {child.pid}") in seen
    finally:
        if sampler is not None:
            sampler.close()
        if child.poll() is None:
            child.kill()
            child.wait()


async def test_kill_refused_when_the_pid_now_belongs_to_another_process() -> None:
    """The row's start time is not the live process's: the PID was reused since the
    snapshot. Nothing is signalled and no confirmation is asked; an error says why."""
    import psutil

    child = _sleeper()
    try:
        real_start = psutil.Process(child.pid).create_time()
        app, sampler = make_app()
        async with app.run_test(size=(120, 40)) as pilot:
            seen = spy_notifications(app)
            # The process shown started an hour before the one that has this PID now.
            sampler.ingest(snap(0, [gpu(0)], [proc(child.pid, 0, 50,
                                                   started=real_start - 3600)]))
            await pilot.pause()
            await pilot.press("K")
            await pilot.pause()
            assert not isinstance(app.screen, ConfirmScreen)
            assert any(sev == "error" and f"PID {child.pid} is now a different process" in msg
                       for sev, msg in seen), seen
            assert child.poll() is None
    finally:
        child.kill()
        child.wait()


# --------------------------------------------------------------------------- sizes


def _plain_rows(app: GputuiApp, widget: object) -> list[str]:
    region = widget.region  # type: ignore[attr-defined]
    lines = screen_text(app).splitlines()[region.y:region.bottom]
    return [line[region.x:region.right] for line in lines]


async def test_forced_panels_at_80x24_scroll_instead_of_clipping() -> None:
    app, sampler = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        feed(sampler, 0, 30, two_gpus)
        await pilot.pause()
        area = app.query_one(GpuArea)
        assert area.compact and not area.focusable  # nothing to scroll in compact mode
        await pilot.press("c")
        feed(sampler, 30, 31, two_gpus)
        await pilot.pause()
        assert not area.compact and area.max_scroll_y > 0
        panel1 = app.query_one("#gpu-1", GpuPanel)
        # Panels are laid out beside the scrollbar, never under it.
        inner_right = area.region.right - area.styles.scrollbar_size_vertical
        assert all(p.region.right <= inner_right for p in app.query(GpuPanel))
        # Keys only: Tab reaches the area (it takes focus only while it can scroll).
        await pilot.press("tab")
        assert app.focused is area
        await pilot.press("end")
        await pilot.pause()
        assert area.scroll_y == area.max_scroll_y
        assert area.region.contains_region(panel1.region)
        rows = _plain_rows(app, panel1)
        assert rows[0].startswith("╭─ GPU 1 · NVIDIA") and rows[-1].startswith("╰")
        assert "✓ not throttled" in rows[-2] and "00000000:5E:00.0" in rows[-1]
        await pilot.press("home")
        await pilot.pause()
        assert area.scroll_y == 0
        assert app.query_one("#gpu-0", GpuPanel).region.y == area.region.y


@pytest.mark.parametrize("start", [(120, 40), (250, 70)])
async def test_process_table_fits_80_columns_after_a_resize(start: tuple[int, int]) -> None:
    """No horizontal scrollbar (its thumb's `▊`/`▏` end stayed in the table's last line)
    and the commands visible: less important columns make room."""
    app, sampler = make_app()
    async with app.run_test(size=start) as pilot:
        feed(sampler, 0, 3, two_gpus)
        await pilot.pause()
        table = app.query_one(ProcessTable)
        # No process in a container or pod: neither is a column, at any width.
        wide = ("rss", "time", "command")
        assert table.shown_columns[-len(wide):] == wide
        await pilot.resize_terminal(80, 24)
        await pilot.pause()
        feed(sampler, 3, 4, two_gpus)
        await pilot.pause()
        assert table.max_scroll_x == 0 and not table.show_horizontal_scrollbar
        assert "rss" not in table.shown_columns and "command" in table.shown_columns
        rows = _table_rows(app)
        assert rows[0].split()[-1] == "COMMAND"
        assert "python train.py" in rows[1] and "python train.py" in rows[2]
        assert not any(ch in "".join(rows) for ch in "▏▎▍▌▋▊▉")
        # Back to a wide terminal: every column returns, the selection and sort kept.
        table.set_sort("rss")  # sorting on a hidden column still works, the title says so
        assert "by RSS" in str(table.border_title)
        await pilot.resize_terminal(160, 40)
        await pilot.pause()
        assert table.shown_columns == tuple(k for k in COLUMN_KEYS if k not in ONLY_WHEN_KNOWN)
        assert "RSS▼" in _table_rows(app)[0]


async def test_a_big_terminal_gets_tall_sparklines_a_core_grid_and_a_long_table() -> None:
    from gputui.ui.widgets.host_panel import CoreBars

    app, sampler = make_app()
    async with app.run_test(size=(250, 70)) as pilot:
        feed(sampler, 0, 120, two_gpus)
        await pilot.pause()
        await pilot.pause()
        area = app.query_one(GpuArea)
        assert not area.compact and area.spark_rows == 3
        panel = app.query_one("#gpu-0", GpuPanel)
        spark, rows = panel.part_region("s-util_gpu_pct"), panel.spark_rows_of("util_gpu_pct")
        assert spark.height == 3 and len(rows) == 3
        assert all(len(r) == spark.width for r in rows)
        assert area.max_scroll_y == 0  # the taller panels still fit
        cores = app.query_one(CoreBars)
        assert cores.grid
        text = screen_text(app)
        assert " 7 " in text and "99%" in text  # core 7 labelled, with its percentage
        table = app.query_one(ProcessTable)
        assert table.region.height >= 30 and table.region.width >= 240
        # Back to 120×40: one-row sparklines again.
        await pilot.resize_terminal(120, 40)
        await pilot.pause()
        assert area.spark_rows == 1 and panel.part_region("s-util_gpu_pct").height == 1
