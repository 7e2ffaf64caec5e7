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
