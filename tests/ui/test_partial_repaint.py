"""Repaint only what changed: a gauge, the header's clock and the host's core bars mark
dirty only the lines whose text changed (the terminal writer then sends only the cells
that differ: tests/ui/test_terminal_writer.py)."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

from textual.geometry import Region

from gputui.ui.widgets.header import AppHeader
from gputui.ui.widgets.host_panel import CoreBars
from gputui.ui.widgets.partial import repaint_changed
from tests.ui.helpers import gpu, host, snap
from tests.ui.test_app import make_app


class _Lines:
    """What repaint_changed needs of a widget: its size and refresh()."""

    def __init__(self, width: int) -> None:
        from textual.geometry import Size

        self.size = Size(width, 3)
        self.refreshed: list[Region] = []

    def refresh(self, *regions: Region) -> None:
        self.refreshed.extend(regions)


def test_only_the_lines_that_changed_are_refreshed_each_whole() -> None:
    w = _Lines(40)
    old = ["CPU  ▎░░░░░░░░░    1%", "RAM  ▍░░░░░░░░░   2.0G", "LOAD 0.1"]
    new = ["CPU  ▍░░░░░░░░░    2%", "RAM  ▍░░░░░░░░░   2.0G", "LOAD 0.2"]
    repaint_changed(w, old, new, top=1)  # type: ignore[arg-type]
    assert w.refreshed == [Region(0, 1, 40, 1), Region(0, 3, 40, 1)]
    w.refreshed.clear()
    repaint_changed(w, old, list(old))  # type: ignore[arg-type]
    assert w.refreshed == []
    repaint_changed(w, old[:2], old)  # type: ignore[arg-type]  # a line more: drawn
    assert w.refreshed == [Region(0, 2, 40, 1)]


async def test_a_cpu_gauge_tick_repaints_its_line_only() -> None:
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
        offset = cpu.content_offset
        row = (cpu.size.height - 1) // 2  # the gauge's drawn line
        assert list(cpu._dirty_regions) == [
            Region(0, row, cpu.size.width, 1).translate(offset)]
        await pilot.pause()
        assert cpu.render_line(0).text.rstrip().endswith("2%")


async def test_a_clock_tick_repaints_only_the_clock() -> None:
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
        dirty = list(right._dirty_regions)
        offset = right.content_offset
        assert dirty == [Region(0, 0, right.size.width, 1).translate(offset)]
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
        (dirty,) = bars._dirty_regions  # one region: row 0, the only row that moved
        assert dirty == Region(0, 0, bars.size.width, 1).translate(offset)
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


async def test_a_gauge_turning_warning_or_a_new_theme_recolours_it() -> None:
    """The gauge keeps its parts' styles between repaints: a severity class or a theme
    that changes them is drawn in the new colours."""
    from gputui.ui.widgets.gauge import Gauge

    app, sampler = make_app()
    async with app.run_test(size=(160, 50)) as pilot:
        sampler.ingest(snap(0, [gpu(0)]))
        await pilot.pause()
        cpu = app.query_one("#h-cpu", Gauge)

        def fill_style() -> object:
            line = (cpu.size.height - 1) // 2
            return next(s.style for s in cpu.render_line(line) if "█" in s.text)

        cpu.set(0.5, "50%")
        await pilot.pause()
        calm = fill_style()
        cpu.set(0.95, "95%", "warning")
        await pilot.pause()
        warm = fill_style()
        assert warm != calm and warm == cpu.get_component_rich_style("gauge--fill")
        app.theme = next(t for t in ("gputui-light", "gputui-dark") if t != app.theme)
        await pilot.pause()
        assert fill_style() != warm
        assert fill_style() == cpu.get_component_rich_style("gauge--fill")
