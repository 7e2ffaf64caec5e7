"""The process table's per-process columns: SM%, MEM% (memory controller),
ENC%, DEC% and CONTAINER, driven with Pilot and a sampler fed by hand."""

from __future__ import annotations

import os

from textual.coordinate import Coordinate

from gputui.telemetry.host import HostSource
from gputui.telemetry.model import GpuProcess, Snapshot
from gputui.ui.app import GputuiApp
from gputui.ui.screens.monitor import PROCESS_REFRESH_S
from gputui.ui.widgets.process_table import ProcessTable
from tests.ui.conftest import MonitorFactory
from tests.ui.helpers import gpu, make_app, proc, screen_text, snap

UTIL_KEYS = ("sm_util", "mem_util", "enc_util", "dec_util")


def _rows(app: GputuiApp) -> list[str]:
    """The table's lines as shown (between its borders), header first."""
    table = app.query_one(ProcessTable)
    region = table.region
    lines = screen_text(app).splitlines()[region.y + 1:region.bottom - 1]
    return [line[region.x + 1:region.right - 1] for line in lines]


def _cells(table: ProcessTable, pid: int, gpu_index: int = 0) -> dict[str, str]:
    """Every shown column's text in one process's row."""
    row = table.get_row(f"{gpu_index}:{pid}")
    return {key: cell.text.plain for key, cell in zip(table.shown_columns, row, strict=True)}


def three(t: int = 0) -> Snapshot:
    return snap(t, [gpu(0), gpu(1)], [
        proc(11, 0, 20, sm_util_pct=87, mem_util_pct=41, enc_util_pct=0, dec_util_pct=12,
             container="docker:0123456789ab"),
        proc(22, 0, 30, sm_util_pct=5, mem_util_pct=2, enc_util_pct=33, dec_util_pct=0,
             container="containerd:abcdef012345 pod 6f1a2b3c-0000-4000-8000-000000000001"),
        proc(33, 1, 10, sm_util_pct=None, mem_util_pct=None, enc_util_pct=None,
             dec_util_pct=None, container=None),
    ])


async def test_per_process_values_are_shown_exactly() -> None:
    app, sampler = make_app()
    async with app.run_test(size=(250, 70)) as pilot:
        sampler.ingest(three())
        await pilot.pause()
        table = app.query_one(ProcessTable)
        assert all(k in table.shown_columns for k in (*UTIL_KEYS, "container"))
        header = _rows(app)[0]
        for label in ("SM%", "MEM%", "ENC%", "DEC%", "CONTAINER"):
            assert f" {label}" in header
        a, b, c = _cells(table, 11), _cells(table, 22), _cells(table, 33, 1)
        assert [a[k] for k in UTIL_KEYS] == ["87", "41", "0", "12"]
        assert [b[k] for k in UTIL_KEYS] == ["5", "2", "33", "0"]
        assert a["container"] == "docker:0123456789ab"
        # A pod name longer than the column's cap ends in "…", never wraps.
        assert b["container"].startswith("containerd:abcdef012345 pod")
        # No sample from the driver for the process (or not in a container): "—", not 0.
        assert [c[k] for k in (*UTIL_KEYS, "container")] == ["—"] * 5
        text = screen_text(app)
        assert "docker:0123456789ab" in text
        row11 = next(line for line in _rows(app) if " 11 " in line)
        assert row11.split()[4:8] == ["87", "41", "0", "12"]  # after GPU, PID, USER, GPU MEM


async def test_sorting_by_sm_percent_orders_rows_and_missing_go_last() -> None:
    app, sampler = make_app()
    async with app.run_test(size=(250, 70)) as pilot:
        sampler.ingest(three())
        await pilot.pause()
        table = app.query_one(ProcessTable)

        def pids() -> list[int]:
            return [int(str(table.get_row_at(i)[1].raw)) for i in range(table.row_count)]

        table.set_sort("sm_util")
        await pilot.pause()
        assert pids() == [11, 22, 33]  # biggest first; no sample last
        assert "SM%▼" in _rows(app)[0]
        table.set_sort("sm_util", reverse=False)
        assert pids() == [22, 11, 33]  # smallest first; no sample still last
        table.set_sort("enc_util")
        assert pids() == [22, 11, 33]
        table.set_sort("container", reverse=False)
        assert pids() == [22, 11, 33]  # containerd… < docker…, none last
        # New values with the next process reading (the table repaints at most every
        # PROCESS_REFRESH_S when the same processes are there): the order follows.
        sampler.ingest(snap(PROCESS_REFRESH_S, [gpu(0), gpu(1)], [
            proc(11, 0, 20, sm_util_pct=3), proc(22, 0, 30, sm_util_pct=90),
            proc(33, 1, 10, sm_util_pct=50)]))
        await pilot.pause()
        table.set_sort("sm_util")
        assert pids() == [22, 33, 11]
        assert _cells(table, 22)["sm_util"] == "90"


async def test_hostile_container_and_command_text_is_escaped() -> None:
    app, sampler = make_app()
    evil_container = "docker:[bold red]x\x1b[2J\x07"
    evil_command = "python [link=http://x]click[/link] \x1b]0;pwned\x07 train.py"
    async with app.run_test(size=(250, 70)) as pilot:
        sampler.ingest(snap(0, [gpu(0)], [proc(7, 0, 5, container=evil_container,
                                                command=evil_command)]))
        await pilot.pause()
        table = app.query_one(ProcessTable)
        cells = _cells(table, 7)
        assert "\x1b" not in cells["container"] and "\x07" not in cells["container"]
        assert cells["container"] == "docker:[bold red]x\\x1b[2J\\x07"
        assert cells["command"] == "python [link=http://x]click[/link] \\x1b]0;pwned\\x07 train.py"
        text = screen_text(app)
        assert "[bold red]x\\x1b" in text  # shown literally, markup not applied
        assert "\x1b" not in text


async def test_narrow_tables_drop_the_new_columns_first_and_never_cut_a_number() -> None:
    app, sampler = make_app()
    big = snap(0, [gpu(0), gpu(1)], [
        proc(4194303, 1, 1023.5, sm_util_pct=100, mem_util_pct=100, enc_util_pct=100,
             dec_util_pct=100, container="podman:0123456789ab")])
    async with app.run_test(size=(80, 24)) as pilot:
        sampler.ingest(big)
        await pilot.pause()
        table = app.query_one(ProcessTable)
        # PID, USER, GPU MEM and COMMAND stay; every other column made room for COMMAND.
        assert table.shown_columns == ("gpu", "pid", "user", "gpu_mem", "command")
        row = _rows(app)[1]
        assert " 4194303 " in row and "1023.5GiB" in row
        for size, want in (
                ((120, 40), ("gpu", "pid", "user", "gpu_mem", "cpu", "rss", "time", "command")),
                ((250, 70), ("gpu", "pid", "user", "gpu_mem", *UTIL_KEYS, "cpu", "rss",
                             "time", "container", "command"))):
            await pilot.resize_terminal(*size)
            await pilot.pause()
            assert table.shown_columns == want
            row = next(line for line in _rows(app) if "4194303" in line).split()
            # Every shown percentage whole (CPU% is 98 here): as many "100" as columns.
            assert row.count("100") == sum(k in UTIL_KEYS for k in want)
            assert "1023.5GiB" in row


async def test_the_same_pid_on_two_gpus_shows_the_same_cpu_percent() -> None:
    """One psutil reading per PID per tick, copied to its other rows."""
    host = HostSource()
    me = os.getpid()
    rows = (GpuProcess(gpu_index=0, pid=me, gpu_mem_bytes=1),
            GpuProcess(gpu_index=1, pid=me, gpu_mem_bytes=2))
    host.describe(rows)
    sum(i * i for i in range(200_000))  # some CPU for psutil to measure
    first, second = host.describe(rows)
    app, sampler = make_app()
    async with app.run_test(size=(250, 70)) as pilot:
        sampler.ingest(snap(0, [gpu(0), gpu(1)], [first, second]))
        await pilot.pause()
        table = app.query_one(ProcessTable)
        a, b = _cells(table, me, 0), _cells(table, me, 1)
        assert a["cpu"] == b["cpu"] == f"{first.cpu_pct:.0f}"
        assert first.cpu_pct == second.cpu_pct


async def test_the_monitor_profile_reads_per_process_utilisation(
        fake_monitor: MonitorFactory) -> None:
    """The TUI's own field profile, through the real pynvml and the fake library: the
    columns are fed by NVML, not only by hand-made samples."""
    me = os.getpid()
    app, sampler = fake_monitor({"device_count": 1, "gpu.0.processes": {me: 3 * 2**30},
                                 "gpu.0.process_util": f"{me}:87:41:0:12"}, 1.0)
    async with app.run_test(size=(250, 70)) as pilot:
        sampler.tick()
        await pilot.pause()
        cells = _cells(app.query_one(ProcessTable), me)
        assert [cells[k] for k in UTIL_KEYS] == ["87", "41", "0", "12"]
        assert cells["gpu_mem"] == "3.0GiB"


UID1, UID2 = "11111111-0000-4000-8000-000000000001", "22222222-0000-4000-8000-000000000002"


def in_pods(t: float = 0) -> Snapshot:
    """Two pods (one on both GPUs), a host process, energy shared and exclusive."""
    def pod(pid: int, gpu_index: int, mem: float, name: str, uid: str, cid: str,
            **kw: object) -> GpuProcess:
        return proc(pid, gpu_index, mem, container="pytorch", container_id=cid, pod=name,
                    namespace="ml", pod_uid=uid, qos="burstable", **kw)

    return snap(t, [gpu(0), gpu(1)], [
        pod(11, 0, 20, "trainer-1", UID1, "a" * 64, user="alice", sm_util_pct=60,
            power_w=150.0, energy_j=3000.0, energy_method="sm_share", energy_estimate=True),
        pod(12, 0, 10, "trainer-2", UID2, "b" * 64, user="bob", sm_util_pct=20,
            power_w=50.0, energy_j=1000.0, energy_method="sm_share", energy_estimate=True),
        pod(13, 1, 30, "trainer-1", UID1, "a" * 64, user="alice", sm_util_pct=90,
            power_w=300.0, energy_j=6000.0, energy_method="exclusive",
            energy_estimate=False),
        proc(14, 1, 1, user="root", kind="graphics", command="/usr/lib/xorg/Xorg"),
    ])


async def test_pod_container_power_and_energy_columns_where_processes_have_them() -> None:
    app, sampler = make_app()
    async with app.run_test(size=(250, 70)) as pilot:
        sampler.ingest(in_pods())
        await pilot.pause()
        table = app.query_one(ProcessTable)
        assert {"pod", "container", "power", "energy"} <= set(table.shown_columns)
        header = _rows(app)[0]
        for label in ("POD", "CONTAINER", "POWER", "ENERGY"):
            assert f" {label}" in header
        shared, solo, xorg = _cells(table, 11), _cells(table, 13, 1), _cells(table, 14, 1)
        assert (shared["pod"], shared["container"]) == ("ml/trainer-1", "pytorch")
        # "~": a share of a GPU that ran more than this process (an estimate).
        assert (shared["power"], shared["energy"]) == ("~150W", "~3.0kJ")
        assert (solo["power"], solo["energy"]) == ("300W", "6.0kJ")
        assert [xorg[k] for k in ("pod", "container", "power", "energy")] == ["—"] * 4
        # The same processes outside any pod or container, without energy: no such columns.
        sampler.ingest(snap(PROCESS_REFRESH_S, [gpu(0)], [proc(11, 0, 20)]))
        await pilot.pause()
        assert not {"pod", "container", "power", "energy"} & set(table.shown_columns)


async def test_g_groups_by_user_container_and_pod_with_totals() -> None:
    app, sampler = make_app()
    async with app.run_test(size=(200, 60)) as pilot:
        sampler.ingest(in_pods())
        await pilot.pause()
        table = app.query_one(ProcessTable)
        table.set_sort("pid", reverse=False)

        def groups() -> dict[str, dict[str, str]]:
            out = {}
            for key in table.rows:
                row = table.get_row(key)
                cells = {k: c.text.plain for k, c in zip(table.shown_columns, row, strict=True)}
                out[cells["group"]] = cells
            return out

        await pilot.press("g")
        assert table.group_by == "user" and "Processes (4) by user (3)" in str(table.border_title)
        alice = groups()["alice"]
        assert (alice["procs"], alice["gpus"], alice["gpu_mem"], alice["sm_util"]) == (
            "2", "0,1", "50.0GiB", "150")
        assert (alice["power"], alice["energy"]) == ("~450W", "~9.0kJ")
        assert set(groups()) == {"alice", "bob", "root"}
        assert table.selected_process() is None  # a group is not a process to signal
        await pilot.press("g")
        assert table.group_by == "container"
        # Two containers of the same name (one per pod): told apart by their ids.
        rows = sorted((c["group"], c["procs"]) for c in (
            {k: cell.text.plain for k, cell in zip(table.shown_columns, table.get_row(key),
                                                   strict=True)} for key in table.rows))
        assert rows == [("(not in a container)", "1"), ("pytorch", "1"), ("pytorch", "2")]
        await pilot.press("g")
        assert table.group_by == "pod"
        pods = groups()
        assert set(pods) == {"ml/trainer-1", "ml/trainer-2", "(not in a pod)"}
        assert (pods["ml/trainer-1"]["procs"], pods["ml/trainer-1"]["energy"]) == ("2", "~9.0kJ")
        assert (pods["(not in a pod)"]["power"], pods["(not in a pod)"]["energy"]) == ("—", "—")
        # The biggest GPU memory first, as the process table starts.
        assert [c.text.plain for c in table.get_row_at(0)][-1] == "ml/trainer-1"
        text = screen_text(app)
        assert "ml/trainer-1" in text and " POD" in text
        await pilot.press("g")
        assert table.group_by is None and len(table.rows) == 4
        assert (table.sort_column, table.sort_reverse) == ("pid", False)  # as it was
        assert int(str(table.get_row_at(0)[1].raw)) == 11


async def test_changed_cells_moved_rows_and_the_cursor_are_drawn_anew() -> None:
    """Cells are drawn again only when what they show changed: a new CPU%, rows that
    swap places when the sort order changes, and the cursor's row all reach the screen."""
    app, sampler = make_app()

    def row_of(pid: int) -> str:
        return next(line for line in _rows(app) if f" {pid} " in line)

    async with app.run_test(size=(250, 70)) as pilot:
        sampler.ingest(snap(0, [gpu(0)], [proc(11, 0, 30, cpu_pct=12.0),
                                          proc(22, 0, 20, cpu_pct=34.0)]))
        await pilot.pause()
        table = app.query_one(ProcessTable)
        assert " 12 " in row_of(11) and " 34 " in row_of(22)
        assert [line.split()[1] for line in _rows(app)[1:3]] == ["11", "22"]  # by GPU MEM
        # Later: 22 uses more memory than 11 and a new CPU%; 11 is unchanged.
        sampler.ingest(snap(PROCESS_REFRESH_S, [gpu(0)], [
            proc(11, 0, 30, cpu_pct=12.0), proc(22, 0, 40, cpu_pct=56.0)]))
        await pilot.pause()
        assert [line.split()[1] for line in _rows(app)[1:3]] == ["22", "11"]
        assert " 56 " in row_of(22) and " 34 " not in row_of(22)
        assert " 12 " in row_of(11) and "30.0GiB" in row_of(11)
        # The cursor's row is drawn in the cursor's colours: same text, other styles.
        table.focus()
        table.move_cursor(row=0, animate=False)
        await pilot.pause()
        on_first = [list(table.render_line(y)) for y in (1, 2)]  # line 0 is the header
        table.move_cursor(row=1, animate=False)
        await pilot.pause()
        on_second = [list(table.render_line(y)) for y in (1, 2)]
        for before, after in zip(on_first, on_second, strict=True):
            assert "".join(s.text for s in before) == "".join(s.text for s in after)
            assert before != after


async def test_lines_drawn_by_the_adapter_are_what_textual_draws() -> None:
    """The table's lines and simple text cells are drawn by gputui's table itself: every
    line of the table — header, zebra rows, the cursor's row focused and not, a hovered
    row, a column cut by the ellipsis, the border — is what Textual's DataTable draws."""
    from rich.segment import Segment
    from textual.geometry import Region

    from gputui.ui.textual_adapter import supported

    app, sampler = make_app()
    procs = [proc(pid, pid % 2, 10 + pid, cpu_pct=float(pid)) for pid in range(11, 17)]
    procs.append(proc(17, 0, 5, user="a-user-name-far-longer-than-twelve"))

    async with app.run_test(size=(160, 50)) as pilot:
        sampler.ingest(snap(0, [gpu(0), gpu(1)], procs))
        await pilot.pause()
        table = app.query_one(ProcessTable)

        def lines(here: bool) -> list[list[Segment]]:
            table.draw_here = here
            table.notify_style_update()  # forget every cell drawn
            table.refresh()
            width, height = table.outer_size
            return [list(Segment.simplify(strip))
                    for strip in table.render_lines(Region(0, 0, width, height))]

        states = []
        for focused, cursor, hover in ((False, 0, None), (True, 2, None), (True, 3, 1)):
            if focused:
                table.focus()
            table.move_cursor(row=cursor, animate=False)
            if hover is not None:
                table.hover_coordinate = Coordinate(hover, 0)
            await pilot.pause()
            states.append((lines(True), lines(False)))
        assert supported()
        for here, textual in states:
            assert len(here) == table.outer_size.height and here == textual
        assert states[0][0] != states[1][0]  # the cursor and focus changed the lines


async def test_a_reading_that_moves_values_draws_those_rows_again_not_the_table() -> None:
    """Running times move at every process reading: the rows are drawn again, and the
    header and the empty lines below the rows are not (the order stays, nothing sorted
    on changed)."""
    app, sampler = make_app()
    async with app.run_test(size=(160, 50)) as pilot:
        sampler.ingest(snap(0, [gpu(0)], [proc(11, 0, 30, cpu_pct=12.0),
                                          proc(22, 0, 20, cpu_pct=34.0)]))
        await pilot.pause()
        table = app.query_one(ProcessTable)
        before = _rows(app)
        table._dirty_regions.clear()
        later = 20 * PROCESS_REFRESH_S  # a minute on: the running times show it
        sampler.ingest(snap(later, [gpu(0)], [
            proc(11, 0, 30, cpu_pct=12.0), proc(22, 0, 20, cpu_pct=56.0)]))
        await pilot.pause(0)  # the frame is taken; not yet drawn
        dirty = list(table._dirty_regions)
        await pilot.pause()
        after = _rows(app)
        assert [line.split()[1] for line in after[1:3]] == ["11", "22"]  # order kept
        assert after[1] != before[1] and after[2] != before[2]  # running times moved
        assert " 56 " in after[2] and " 34 " not in after[2]
        offset = table.content_offset
        rows = {offset.y + 1, offset.y + 2}  # below the header line
        assert dirty, "the moved rows were not marked for drawing"
        assert {y for r in dirty for y in range(r.y, r.bottom)} == rows
        assert all(r.x == offset.x for r in dirty)


async def test_groups_tied_on_the_sorted_value_move_when_their_process_counts_change() -> None:
    """Rows tied on the sorted column are ordered by their first columns; a group's
    (PROCS, GPUS) change with its processes, and the order follows them."""
    app, sampler = make_app()
    async with app.run_test(size=(160, 50)) as pilot:
        sampler.ingest(snap(0, [gpu(0)], [proc(11, 0, 10, user="alice"),
                                          proc(21, 0, 10, user="bob"),
                                          proc(22, 0, 10, user="bob")]))
        await pilot.pause()
        table = app.query_one(ProcessTable)
        table.set_grouping("user")
        table.set_sort("sm_util", True)  # N/A for every group: all tied

        def order() -> list[str]:
            return [str(table.coordinate_to_cell_key(Coordinate(i, 0)).row_key.value)
                    for i in range(table.row_count)]

        await pilot.pause()
        assert order() == ["group:bob", "group:alice"]  # 2 processes before 1
        sampler.ingest(snap(20 * PROCESS_REFRESH_S, [gpu(0)], [
            proc(11, 0, 10, user="alice"), proc(12, 0, 10, user="alice"),
            proc(13, 0, 10, user="alice"), proc(21, 0, 10, user="bob"),
            proc(22, 0, 10, user="bob")]))
        await pilot.pause()
        assert order() == ["group:alice", "group:bob"]
