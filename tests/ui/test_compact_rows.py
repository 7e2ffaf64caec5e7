"""Compact GPU rows (#14 item 1, in part): every row shows the same fields in the same
columns whatever its state, and the SM clock (the proof of throttling) stays at 80."""

from __future__ import annotations

import re

import pytest

from gputui.ui.widgets.gpu_panel import GpuRow
from tests.ui.helpers import feed, gpu, lost, snap, throttled
from tests.ui.test_app import make_app

LABELS = ("GPU", "MEMC", "VRAM", "PWR", "TEMP", "SM")


def _fields(row: str) -> list[tuple[str, int]]:
    return [(m.group(1), m.start()) for m in re.finditer(r" (GPU|MEMC|VRAM|PWR|TEMP|SM) ", row)]


@pytest.mark.parametrize("size", ((80, 24), (120, 40), (200, 60)))
async def test_compact_rows_line_up_and_keep_the_sm_clock(size: tuple[int, int]) -> None:
    app, sampler = make_app()
    async with app.run_test(size=size) as pilot:
        feed(sampler, 0, 60, lambda t: snap(t, [throttled(0, t) if t > 3 else gpu(0, t),
                                               lost(1), gpu(2, t), gpu(3, t)]))
        await pilot.pause()
        if not app.query(GpuRow) or not app.query(GpuRow).first().display:
            await pilot.press("c")
            feed(sampler, 60, 61, lambda t: snap(t, [throttled(0, t), lost(1), gpu(2, t),
                                                   gpu(3, t)]))
            await pilot.pause()
        rows = {r.id: r.render().plain for r in app.query(GpuRow)}
        throttled_row, healthy = rows["row-0"], [rows["row-2"], rows["row-3"]]
        assert "⚠ HW thermal" in throttled_row and "✖ GPU is lost" in rows["row-1"]
        layout = _fields(throttled_row)
        assert [name for name, _ in layout][:1] == ["GPU"] and ("SM", layout[-1][1]) in layout
        for row in healthy:
            assert _fields(row) == layout, (throttled_row, row)  # same fields, same columns
        assert re.search(r"SM +945/1980MHz", throttled_row)
        if size[0] >= 120:
            assert [name for name, _ in layout] == list(LABELS)
