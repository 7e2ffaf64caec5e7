"""Partial updates written from the first changed segment, with a style sequence only
where the style changes: ticks of 8 GPUs write less than half the bytes
of Textual's own writer, and applying them to a screen gives exactly the characters
and styles that a full repaint draws."""

from __future__ import annotations

import re
from typing import Any

from rich.cells import cell_len
from textual._compositor import ChopsUpdate

from gputui.ui import term_output
from tests.ui.helpers import gpu, proc, snap
from tests.ui.test_app import make_app

TOKEN = re.compile(r"\x1b\[(\d+);(\d+)H|\x1b\[([0-9;]*)m|\n|[^\x1b\n]")
WIDTH, HEIGHT = 160, 50


def apply(screen: list[list[str]], data: str) -> None:
    """A minimal terminal: cursor moves, SGR state and printed characters; each cell
    holds its character and the SGR codes in effect when it was printed (both writers
    only ever reset, or set a style's full codes from a reset)."""
    y = x = 0
    sgr = ""
    for m in TOKEN.finditer(data):
        tok = m.group(0)
        if m.group(1):
            y, x = int(m.group(1)) - 1, int(m.group(2)) - 1
        elif m.group(3) is not None:
            sgr = "" if m.group(3) in ("", "0") else m.group(3)
        elif tok == "\n":
            continue
        else:
            screen[y][x] = tok + "\0" + sgr
            for k in range(1, cell_len(tok)):
                screen[y][x + k] = ""
            x += max(1, cell_len(tok))


def blank() -> list[list[str]]:
    return [[" "] * WIDTH for _ in range(HEIGHT)]


def eight(t: int):  # type: ignore[no-untyped-def]
    gs = [gpu(i, t, util_gpu_pct=float((t * 7 + i * 13) % 100),
              power_w=300.0 + (t * 3 + i) % 90, temp_c=50 + (t + i) % 30,
              clock_sm_mhz=1500 + (t * 11 + i) % 400) for i in range(8)]
    return snap(t, gs, [proc(10000 + i, i, 30) for i in range(8)])


async def test_ticks_write_less_and_paint_the_same_screen() -> None:
    app, sampler = make_app()
    updates: list[Any] = []
    async with app.run_test(size=(WIDTH, HEIGHT)) as pilot:
        assert ChopsUpdate.render_segments is term_output.render_segments  # installed
        for t in range(12):
            sampler.ingest(eight(t))
            await pilot.pause()
        display = app._display

        def keep(screen: Any, renderable: Any) -> None:
            if isinstance(renderable, ChopsUpdate):
                updates.append(renderable)
            display(screen, renderable)

        app._display = keep  # type: ignore[method-assign]
        await pilot.pause()
        updates.clear()
        compositor = app.screen._compositor
        ours = blank()
        apply(ours, compositor.render_update(full=True).render_segments(app.console))
        for t in range(12, 20):
            sampler.ingest(eight(t))
            await pilot.pause()
        assert len(updates) >= 8
        for u in updates:
            apply(ours, term_output.render_segments(u, app.console))
        full = blank()
        apply(full, compositor.render_update(full=True).render_segments(app.console))
        assert ["".join(r) for r in ours] == ["".join(r) for r in full]
        assert any("\0" in c and not c.endswith("\0") for r in full for c in r)  # styled
        new_bytes = sum(len(term_output.render_segments(u, app.console)) for u in updates)
        old_bytes = sum(len(term_output.TEXTUAL_WRITER(u, app.console)) for u in updates)
        assert new_bytes < old_bytes / 2


def test_from_cell_starts_at_the_cell_and_keeps_wide_characters_whole() -> None:
    from rich.segment import Segment
    from textual.strip import Strip

    strip = Strip([Segment(" 0 "), Segment("名前"), Segment(" 85% ")])  # 名, 前: 2 cells
    start, rest = term_output.from_cell(strip, 10, 13)  # cell 13: the start of 名
    assert start == 13 and rest.text == "名前 85% "
    start, rest = term_output.from_cell(strip, 10, 14)  # the right half of 名
    assert start == 13 and rest.text == "名前 85% "
    start, rest = term_output.from_cell(strip, 10, 18)  # inside " 85% "
    assert start == 18 and rest.text == "85% " and rest.cell_length == 4
