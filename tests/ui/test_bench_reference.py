"""The bench screen shows a finished run's published-reference ratio and the GPU's clocks
over its timed loop, from a stub worker's result."""

from __future__ import annotations

import os
import sys

import pytest
from textual.widgets import Input

from tests.ui.bench_helpers import REPO, SIZE, make_app, open_bench, pick, wait_until
from tests.ui.helpers import screen_text

pytestmark = pytest.mark.usefixtures("data_dir")

STUB = """
import json, os, sys, time
from gputui.bench import events
spec = json.loads(sys.argv[sys.argv.index("--spec-json") + 1])
t0 = time.monotonic()
def emit(ev):
    print(events.encode(ev, time.monotonic() - t0), flush=True)
emit(events.Started(os.getpid(), spec["benchmark"], spec,
                    {"device": "cuda:0", "device_name": "NVIDIA A100-SXM4-80GB"}))
doc = {"benchmark": "cnn-train", "model": "resnet50", "precision": "fp16", "batch_size": 256,
       "status": "ok", "device": "cuda:0", "device_name": "NVIDIA A100-SXM4-80GB",
       "throughput": {"value": 2321.8, "median": 2321.8, "mean": 2321.8, "unit": "images/s",
                      "p10": 2300.0, "p90": 2330.0},
       "settings": {"image_size": 224, "channels_last": True, "nproc": 1, "data": "host"},
       "extra": {"gpu_window": {"samples": 40, "window_s": 10.0, "clock_sm_mhz_mean": 1410.0,
                                "clock_sm_mhz_min": 1395.0, "clock_mem_mhz_mean": 1593.0,
                                "power_w_mean": 380.0, "power_w_max": 402.0,
                                "power_limit_w": 400.0, "temp_c_max": 64.0,
                                "throttle_mask": 0}}}
emit(events.ResultReady(doc))
"""


async def test_finished_run_shows_reference_ratio_and_gpu_window() -> None:
    app, _sampler = make_app()
    async with app.run_test(size=SIZE) as pilot:
        session = app.bench
        session.worker_cmd = [sys.executable, "-c", STUB]
        session.env = {**os.environ, "PYTHONPATH": str(REPO)}
        screen = await open_bench(pilot)
        await pick(pilot, screen, "cnn-train")
        screen.query_one("#f-device", Input).value = "cuda:0"
        await pilot.press("enter")
        await wait_until(pilot, lambda: session.last is not None, "the result")
        await wait_until(pilot, lambda: "vs published" in screen_text(app), "the ratio")
        text = screen_text(app)
        assert "vs published: 0.94× NVIDIA DeepLearningExamples, A100 80GB, AMP, batch 256" \
            in text
        assert "GPU during run: SM 1,410 MHz mean (min 1,395 MHz)" in text
        assert "input data: pinned host buffers, copied each step" in text
