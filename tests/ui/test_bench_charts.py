"""The benchmark screen's charts: throughput over the timed loop and the
sweep's throughput against p90 latency, as textual-plotext line charts. Fed a run's
worker events through the app's messages; asserts on what each chart is handed."""

from __future__ import annotations

from datetime import timedelta

from textual_plotext import PlotextPlot

from gputui.bench import events
from gputui.bench.attribution import ThroughputPoint
from gputui.bench.request import make_request
from gputui.ui.bench_messages import RunEvent
from gputui.ui.bench_session import LiveRun, Planned, request_label
from gputui.ui.widgets.bench_chart import SweepChart, ThroughputChart, sweep_curve, window_ends
from tests.ui.bench_helpers import SIZE, open_bench
from tests.ui.helpers import T0, gpu, screen_text, snap
from tests.ui.test_app import make_app


def _progress(step: int, rate: float) -> events.Progress:
    return events.Progress(step=step, of=None, elapsed_s=0.5 * step, duration_s=None,
                           throughput=rate, unit="images/s", window_s=0.5, samples=10)


def _point(batch: int, rate: float | None, p90_ms: float | None,
           ok: bool = True) -> events.Point:
    step = {"p50": p90_ms, "p90": p90_ms, "p99": p90_ms} if p90_ms is not None else None
    return events.Point(label=f"batch {batch}", batch_size=batch, throughput=rate,
                        unit="images/s", ok=ok, error=None if ok else "out of memory",
                        extra={"step_time_ms": step})


def _run(app, spec):  # type: ignore[no-untyped-def]
    session = app.bench
    live = LiveRun(Planned(spec, request_label(spec), id="fed"), started_wall=T0)
    session.lives["fed"] = live
    app.post_message(RunEvent("fed", events.Started(pid=1, benchmark=spec.benchmark,
                                                    spec=spec.to_dict(), env={"device": "cpu"}),
                                     None))
    return session, live


async def test_throughput_chart_receives_each_window_against_seconds_into_the_loop() -> None:
    app, sampler = make_app()
    async with app.run_test(size=SIZE) as pilot:
        sampler.ingest(snap(0, [gpu(0)]))
        screen = await open_bench(pilot)
        chart = screen.query_one(ThroughputChart)
        assert chart.series.throughput == () and chart.vmax is None
        _run(app, make_request("cnn-train", device="cpu"))
        rates = [120.0, 180.0, 150.0, 90.0]
        for i, rate in enumerate(rates, 1):
            point = ThroughputPoint(T0 + timedelta(seconds=0.5 * i), 0.5, rate)
            app.post_message(RunEvent("fed", _progress(i, rate), point))
        await pilot.pause()
        await pilot.pause()
        s = chart.series
        assert s.throughput == tuple(rates)
        assert s.x_s == (0.5, 1.0, 1.5, 2.0)  # each window's end, s into the timed loop
        assert s.unit == "images/s" and s.throttled == (False,) * 4
        assert chart.vmax is not None and chart.vmax >= max(rates)
        text = screen_text(app)
        assert "throughput (images/s)" in text and "s into the timed loop" in text


async def test_sweep_chart_plots_throughput_against_p90_per_batch() -> None:
    app, sampler = make_app()
    async with app.run_test(size=SIZE) as pilot:
        sampler.ingest(snap(0, [gpu(0)]))
        screen = await open_bench(pilot)
        sweep = screen.query_one(SweepChart)
        assert not sweep.display  # no sweep: no empty chart taking rows
        _run(app, make_request("cnn-infer", device="cpu", sweep=True))
        for b, rate, p90 in ((1, 100.0, 10.0), (2, 180.0, 11.0), (4, 300.0, 13.5)):
            app.post_message(RunEvent("fed", _point(b, rate, p90), None))
        app.post_message(RunEvent("fed", _point(8, None, None, ok=False), None))
        await pilot.pause()
        await pilot.pause()
        curve = sweep.curve
        assert curve.batch == (1, 2, 4)  # the failed batch 8 is not a point on the curve
        assert curve.p90_ms == (10.0, 11.0, 13.5)
        assert curve.throughput == (100.0, 180.0, 300.0)
        assert curve.latency_label == "p90 step time (ms)" and curve.unit == "images/s"
        assert sweep.display and isinstance(sweep, PlotextPlot)


def test_sweep_curve_prefers_a_request_latency_and_window_ends_add_up() -> None:
    p = events.Point(label="batch 1", batch_size=1, throughput=50.0, unit="q/s",
                     latency_ms={"p50": 4.0, "p90": 5.0, "p99": 9.0})
    curve = sweep_curve([p])
    assert curve.p90_ms == (5.0,) and curve.latency_label == "p90 latency (ms)"
    assert window_ends([0.5, 0.25, 1.0]) == [0.5, 0.75, 1.75]
