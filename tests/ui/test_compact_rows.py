"""Compact GPU rows: every row shows the same fields in the same columns
whatever its state (a throttled or lost GPU included), under one header line, and the SM
clock (the proof of throttling) is there at 80 columns."""

from __future__ import annotations

import re

import pytest

from gputui.ui.widgets.gpu_area import GpuArea
from gputui.ui.widgets.gpu_row import MEDIUM_COLUMNS, GpuRow, row_columns
from tests.ui.helpers import feed, gpu, lost, screen_text, snap, throttled
from tests.ui.test_app import make_app

# What a user reads in each column: a value with its unit, or "—" where the GPU has none.
VALUE = {
    "util_gpu_pct": r"\d+%|—",
    "sm_active_pct": r"\d+%|—",
    "util_mem_pct": r"\d+%|—",
    "mem_used_bytes": r"\d+/\d+G|—",
    "power_w": r"\d+(/\d+)?W|—",
    "temp_c": r"\d+(/\d+)?°C|—",
    "clock_sm_mhz": r"\d+/\d+MHz|—",
}
HEADERS = {"util_gpu_pct": "GPU", "sm_active_pct": "SMact", "util_mem_pct": "MEMC",
           "mem_used_bytes": "VRAM", "power_w": "PWR", "temp_c": "TEMP",
           "clock_sm_mhz": "SM clk"}


def four(t: int):
    return snap(t, [throttled(0, t) if t > 3 else gpu(0, t), lost(1),
                    gpu(2, t, sm_active_pct=91.0), gpu(3, t)])


def eight(t: int):
    return snap(t, [throttled(0, t) if t > 3 else gpu(0, t), lost(1)]
                + [gpu(i, t) for i in range(2, 8)])


def spans(header: str) -> dict[str, tuple[int, int]]:
    """Each metric column's cells, found from where its title sits in the header line
    (numbers are right-aligned under their title)."""
    out = {}
    cols = row_columns(len(header))
    for col in cols:
        if col.key not in HEADERS:
            continue
        m = re.search(rf"(?<!\S){re.escape(HEADERS[col.key])}(?!\S)", header)
        assert m, (HEADERS[col.key], header)
        out[col.key] = (m.end() - col.width, m.end())
    return out


def metrics_line(row: GpuRow) -> str:
    """The line with the numbers (80 columns, two lines: the second, under the name)."""
    lines = row.render().plain.split("\n")
    return lines[1] if len(lines) == 2 and row.size.width < MEDIUM_COLUMNS else lines[0]


@pytest.mark.parametrize(("size", "n"), [((80, 24), 4), ((80, 24), 8), ((120, 40), 8),
                                         ((200, 60), 8)])
async def test_compact_rows_line_up_and_keep_the_sm_clock(size: tuple[int, int],
                                                          n: int) -> None:
    app, sampler = make_app()
    make = four if n == 4 else eight
    async with app.run_test(size=size) as pilot:
        feed(sampler, 0, 60, make)
        await pilot.pause()
        if not app.query_one(GpuArea).compact:
            await pilot.press("c")  # panels fit at this size: ask for the rows
            feed(sampler, 60, 61, make)
            await pilot.pause()
        await pilot.pause()
        text = screen_text(app)
        header = next(line for line in text.splitlines() if "SM clk" in line)
        rows = {r.id: r for r in app.query(GpuRow)}
        assert len(rows) == n
        cols = spans(header.rstrip().ljust(rows["row-0"].size.width))
        lines = {k: metrics_line(r) for k, r in rows.items()}
        for key, line in lines.items():
            for metric, (lo, hi) in cols.items():
                cell = line[lo:hi].strip()
                assert re.fullmatch(VALUE[metric], cell), (key, metric, cell, line)
                assert line[lo - 1] == " "  # nothing spills over from the column before
        # The lost GPU: every column there, with "—" where it has no value.
        assert all(lines["row-1"][lo:hi].strip() == "—" for lo, hi in cols.values())
        assert "✖ GPU is lost" in rows["row-1"].render().plain
        # The throttled one: its reason in words and the SM clock that proves it.
        assert "⚠ HW thermal" in rows["row-0"].render().plain
        lo, hi = cols["clock_sm_mhz"]
        assert lines["row-0"][lo:hi].strip() == "945/1980MHz"
        assert lines["row-2"][slice(*cols["util_gpu_pct"])].strip().endswith("%")
        # Every GPU is on screen (none pushed below the fold), with its name where the
        # row has room for it (one-line rows at 80 columns: the index only).
        area = app.query_one(GpuArea)
        assert area.max_scroll_y == 0
        assert all(r.region.bottom <= area.region.bottom for r in rows.values())
        named = area.row_lines == 2 or size[0] >= MEDIUM_COLUMNS
        for i in range(n):
            pattern = rf"^ ?{i} A100-SXM4-80GB" if named else rf"^ ?{i}  +\d+%"
            assert re.search(pattern, text, re.M) or i == 1, i
        assert re.search(r"^ ?1 " + ("A100-SXM4-80GB" if named else " +—"), text, re.M)
        # The history: a few cells of GPU util on a 0–100 % scale, its window in the header.
        assert "−5m" in header
        assert re.search("[▁▂▃▄▅▆▇█]{2}", lines["row-2"])  # 60 s of 5 min


async def test_a_two_line_row_says_the_state_in_words_and_the_gpm_verdict() -> None:
    app, sampler = make_app()

    def make(t: int):
        return snap(t, [throttled(0, t), gpu(1, t, util_gpu_pct=97, sm_active_pct=22.0,
                                             tensor_active_pct=0.0)])

    async with app.run_test(size=(120, 40)) as pilot:
        feed(sampler, 0, 30, make)
        await pilot.pause()
        await pilot.press("c")
        feed(sampler, 30, 31, make)
        await pilot.pause()
        area = app.query_one(GpuArea)
        assert area.compact and area.row_lines == 2
        row0 = app.query_one("#row-0", GpuRow).render().plain.split("\n")
        row1 = app.query_one("#row-1", GpuRow).render().plain.split("\n")
        assert row0[1].strip().startswith("⚠ THROTTLED: HW thermal slowdown since")
        assert "◇ SMs mostly idle" in row1[0]  # the short marker in the state column
        assert "busy 97 % but SMs 22 % active, tensor cores idle" in row1[1]
        assert re.search(r"97% .* 22% ", row1[0])  # SM active beside GPU util


def test_the_state_sentence_keeps_whole_clauses_never_half_a_word() -> None:
    from gputui.ui.widgets.gpu_row import _fit_clauses

    words = ("⚠ THROTTLED: HW thermal slowdown since 07:43:48 (2s), SM clock 1410→945 MHz, "
             "94 °C ≥ slowdown 90 °C")
    assert _fit_clauses(words, 200) == words
    assert _fit_clauses(words, 80) == ("⚠ THROTTLED: HW thermal slowdown since 07:43:48 (2s), "
                                       "SM clock 1410→945 MHz")
    assert _fit_clauses(words, 58) == "⚠ THROTTLED: HW thermal slowdown since 07:43:48 (2s)"
    assert _fit_clauses(words, 20) == "⚠ THROTTLED: HW the…"  # only a too-wide first clause


async def test_two_line_rows_at_80x24_show_the_throttle_clause_uncut() -> None:
    app, sampler = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        feed(sampler, 0, 8, lambda t: snap(t, [throttled(0, t) if t > 3 else gpu(0, t),
                                              gpu(1, t)]))
        await pilot.pause()
        text = screen_text(app)
        line = next(x for x in text.splitlines() if "THROTTLED" in x)
        assert "HW thermal slowdown since" in line and "…" not in line


async def test_a_theme_change_redraws_the_rows_in_the_new_colours() -> None:
    # The rows keep their drawn lines and styles between ticks: a theme change must
    # still reach them, like every other widget.
    app, sampler = make_app()
    async with app.run_test(size=(160, 50)) as pilot:
        feed(sampler, 0, 6, eight)
        await pilot.pause()
        row = app.query(GpuRow).first()

        def name_style() -> object:
            return next(seg.style for seg in row.render_line(0) if "A100" in seg.text)

        dark = name_style()
        assert app.theme != "gputui-light"
        app.theme = "gputui-light"
        await pilot.pause()
        light = name_style()
        assert light != dark
        assert light == row.get_component_rich_style("gpurow--name")
