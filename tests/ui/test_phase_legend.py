"""The training phase legend wraps instead of cutting "▚ optimiz" at the pane's edge."""

from __future__ import annotations

import pytest
from textual.app import App, ComposeResult

from gputui.ui.widgets.bench_chart import PhaseBar

PHASES = {"data": 0.4, "h2d": 1.9, "forward": 8.1, "backward": 14.6, "optimizer": 1.6}


class OneBar(App[None]):
    def compose(self) -> ComposeResult:
        yield PhaseBar(id="phases")


@pytest.mark.parametrize("width", (36, 80, 200))
async def test_every_phase_of_the_legend_is_shown_whole(width: int) -> None:
    app = OneBar()
    async with app.run_test(size=(width, 12)) as pilot:
        bar = app.query_one(PhaseBar)
        bar.set_phases(PHASES)
        await pilot.pause()
        lines = [bar.render_line(y).text for y in range(bar.size.height)]
        legend = "\n".join(lines[1:])
        for name, ms in (("data", "0.4 ms"), ("h2d", "1.9 ms"), ("forward", "8.1 ms"),
                         ("backward", "14.6 ms"), ("optimizer", "1.6 ms")):
            assert f"{name} {ms}" in legend, (width, lines)
        assert "step 26.6 ms:" in lines[1]
        assert all(len(line) <= width for line in lines)
        if width >= 200:
            assert bar.size.height == 2  # everything on one legend line when it fits
