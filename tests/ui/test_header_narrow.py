"""At 80 columns during a benchmark the header keeps the driver and CUDA versions whole:
the right side gives up its least useful words first."""

from __future__ import annotations

import pytest
from textual.widgets import Input

from tests.ui.bench_helpers import make_app, open_bench, use_fake_worker, wait_until
from tests.ui.helpers import gpu, screen_text, snap

pytestmark = pytest.mark.usefixtures("data_dir")


@pytest.mark.parametrize("size", ((80, 24), (120, 40)))
async def test_header_keeps_the_driver_version_during_a_run(size: tuple[int, int]) -> None:
    app, sampler = make_app()
    async with app.run_test(size=size) as pilot:
        sampler.ingest(snap(0, [gpu(0)]))
        session = use_fake_worker(app, "term_partial")
        screen = await open_bench(pilot)
        screen.query_one("#f-device", Input).value = "cpu"
        await pilot.press("ctrl+r")
        await wait_until(pilot, lambda: session.current is not None
                         and len(session.current.points) >= 2, "progress")
        await pilot.press("escape")
        sampler.ingest(snap(1, [gpu(0, 1)]))
        await pilot.pause()
        header = screen_text(app).splitlines()[0]
        assert "driver 550.54.15  CUDA 12.4" in header, header
        assert "▶" in header and "…" not in header, header
        assert len(header.rstrip()) <= size[0]
        if size[0] >= 120:
            assert "every 1s" in header and "▶ bench " in header
        await pilot.press("b", "x")
        await wait_until(pilot, lambda: session.last is not None, "the cancelled run")


@pytest.mark.parametrize("size", ((80, 24), (120, 40), (200, 60)))
async def test_without_gpus_the_host_box_is_as_tall_as_its_content(size: tuple[int, int]) -> None:
    from gputui.telemetry.sampler import Sampler
    from gputui.ui.widgets.host_panel import HostPanel
    from tests.ui.test_app import make_app as make_monitor

    reason = "NVML library not found — is the NVIDIA driver installed?"
    sampler = Sampler(interval=1.0, nvml=None, nvml_error=reason)
    app, _ = make_monitor(sampler)
    async with app.run_test(size=size) as pilot:
        sampler.ingest(snap(0, [], nvml_error=reason))
        await pilot.pause()
        await pilot.pause()
        assert reason in screen_text(app)
        box = app.query_one(HostPanel).region
        assert box.width == size[0]  # the whole width, at 80 columns too
        assert box.height <= 10, "a host box of mostly empty rows"
        text = screen_text(app)
        for label in ("CPU", "RAM", "SWAP", "LOAD"):
            assert label in text
