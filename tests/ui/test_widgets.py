"""Pure drawing logic of the widgets: no app needed."""

from __future__ import annotations

from datetime import timedelta

from gputui.telemetry.throttle import ThrottleEpisode
from gputui.ui.widgets.gauge import bar_text
from gputui.ui.widgets.gpu_view import gauges, metric_scale, state, temp_scale_c
from gputui.ui.widgets.sparkline import sparkline_rows
from tests.ui.helpers import T0, device, gpu, lost, throttled


def test_sparkline_fixed_scale_one_row() -> None:
    assert sparkline_rows([None, 0, 50, 100, 150], 100) == [" ▁▄██"]
    # The scale is fixed: small values stay small (Textual's Sparkline would stretch them).
    assert sparkline_rows([2, 3, 4], 100) == ["▁▁▁"]
    assert sparkline_rows([1, 2], None) == ["  "]  # unknown scale: nothing drawn


def test_sparkline_rows_stack_from_the_bottom() -> None:
    assert sparkline_rows([100, 50, 25, None], 100, height=2) == ["█   ", "██▄ "]
    assert sparkline_rows([75], 100, height=2) == ["▄", "█"]


def test_bar_text_uses_eighths_and_a_distinct_empty_glyph() -> None:
    assert bar_text(0.5, 4) == ("██", "░░")
    assert bar_text(1 / 16, 2) == ("▏", "░")
    assert bar_text(None, 3) == ("", "···")
    assert bar_text(2.0, 3) == ("███", "")


def test_scales() -> None:
    g = gpu(0)
    assert metric_scale(g, "util_gpu_pct") == 100.0
    assert metric_scale(g, "mem_used_bytes") == 80 * 2**30
    assert metric_scale(g, "power_w") == 400.0
    assert temp_scale_c(device(0)) == 92.0
    info = device(0)
    from dataclasses import replace
    assert temp_scale_c(replace(info, temp_shutdown_c=None)) == 100.0  # slowdown 85 + 15
    assert temp_scale_c(replace(info, temp_shutdown_c=None, temp_slowdown_c=None)) == 100.0


def test_gauge_severities() -> None:
    v = gauges(gpu(0, temp_c=86, mem_used_bytes=79 * 2**30))
    assert v["temp_c"].severity == "error" and v["temp_c"].text == "86/85°C"
    assert v["mem_used_bytes"].severity == "error"
    assert gauges(gpu(0, temp_c=81))["temp_c"].severity == "warning"
    assert gauges(gpu(0, power_w=None))["power_w"].text == "N/A"


def test_state_in_words_with_symbols() -> None:
    ep = ThrottleEpisode(gpu_index=0, gpu_uuid="x", mask=0x40, start=T0, end=None,
                         peak_temp_c=88, min_clock_sm_mhz=945, clock_sm_before_mhz=1980)
    st = state(throttled(0), ep, T0 + timedelta(minutes=3, seconds=12))
    assert st.severity == "warning"
    assert st.text.startswith("⚠ THROTTLED: HW thermal slowdown since ")
    assert "(3m12s), SM clock 1980→945 MHz, 88 °C ≥ slowdown 85 °C" in st.text
    assert st.short == "⚠ HW thermal 3m12s"
    assert state(lost(1), None, T0).text.startswith("✖ GPU is lost")
    assert state(gpu(0, throttle_mask=0x1), None, T0).text == "✓ not throttled (GPU idle)"
    assert state(gpu(0, throttle_mask=None), None, T0).severity is None


def test_each_graph_says_its_fixed_scale_with_units() -> None:
    from gputui.ui.widgets.gpu_view import scale_lines, scale_text

    g = gpu(0)
    shown = {m: scale_text(m, metric_scale(g, m)) for m in (
        "util_gpu_pct", "sm_active_pct", "mem_used_bytes", "power_w", "temp_c",
        "clock_sm_mhz")}
    assert shown == {"util_gpu_pct": "0–100%", "sm_active_pct": "0–100%",
                     "mem_used_bytes": "0–80G", "power_w": "0–400W", "temp_c": "0–92°C",
                     "clock_sm_mhz": "0–1980MHz"}
    assert scale_text("power_w", None) == "scale N/A"
    # A graph three rows tall: the top value on top, 0 at the bottom.
    assert scale_lines("power_w", 400.0, 3) == "400W\n\n0"
    assert scale_lines("power_w", 400.0, 1) == "0–400W"


def test_the_time_axis_says_how_long_ago() -> None:
    from gputui.ui.widgets.gpu_view import ago_text
    from gputui.ui.widgets.sparkline import time_axis

    assert [ago_text(s) for s in (60, 300, 900, 3600, 150, 45)] == [
        "−1m", "−5m", "−15m", "−1h", "−2m30s", "−45s"]
    line = time_axis(300, 40)
    assert len(line) == 40 and line.startswith("−5m ") and line.endswith(" now")
    assert line[20 - 3:20 + 3] == "−2m30s"  # the middle of the window, in the middle
    assert time_axis(300, 8) == "−5m  now"
    assert time_axis(300, 5) == "  now"  # too narrow for both ends: "now" only


def test_compact_columns_fill_the_width_and_keep_every_headline_metric() -> None:
    from gputui.ui.widgets.gpu_row import header_text, row_columns

    headline = {"util_gpu_pct", "sm_active_pct", "util_mem_pct", "mem_used_bytes",
                "power_w", "temp_c", "clock_sm_mhz", "history", "state"}
    for width in (60, 78, 80, 100, 107, 108, 120, 160, 200):
        cols = row_columns(width)
        # Below 79 columns (the doctor's side box) no history, SM active or MEMC.
        want = headline if width >= 79 else headline - {"history", "sm_active_pct",
                                                         "util_mem_pct"}
        assert want <= {c.key for c in cols}, width
        assert sum(c.width + 1 for c in cols) == width  # one space before each column
        state_w = next(c for c in cols if c.key == "state").width
        assert state_w >= (18 if width >= 80 else 16)  # "⚠ HW thermal 3m12s", "… 59s"
    assert header_text(80, 300).split() == ["#", "GPU", "−5m…now", "SMact", "MEMC", "VRAM",
                                            "PWR", "TEMP", "SM", "clk", "state"]
    assert "util −15m…now" in header_text(200, 900)


def test_the_gpm_marker_only_when_the_verdict_speaks() -> None:
    from gputui.ui.widgets.gpu_view import gpm_marker

    assert gpm_marker(gpu(0, util_gpu_pct=98, sm_active_pct=22.0)) == "◇ SMs mostly idle"
    assert gpm_marker(gpu(0, util_gpu_pct=98, sm_active_pct=90.0, tensor_active_pct=0.0,
                          fp32_active_pct=40.0)) == "◇ fp32, tensor idle"
    assert gpm_marker(gpu(0, util_gpu_pct=98, sm_active_pct=90.0)) is None
    assert gpm_marker(gpu(0, util_gpu_pct=30, sm_active_pct=5.0)) is None  # not busy
    assert gpm_marker(gpu(0, util_gpu_pct=98)) is None  # no GPM counters: nothing to say
