"""Long runs: what the monitor keeps must not grow with time (no timing thresholds).

The growth found in a 17-minute soak was Textual's DataTable render caches: keyed on
an update counter, they kept up to 10,000 dead cells and 1,000 rows from earlier
updates of the process table, and everything a resize storm rendered. The growth found
in a 100-minute soak at 1 s was the view's history keeping up to twice its window.
"""

from __future__ import annotations

import tracemalloc

import pytest

from gputui.telemetry.history import History
from gputui.telemetry.sampler import Sampler
from gputui.ui.app import GputuiApp
from gputui.ui.options import AppOptions
from gputui.ui.textual_adapter import GENERATIONS, MIN_ROWS, render_cache_sizes
from gputui.ui.widgets.process_table import COLUMNS, ProcessTable
from tests.ui.helpers import gpu, proc, snap


def _snap(t: int):  # type: ignore[no-untyped-def]
    # Processes come and go and their CPU% moves: the table changes on every frame.
    procs = [proc(1000 + (t + k) % 7, k % 2, cpu_pct=float(t % 100)) for k in range(4)]
    return snap(t, [gpu(i, t) for i in range(4)], procs)


def _bound(table: ProcessTable) -> int:
    return GENERATIONS * max(MIN_ROWS, table.size.height) * len(COLUMNS)


async def test_process_table_caches_stay_bounded_over_many_updates_and_resizes() -> None:
    sampler = Sampler(interval=1.0)
    app = GputuiApp(AppOptions(interval=1.0), sampler=sampler)
    async with app.run_test(size=(140, 45)) as pilot:
        for t in range(60):
            # Processes are redrawn every few seconds of snapshot time: step 4 s.
            sampler.ingest(_snap(4 * t))
            await pilot.pause()
        table = app.query_one(ProcessTable)
        sizes = render_cache_sizes(table)
        assert table.row_count == 4  # it was really drawn, over and over
        assert sizes["_cell_render_cache"] <= _bound(table), sizes
        assert sizes["_row_render_cache"] <= GENERATIONS * max(MIN_ROWS, table.size.height)
        # A resize storm: every size renders every cell anew.
        for i in range(24):
            await pilot.resize_terminal(100 + (i * 37) % 100, 30 + (i * 7) % 20)
            sampler.ingest(_snap(240 + 4 * i))
            await pilot.pause()
        sizes = render_cache_sizes(table)
        assert sizes["_cell_render_cache"] <= _bound(table), sizes
        assert sizes["_line_cache"] <= GENERATIONS * max(MIN_ROWS, table.size.height)


def test_view_history_is_bounded_however_long_it_runs() -> None:
    h = History(capacity=50)
    for t in range(500):
        h.append(_snap(t))
    assert len(h) == 50
    times, values = h.window(0, "util_gpu_pct", seconds=10_000)
    assert len(times) == len(values) == 50 and times[0] == 450.0


def test_view_history_memory_stops_growing_once_its_window_is_full() -> None:
    # Memory the History holds (traced by Python: its arrays are all of it) after the
    # window first filled, against the most it ever holds over two more windows.
    capacity = 512
    snaps = [snap(t, [gpu(i, t) for i in range(2)]) for t in range(3 * capacity)]
    h = History(capacity=capacity)
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        for s in snaps[:capacity]:
            h.append(s)
        full = tracemalloc.get_traced_memory()[0] - base
        tracemalloc.reset_peak()
        for s in snaps[capacity:]:
            h.append(s)
        most = tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()
    assert len(h) == capacity and h.appends == 3 * capacity
    assert full > 2 * 8 * capacity * 8  # 2 GPUs × 8 metrics × 8-byte points: really held
    # A slack of 1/16 of the window and the arrays' own over-allocation (1/16 again) are
    # all it may add; keeping up to two windows (as it once did) comes to about 2×.
    assert most <= full * 1.25, (full, most)


def test_watch_and_headless_samplers_keep_no_history() -> None:
    s = Sampler(interval=0.5, nvml=None, nvml_error="no NVML here")
    for _ in range(3):
        s.tick()
    # Only the latest snapshot and the (bounded) episode log: no ring buffers at all.
    assert not any(isinstance(v, History) for v in vars(s).values())
    assert s.latest is not None and s.latest.seq == 3


async def test_screens_opened_and_closed_leave_nothing_behind(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Textual's style cache kept every removed widget's drawing (a toast, a dialog, a
    screen): the monitor lets go of them on a timer (every minute; here 0.1 s)."""
    import gc

    from textual._styles_cache import StylesCache

    import gputui.ui.app as app_module

    def style_caches() -> int:
        gc.collect()
        return sum(type(o) is StylesCache for o in gc.get_objects())  # no proxy asked

    monkeypatch.setattr(app_module, "FORGET_REMOVED_EVERY_S", 0.1)
    sampler = Sampler(interval=1.0)
    app = GputuiApp(AppOptions(interval=1.0), sampler=sampler)
    async with app.run_test(size=(140, 45)) as pilot:
        sampler.ingest(_snap(0))
        await pilot.pause(0.3)
        before = style_caches()
        for _ in range(3):
            await pilot.press("question_mark")  # the help screen, drawn and closed
            await pilot.pause()
            await pilot.press("escape")
            await pilot.pause()
        await pilot.pause(0.3)
        assert style_caches() == before  # 9 widgets drawn and removed: none kept
