"""Repaint only what changed: the header's clock tick and the host's core
bars mark just the changed cells or rows dirty, so the terminal gets those, not the line."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

from textual.geometry import Region

from gputui.ui.widgets.header import AppHeader
from gputui.ui.widgets.host_panel import CoreBars
from gputui.ui.widgets.partial import cells, changed_runs
from tests.ui.helpers import gpu, host, snap
from tests.ui.test_app import make_app


def test_changed_runs_skip_unchanged_stretches_longer_than_a_cursor_move() -> None:
    old = "CPU  ▎░░░░░░░░░░░░░░░░░░░░    1%"
    new = "CPU  ▍░░░░░░░░░░░░░░░░░░░░    2%"
    assert changed_runs(old, new) == [(5, 6), (30, 31)]  # the bar's end, the digit
    assert changed_runs("a1b2", "a9b8") == [(1, 4)]  # a 1-cell gap: one run
    assert changed_runs("same", "same") == []
    assert changed_runs("ab", "abc") == [(2, 3)]  # the line grew: its new cell
    assert changed_runs("abc", "a") == [(1, 3)]  # shrank: the cells to blank


def test_cells_count_a_wide_character_twice_and_see_style_changes() -> None:
    # "⏳" takes two cells: the digit after it is cell 3, not 2.
    old, new = cells([("⏳ 1", None)]), cells([("⏳ 2", None)])
    assert len(new) == 4 and changed_runs(old, new) == [(3, 4)]
    plain, bold = cells([("abc", None)]), cells([("a", None), ("b", "bold"), ("c", None)])
    assert changed_runs(plain, bold) == [(1, 2)]  # a style change counts


async def test_a_cpu_gauge_tick_repaints_the_bar_end_and_the_digits_only() -> None:
    from gputui.ui.widgets.gauge import Gauge

    app, sampler = make_app()
    async with app.run_test(size=(160, 50)) as pilot:
        sampler.ingest(snap(0, [gpu(0)]))
        await pilot.pause()
        cpu = app.query_one("#h-cpu", Gauge)
        cpu.set(0.013, "1%")
        await pilot.pause()
        cpu._dirty_regions.clear()
        cpu.set(0.021, "2%")
        dirty = sorted(cpu._dirty_regions, key=lambda r: r.x)
        assert len(dirty) == 2 and all(r.width <= 2 for r in dirty), dirty
        offset = cpu.content_offset
        assert dirty[-1].right == offset.x + cpu.size.width - 1  # the digit before "%"
        await pilot.pause()
        assert cpu.render_line(0).text.rstrip().endswith("2%")


async def test_a_clock_tick_repaints_only_the_seconds() -> None:
    app, sampler = make_app()
    async with app.run_test(size=(160, 50)) as pilot:
        sampler.ingest(snap(0, [gpu(0)]))
        await pilot.pause()
        header = app.query_one(AppHeader)
        right = header._right
        before = right.text.plain
        right._dirty_regions.clear()
        header.set_info(replace(header.info, time=header.info.time + timedelta(seconds=1)))
        after = right.text.plain
        assert before != after and len(before) == len(after)
        (start, end), = changed_runs(before, after)
        assert end - start <= 2  # ":57" → ":58": the last digit (two at a ten)
        dirty = list(right._dirty_regions)
        offset = right.content_offset
        assert dirty == [Region(start, 0, end - start, 1).translate(offset)]
        await pilot.pause()
        assert after.strip() in header._right.render().plain


async def test_core_bars_repaint_only_rows_that_moved() -> None:
    app, sampler = make_app()
    async with app.run_test(size=(160, 50)) as pilot:
        cores = tuple(float(10 * i) for i in range(8))
        sampler.ingest(snap(0, [gpu(0)], host=host(cpu_per_core_pct=cores)))
        await pilot.pause()
        bars = app.query_one(CoreBars)
        assert len(bars._lines) >= 2, bars._lines  # a grid: more than one row to spare
        bars._dirty_regions.clear()
        moved = list(cores)
        moved[0] = 99.0  # core 0 is on the first row (column-major)
        bars.set_cores(tuple(moved))
        offset = bars.content_offset
        (dirty,) = bars._dirty_regions  # one region: row 0, within core 0's cell
        cell = bars._grid_shape(bars.size.width)
        assert cell is not None
        assert dirty.y == offset.y and dirty.height == 1
        assert offset.x <= dirty.x and dirty.right <= offset.x + cell[2]
        strip = bars.render_line(0)
        assert len(list(strip)) >= 2  # a segment per grid cell


async def test_ram_moving_by_bytes_repaints_nothing_until_a_cell_changes() -> None:
    from gputui.ui.widgets.gauge import Gauge

    app, sampler = make_app()
    async with app.run_test(size=(160, 50)) as pilot:
        sampler.ingest(snap(0, [gpu(0)]))
        await pilot.pause()
        ram = app.query_one("#h-ram", Gauge)
        ram.set(0.5, "32.0/64.0G")
        await pilot.pause()
        ram._dirty_regions.clear()
        ram.set(0.5 + 1e-7, "32.0/64.0G")  # a few KiB more: the same cells
        assert not ram._dirty_regions and ram.fraction == 0.5 + 1e-7
        ram.set(0.75, "48.0/64.0G")
        assert ram._dirty_regions
