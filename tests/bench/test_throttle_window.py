"""The GPU's state over the timed window, sampled by the runner (the parent process)."""

from __future__ import annotations

import csv
import io
import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest

from gputui.bench import results_store
from gputui.bench.request import make_request
from gputui.bench.result import Result
from gputui.bench.runner import BenchRun
from gputui.bench.throttle_window import (
    Reading,
    TimedSpans,
    WindowRecorder,
    WindowStats,
    window_stats,
    window_words,
)

from .test_cli_bench import Gputui
from .test_results import make_doc

FAKE = Path(__file__).with_name("fake_worker.py")
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("GPUTUI_DATA_DIR", str(tmp_path))
    return tmp_path


def test_window_statistics_from_scripted_readings() -> None:
    # Ten readings at 2 Hz; the middle four are power-capped (0x4) at lower clocks.
    # One reading before and one after the timed span must not count.
    def r(t: float, sm: int, mem: int, w: float, c: int, mask: int) -> Reading:
        return Reading(t=t, gpu_index=0, clock_sm_mhz=sm, clock_mem_mhz=mem, power_w=w,
                       power_limit_w=400.0, temp_c=c, throttle_mask=mask)

    readings = [r(-0.5, 300, 400, 60.0, 40, 0x1)]  # idle, before the loop
    for i in range(10):
        capped = 3 <= i <= 6
        readings.append(r(i * 0.5, 1200 if capped else 1410, 1593, 400.0 if capped else 380.0,
                          85 if capped else 80, 0x4 if capped else 0x0))
    readings.append(r(5.5, 1410, 1593, 100.0, 70, 0x1))  # after the loop
    w = window_stats(readings, [(0.0, 4.5)])
    assert w is not None
    assert w.readings == 10 and w.seconds == 4.5
    assert w.clock_sm_mhz_mean == (6 * 1410 + 4 * 1200) / 10 and w.clock_sm_mhz_min == 1200
    assert w.clock_mem_mhz_mean == 1593 and w.clock_mem_mhz_min == 1593
    assert w.power_w_mean == (6 * 380 + 4 * 400) / 10 and w.power_w_max == 400
    assert w.power_limit_w == 400
    assert w.temp_c_mean == (6 * 80 + 4 * 85) / 10 and w.temp_c_max == 85
    assert w.throttle_reasons == ("sw_power_cap",)
    assert w.throttled_fraction == 0.4 and w.throttled
    text = window_words(w)
    assert text is not None and "throttled 40 % (SW power cap)" in text
    assert WindowStats.from_dict(w.to_dict()) == w


def test_idle_and_application_clock_reasons_are_not_throttling() -> None:
    readings = [Reading(t=float(i), clock_sm_mhz=1000, throttle_mask=0x1 | 0x2 | 0x100)
                for i in range(4)]
    w = window_stats(readings, [(0.0, 3.0)])
    assert w is not None and w.throttled_fraction == 0.0 and not w.throttled
    assert w.throttle_reasons == () and w.power_w_mean is None  # no power: None, not 0


def test_five_percent_is_the_flag_line() -> None:
    def frac(throttled: int, of: int) -> WindowStats:
        readings = [Reading(t=float(i), throttle_mask=0x4 if i < throttled else 0)
                    for i in range(of)]
        w = window_stats(readings, [(0.0, float(of))])
        assert w is not None
        return w

    assert not frac(1, 20).throttled  # exactly 5 %
    assert frac(2, 20).throttled  # 10 %


def test_no_reading_inside_the_window_gives_none() -> None:
    assert window_stats([Reading(t=10.0, clock_sm_mhz=1)], [(0.0, 5.0)]) is None


def test_timed_spans_follow_the_progress_events() -> None:
    spans = TimedSpans()
    spans.progress(10.5, 0.5)  # the loop began 0.5 s before this event
    spans.progress(11.0, 1.0)
    spans.progress(11.5, 1.5)
    spans.progress(13.2, 0.2)  # elapsed went back: the next trial (or point) began
    spans.progress(13.6, 0.6)
    assert spans.spans == ((10.0, 11.5), (13.0, 13.6))


SCENARIO: dict[str, Any] = {
    "device_count": 1,
    "gpu.0.name": "NVIDIA A100-SXM4-80GB",
    "gpu.0.uuid": "GPU-aaaaaaaa-0000-0000-0000-000000000000",
    "gpu.0.pci_bus_id": "00000000:3B:00.0",
    "gpu.0.power_mw": 380000, "gpu.0.power_limit_mw": 400000,
    "gpu.0.temp_c": 80, "gpu.0.clock_sm_mhz": 1410, "gpu.0.clock_sm_max_mhz": 1410,
    "gpu.0.clock_mem_mhz": 1593, "gpu.0.clock_mem_max_mhz": 1593,
    "gpu.0.throttle_reasons": "0x0",
    "gpu.0.throttle_from_s": 2, "gpu.0.throttle_until_s": 4,
    "gpu.0.during.throttle_reasons": "0x4", "gpu.0.during.clock_sm_mhz": 1200,
    "gpu.0.during.power_mw": 400000, "gpu.0.during.temp_c": 85,
}


def _scripted_window(fake_nvml: Any) -> WindowStats | None:
    """The runner's sampler (throttle profile) over ten scripted readings at 2 Hz."""
    from gputui.telemetry.sampler import Sampler

    sampler = Sampler.open(interval=0.5, process_every=1_000_000, profile="throttle")
    recorder = WindowRecorder(0)
    sampler.subscribe(recorder)
    try:
        monos = []
        for i in range(10):
            fake_nvml.set_time(0.25 + 0.5 * i)
            monos.append(sampler.tick().mono)
    finally:
        sampler.close()
    return window_stats(recorder.readings(), [(monos[0], monos[-1])])



def test_recorder_reads_the_fake_nvml_through_the_sampler(fake_nvml: Any) -> None:
    # The runner's sampler (throttle profile) fed by scripted fake NVML readings: the
    # fake clock steps 0.25 s, 0.75 s, ... 4.75 s; 2 ≤ t < 4 is power-capped.
    fake_nvml.use(SCENARIO)
    w = _scripted_window(fake_nvml)
    assert w is not None and w.readings == 10
    assert w.clock_sm_mhz_mean == (6 * 1410 + 4 * 1200) / 10 and w.clock_sm_mhz_min == 1200
    assert w.clock_mem_mhz_mean == 1593 and w.clock_mem_mhz_min == 1593
    assert w.power_w_mean == pytest.approx((6 * 380 + 4 * 400) / 10) and w.power_w_max == 400
    assert w.power_limit_w == 400
    assert w.temp_c_mean == (6 * 80 + 4 * 85) / 10 and w.temp_c_max == 85
    assert w.throttle_reasons == ("sw_power_cap",) and w.throttled_fraction == 0.4


def test_clocks_setting_reason_is_recorded_apart_from_throttling(fake_nvml: Any) -> None:
    # Application (or, where the driver reports it so, locked) clocks for the whole run:
    # reason 0x2 in every reading, the power cap (0x4) on top for 2 ≤ t < 4.
    fake_nvml.use({**SCENARIO, "gpu.0.throttle_reasons": "0x2",
                   "gpu.0.during.throttle_reasons": "0x6"})
    w = _scripted_window(fake_nvml)
    assert w is not None and w.readings == 10
    assert w.clocks_setting_fraction == 1.0
    assert w.throttled_fraction == 0.4 and w.throttle_reasons == ("sw_power_cap",)
    assert WindowStats.from_dict(w.to_dict()) == w
    assert "clocks held by an application/locked-clocks setting 100 %" in (
        window_words(w) or "")
    plain = window_stats([Reading(t=0.0, throttle_mask=0x0)], [(0.0, 1.0)])
    assert plain is not None and plain.clocks_setting_fraction == 0.0
    assert "locked" not in (window_words(plain) or "")
    # Results saved before this field load with it unknown, not 0.
    old = {k: v for k, v in w.to_dict().items() if k != "clocks_setting_fraction"}
    assert WindowStats.from_dict(old).clocks_setting_fraction is None


def test_runner_stores_the_window_of_a_cuda_run(fake_nvml: Any) -> None:
    # Power-capped for the whole run (fake time frozen inside the capped span).
    fake_nvml.use(SCENARIO, frozen_time=3.0)
    env = {**os.environ, "FAKE_WORKER_MODE": "cuda_timed", "PYTHONPATH": str(REPO)}
    run = BenchRun(make_request("cnn-train", device="cuda"), env=env,
                   worker_cmd=[sys.executable, str(FAKE)])
    result = run.run()
    assert result.status == "ok"
    w = result.window
    assert w is not None and w.readings >= 1
    assert w.clock_sm_mhz_mean == 1200 and w.clock_sm_mhz_min == 1200
    assert w.power_w_mean == pytest.approx(400) and w.power_limit_w == 400
    assert w.temp_c_max == 85 and w.throttled_fraction == 1.0 and result.throttled
    doc = result.to_dict()
    assert doc["window"]["throttled"] is True
    assert doc["window"]["throttle_reasons"] == ["sw_power_cap"]
    assert Result.from_dict(doc).window == w


def _throttled_doc(fraction: float, value: float = 100.0) -> dict:
    d = make_doc(throughput=value)
    d["throughput"]["value"] = value
    n = 20
    bad = round(fraction * n)
    readings = [Reading(t=float(i), clock_sm_mhz=1200, throttle_mask=0x4 if i < bad else 0)
                for i in range(n)]
    w = window_stats(readings, [(0.0, float(n))])
    assert w is not None
    d["window"] = w.to_dict()
    return d


def test_throttled_run_is_flagged_in_history_show_compare_export(gputui: Gputui) -> None:
    hot, cool = _throttled_doc(0.5, 90.0), _throttled_doc(0.0, 100.0)
    results_store.save(cool)
    results_store.save(hot)
    wide = {"COLUMNS": "250"}
    proc = gputui("bench", "history", env=wide)
    assert proc.returncode == 0, proc.stderr
    hot_line = next(v for v in proc.stdout.splitlines() if hot["id"] in v)
    cool_line = next(v for v in proc.stdout.splitlines() if cool["id"] in v)
    assert "throttled 50 %" in hot_line and "throttled" not in cool_line
    rows = json.loads(gputui("bench", "history", "--json").stdout)
    assert {r["id"]: r["throttled"] for r in rows} == {hot["id"]: True, cool["id"]: False}

    shown = gputui("bench", "show", hot["id"], env=wide)
    assert "⚠ throttled 50 %" in shown.stdout
    assert "GPU over timed window" in shown.stdout and "SW power cap" in shown.stdout

    cmp = gputui("bench", "compare", cool["id"], hot["id"], env=wide)
    assert cmp.returncode == 0 and "B ⚠ throttled 50 %" in cmp.stdout
    cmp_json = json.loads(gputui("bench", "compare", cool["id"], hot["id"], "--json").stdout)
    assert cmp_json["throttled"] == {"a": False, "b": True}

    rows = list(csv.DictReader(io.StringIO(gputui("bench", "export").stdout)))
    assert {r["id"]: r["throttled"] for r in rows} == {hot["id"]: "True",
                                                        cool["id"]: "False"}
    md = gputui("bench", "export", "--format", "markdown").stdout
    assert "⚠ throttled 50 %" in md


class _SlowMonitor:
    """The TUI's sampler as the runner sees it: 1 s ticks, episodes, listeners."""

    interval = 1.0

    def __init__(self) -> None:
        self.listeners: list[Any] = []

    def episodes(self) -> list[Any]:
        return []

    def subscribe(self, fn: Any) -> None:
        self.listeners.append(fn)

    def unsubscribe(self, fn: Any) -> None:
        self.listeners.remove(fn)


def test_a_slow_monitor_sampler_gets_a_2_hz_reader_for_the_window(fake_nvml: Any) -> None:
    fake_nvml.use(SCENARIO, frozen_time=1.0)  # before the capped span: not throttled
    monitor = _SlowMonitor()
    env = {**os.environ, "FAKE_WORKER_MODE": "cuda_timed", "PYTHONPATH": str(REPO)}
    result = BenchRun(make_request("cnn-train", device="cuda"), env=env, sampler=monitor,
                      worker_cmd=[sys.executable, str(FAKE)]).run()
    # The monitor never produced a reading; the runner's own 2 Hz reader did.
    assert monitor.listeners == []
    w = result.window
    assert w is not None and w.readings >= 1 and w.clock_sm_mhz_mean == 1410
    assert w.throttled_fraction == 0.0 and not result.throttled
    assert result.config.gpu is not None and result.config.gpu.power_limit_enforced_w == 400.0
