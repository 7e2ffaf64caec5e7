"""`h`: one GPU's history as labelled line charts on fixed scales with a time axis,
at 80×24, 120×40 and 200×60."""

from __future__ import annotations

import math

import pytest
from textual_plotext import PlotextPlot

from gputui.ui.screens.history import CHARTS, HistoryScreen, segments, time_ticks
from gputui.ui.widgets.gpu_panel import GpuPanel
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
        assert screen.gpu_index == 0 and screen.windows == (60, 300, 900, 3600)
        text = screen_text(app)
        assert "History · GPU 0 · NVIDIA A100-SXM4-80GB · last 5 min" in text
        plots = list(screen.query(PlotextPlot))
        assert len(plots) == 4 and all(p.region.area for p in plots)
        for chart in CHARTS:
            _times, values = screen.history.window(0, chart.metric, 300)
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


def _varied(t: int):  # type: ignore[no-untyped-def]
    """Two GPUs whose every metric differs, and changes over the hour."""
    return snap(t, [gpu(0, t, util_gpu_pct=float(t % 100), power_w=300.0 + t % 50),
                    gpu(1, t, util_gpu_pct=float(99 - t % 100), power_w=600.0 - t % 50,
                        temp_c=80.0, clock_sm_mhz=1200)])


def _points(screen: HistoryScreen, metric: str) -> list[tuple[float, float]]:
    return [(x, y) for xs, ys in screen.drawn[metric] for x, y in zip(xs, ys, strict=True)]


async def test_sixty_minute_window_holds_an_hour_and_keys_change_what_is_plotted() -> None:
    app, sampler = make_app()  # 1 Hz
    async with app.run_test(size=(160, 50)) as pilot:
        feed(sampler, 0, 65 * 60, _varied)  # 65 minutes at 1 Hz: more than the view shows
        await pilot.pause()
        await pilot.press("h")
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, HistoryScreen) and screen.seconds == 300
        five_min = _points(screen, "util_gpu_pct")
        assert len(five_min) == 301 and five_min[0][0] == -5.0 and five_min[-1][0] == 0.0
        for _ in range(2):  # 5 → 15 → 60 min
            await pilot.press("w")
            await pilot.pause()
        assert screen.seconds == 3600 and "last 60 min" in screen_text(app)
        hour = _points(screen, "util_gpu_pct")
        # One point a second for the whole hour, from 60 minutes ago to now.
        assert len(hour) == 3601 and hour[0][0] == -60.0 and hour[-1][0] == 0.0
        last = 65 * 60 - 1
        assert [y for _, y in hour] == [float(t % 100) for t in range(last - 3600, last + 1)]
        assert screen.ticks == time_ticks(3600)
        assert screen.ticks[1] == ["60m ago", "45m ago", "30m ago", "15m ago", "now"]
        gpu0 = {m: _points(screen, m) for m in ("util_gpu_pct", "power_w", "temp_c",
                                               "clock_sm_mhz")}
        await pilot.press("n")
        await pilot.pause()
        assert screen.gpu_index == 1 and "GPU 1" in screen_text(app)
        for metric, before in gpu0.items():
            after = _points(screen, metric)
            _t, values = screen.history.window(1, metric, 3600)
            assert [y for _, y in after] == list(values) != [y for _, y in before], metric
        await pilot.press("w")  # wraps round to the 1-minute window
        await pilot.pause()
        assert screen.seconds == 60 and len(_points(screen, "power_w")) == 61
        assert screen.ticks[1] == ["60s ago", "45s ago", "30s ago", "15s ago", "now"]
        await pilot.press("p")  # back to GPU 0
        await pilot.pause()
        assert screen.gpu_index == 0
        assert [y for _, y in _points(screen, "power_w")] == [
            300.0 + t % 50 for t in range(last - 60, last + 1)]


def test_time_axis_reads_how_long_ago_at_round_steps() -> None:
    assert time_ticks(300) == ([-5.0, -4.0, -3.0, -2.0, -1.0, 0.0],
                               ["5m ago", "4m ago", "3m ago", "2m ago", "1m ago", "now"])
    assert time_ticks(900)[1] == ["15m ago", "10m ago", "5m ago", "now"]


async def test_power_spikes_between_ticks_are_drawn_as_the_max_within_each_tick() -> None:
    """A 100 ms spike to 690 W between 1 s readings of ~250 W is caught by the
    driver's samples (power_w_max): the history view draws it over the readings, and the
    panel's PWR sparkline draws the highest draw of each tick, not the readings alone."""
    def spiky(t: int):  # type: ignore[no-untyped-def]
        spike = 690.0 if t % 10 == 5 else None
        g = gpu(0, t, power_w=250.0, power_w_min=240.0, power_w_max=spike or 260.0)
        return snap(t, [g])

    app, sampler = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        feed(sampler, 0, 60, spiky)
        await pilot.pause()
        panel = app.query_one(GpuPanel)
        assert panel.spark_series("power_w") == "power_w_peak"
        await pilot.press("h")
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, HistoryScreen)
        assert screen.history.window(0, "power_w_peak", 60)[1][-55] == 690.0  # t=5
        readings = [y for _, ys in screen.drawn["power_w"] for y in ys]
        peaks = [y for _, ys in screen.drawn["power_w_peak"] for y in ys]
        assert set(readings) == {250.0}
        assert max(peaks) == 690.0 and peaks.count(690.0) == 6 and min(peaks) == 260.0


async def test_no_sub_second_samples_no_peak_line() -> None:
    app, sampler = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        feed(sampler, 0, 30, lambda t: snap(t, [gpu(0, t)]))
        await pilot.pause()
        await pilot.press("h")
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, HistoryScreen)
        assert screen.drawn["power_w"] and screen.drawn["power_w_peak"] == []
