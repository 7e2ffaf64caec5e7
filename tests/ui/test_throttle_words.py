"""The throttle state is never cut: the full panel's sentence wraps onto
more rows at any width, and the compact label keeps every reason recognisable."""

from __future__ import annotations

import pytest
from rich.text import Text

from gputui.ui.widgets.gpu_panel import GpuPanel
from gputui.ui.widgets.gpu_view import short_reasons, state
from tests.ui.helpers import T0, feed, gpu, snap, throttled
from tests.ui.test_app import make_app

HEAD = "⚠ THROTTLED: HW thermal slowdown since 09:26:56 ("
TAIL = "s), SM clock 1980→945 MHz, 88 °C ≥ slowdown 85 °C"


@pytest.mark.parametrize(("size", "n"), [((80, 24), 1), ((120, 40), 4), ((200, 60), 4),
                                         ((200, 60), 8)])
async def test_the_throttle_sentence_wraps_and_is_never_cut(size: tuple[int, int],
                                                            n: int) -> None:
    app, sampler = make_app()
    async with app.run_test(size=size) as pilot:
        feed(sampler, 0, 3, lambda t: snap(t, [gpu(i, t) for i in range(n)]))
        feed(sampler, 3, 51, lambda t: snap(t, [throttled(0, t)]
                                        + [gpu(i, t) for i in range(1, n)]))
        await pilot.pause()
        sampler.ingest(snap(50, [throttled(0, 50)] + [gpu(i, 50) for i in range(1, n)]))
        await pilot.pause()
        await pilot.pause()
        if not app.query(GpuPanel) or not app.query(GpuPanel).first().display:
            await pilot.press("c")  # compact rows at this size: ask for the full panels
            sampler.ingest(snap(51, [throttled(0, 51)] + [gpu(i, 51) for i in range(1, n)]))
            await pilot.pause()
            await pilot.pause()
        panels = list(app.query(GpuPanel))
        assert panels and panels[0].display
        line = panels[0].part_region("state")
        sentence = panels[0].state_text
        assert sentence.startswith(HEAD) and sentence.endswith(TAIL), sentence
        needed = len(Text(sentence).wrap(app.console, line.width))
        assert line.height >= needed, (line, needed)
        assert panels[0].region.bottom > line.bottom  # inside its panel's border


def test_compact_labels_keep_each_reason_whole() -> None:
    assert short_reasons(0x48) == "HW thermal, HW slowdown"
    assert short_reasons(0x84) == "HW power brake, SW power cap"
    assert short_reasons(0x20 | 0x10) == "SW thermal, sync boost"
    g = gpu(0, 0, throttle_mask=0x48, clock_sm_mhz=600)
    assert state(g, None, T0).short == "⚠ HW thermal, HW slowdown"


# --------------------------------------------------------------------------- item 4


def test_a_hot_throttling_gpu_is_one_toast_worded_from_its_state() -> None:
    from gputui.telemetry.alerts import AlertEngine, toasts
    from gputui.telemetry.throttle import ThrottleTracker

    engine, tracker = AlertEngine(), ThrottleTracker()
    raised_by_tick = []
    for t, g in ((0, gpu(0, 0, temp_c=70)), (1, throttled(0, 1))):
        s = snap(t, [g])
        tracker.update(s.gpus, s.time, s.mono)
        raised = engine.update(s, tracker.ongoing())
        raised_by_tick.append([a.kind for a in toasts(raised, engine.active())])
        both = [a.kind for a in raised]
    assert both == ["throttle", "near_slowdown"]  # both listed on the alerts screen...
    assert raised_by_tick == [[], ["throttle"]]  # ...one toast
    hot = engine.get("near_slowdown:0")
    assert hot is not None and "clocks will drop" not in hot.message
    assert hot.message.endswith("its clocks are already held down (thermal slowdown)")


async def test_one_toast_when_a_gpu_gets_hot_and_throttles() -> None:
    from tests.ui.helpers import spy_notifications

    app, sampler = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        seen = spy_notifications(app)
        feed(sampler, 0, 3, lambda t: snap(t, [gpu(0, t), gpu(1, t)]))
        feed(sampler, 3, 6, lambda t: snap(t, [throttled(0, t), gpu(1, t)]))
        await pilot.pause()
        assert len(seen) == 1 and "HW thermal slowdown" in seen[0][1], seen
        await pilot.press("a")
        await pilot.pause()
        from textual.widgets import DataTable

        active = app.screen.query_one("#active", DataTable)
        kinds = [str(active.get_row_at(i)[2]) for i in range(active.row_count)]
        assert kinds == ["throttle", "near_slowdown"]
