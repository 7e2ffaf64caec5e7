"""The bench screen's result view shows the GPU's state over the timed window (sampled by
the runner, here from the fake NVML), the throttled flag, and --repeat's trials."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.bench.test_throttle_window import SCENARIO
from tests.ui.bench_helpers import SIZE, make_app, open_bench, use_fake_worker, wait_until
from tests.ui.helpers import screen_text

pytestmark = pytest.mark.usefixtures("data_dir")


async def test_result_view_shows_window_throttling_and_trials(fake_nvml: Any) -> None:
    fake_nvml.use(SCENARIO, frozen_time=3.0)  # power-capped at 1,200 MHz the whole run
    app, _sampler = make_app()  # the monitor's sampler ticks at 1 s: the runner adds 2 Hz
    async with app.run_test(size=SIZE) as pilot:
        session = use_fake_worker(app, "cuda_timed")
        session.env = {**(session.env or {}), "FAKE_RESULT_PATCH": json.dumps(
            {"trials": [98.0, 100.0, 103.0],
             "spread": {"median": 100.0, "min": 98.0, "max": 103.0}})}
        screen = await open_bench(pilot)
        await pilot.press("ctrl+r")
        await wait_until(pilot, lambda: session.last is not None, "the result")
        await wait_until(pilot, lambda: "GPU over timed window" in screen_text(app),
                         "the window line")
        text = screen_text(app)
        assert "GPU over timed window: SM 1,200 MHz mean (min 1,200 MHz)" in text
        assert "⚠ throttled 100 %" in text
        assert "repeats: 3 trials: 98.00, 100.0, 103.0 — median 100.0" in text
        # The callout goes by the runner's readings, not the (empty) monitor episode log.
        assert "throttled 100 % of the timed window" in text
        assert "no throttling" not in text
        # History flags the number too (the table reloads from disk after the save).
        await wait_until(pilot, lambda: "100.0 images/s ⚠ throttled 100 %" in screen_text(app),
                         "the flagged history row")
        assert app.bench.last is not None and screen is app.screen
