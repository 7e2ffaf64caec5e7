"""NVML opened while Textual starts: the monitor is built with the GPUs of its first
reading and shows them at once; the reading is recorded and alerted like any other, and
the next one comes an interval later (not a second one straight away)."""

from __future__ import annotations

import json
from pathlib import Path

from gputui.telemetry.sampler_opener import SamplerOpener
from gputui.ui.app import GputuiApp
from gputui.ui.options import AppOptions
from gputui.ui.widgets.gpu_panel import GpuPanel
from tests.ui.helpers import screen_text


def _open(fake_nvml: object, scenario: dict[str, object], **kw: object) -> SamplerOpener:
    fake_nvml.use(scenario, frozen_time=10.0)  # type: ignore[attr-defined]
    opener = SamplerOpener(interval=1.0, profile=str(kw.get("profile", "monitor"))).start()
    assert opener._thread is not None
    opener._thread.join(30)
    assert not opener._thread.is_alive(), "NVML did not open"
    return opener


async def test_the_first_reading_is_on_the_first_screen(fake_nvml: object,
                                                         tmp_path: Path) -> None:
    opener = _open(fake_nvml, {"device_count": 2, "gpu.1.temp_c": 93,
                               "gpu.0.util_gpu": 37})
    record = tmp_path / "run.jsonl"
    app = GputuiApp(AppOptions(record_path=str(record)), opener=opener)
    async with app.run_test(size=(120, 40)) as pilot:
        # Built with the screen: one panel per GPU, already showing the reading.
        panels = list(app.screen.query(GpuPanel))
        assert [p.id for p in panels] == ["gpu-0", "gpu-1"]
        text = screen_text(app)
        assert "GPU 0" in text and "GPU 1" in text and "A100" in text
        assert "37%" in text
        assert "Opening NVML" not in text
        await pilot.pause(0.3)
        # One reading so far (readings are numbered from 1): the next is an interval away.
        frame = app.latest_frame
        assert frame is not None and frame.snapshot.seq == 1
        # The hot GPU's alert is raised from that reading, as from any other.
        assert any("GPU 1" in a.message for a in frame.alerts)
        await pilot.pause(1.2)
        frame = app.latest_frame
        assert frame is not None
        seq = frame.snapshot.seq
        assert seq >= 2  # and the sampler's own ticks follow
    header, *snapshots = record.read_text(encoding="utf-8").splitlines()
    assert "gputui_recording" in json.loads(header)
    # Every reading is recorded, the first one included.
    assert len(snapshots) >= seq and json.loads(snapshots[0])["time"]
