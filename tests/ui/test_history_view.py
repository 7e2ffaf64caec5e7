"""`h`: one GPU's history as labelled line charts on fixed scales with a time axis
(#14 item 2), at 80×24, 120×40 and 200×60."""

from __future__ import annotations

import math

import pytest
from textual_plotext import PlotextPlot

from gputui.ui.screens.history import CHARTS, HistoryScreen, segments
from tests.ui.helpers import feed, gpu, lost, screen_text, snap, throttled
from tests.ui.test_app import make_app

SIZES = ((80, 24), (120, 40), (200, 60))


def _two_gpus(t: int):  # type: ignore[no-untyped-def]
    first = gpu(0, t) if t < 60 else throttled(0, t)
    second = gpu(1, t) if not 40 <= t < 50 else lost(1)  # lost for 10 s: a gap
    return snap(t, [first, second])


@pytest.mark.parametrize("size", SIZES)
async def test_history_view_draws_each_metric_of_the_chosen_gpu(size: tuple[int, int]) -> None:
    app, sampler = make_app()
    async with app.run_test(size=size) as pilot:
        feed(sampler, 0, 100, _two_gpus)
        await pilot.pause()
        await pilot.press("h")
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, HistoryScreen)
        assert screen.gpu_index == 0 and screen.windows == (60, 300, 900)
        text = screen_text(app)
        assert "History · GPU 0 · NVIDIA A100-SXM4-80GB · last 5 min" in text
        plots = list(screen.query(PlotextPlot))
        assert len(plots) == 4 and all(p.region.area for p in plots)
        for chart in CHARTS:
            _times, values = app.history.window(0, chart.metric, 300)
            drawn = [y for _, ys in screen.drawn[chart.metric] for y in ys]
            assert drawn == [v for v in values if not math.isnan(v)], chart.metric
            xs = [x for xs, _ in screen.drawn[chart.metric] for x in xs]
            assert xs[-1] == 0.0 and -5.0 <= xs[0] < -1.5  # minutes ago, 100 s of data
        # The SM clock drops at t=60 (thermal slowdown): the chart shows both levels.
        clocks = [y for _, ys in screen.drawn["clock_sm_mhz"] for y in ys]
        assert max(clocks) == 1980 and min(clocks) == 945
        await pilot.press("n")  # the next GPU: lost for 10 s, so its line has a gap
        await pilot.pause()
        assert screen.gpu_index == 1 and len(screen.drawn["util_gpu_pct"]) == 2
        await pilot.press("w")
        await pilot.pause()
        assert screen.seconds == 900 and "last 15 min" in screen_text(app)
        await pilot.press("escape")
        await pilot.pause()
        assert not isinstance(app.screen, HistoryScreen)


def test_segments_split_at_gaps_and_count_minutes_back() -> None:
    nan = math.nan
    runs = segments([0.0, 30.0, 60.0, 90.0, 120.0], [1.0, 2.0, nan, 4.0, 5.0], end=120.0)
    assert runs == [([-2.0, -1.5], [1.0, 2.0]), ([-0.5, 0.0], [4.0, 5.0])]
    assert segments([], [], end=0.0) == []
