from __future__ import annotations

from datetime import timedelta

from gputui.telemetry import throttle
from gputui.telemetry.throttle import ThrottleTracker
from tests.factories import T0, gpu

HW_THERMAL = 0x40
IDLE = 0x1
APP_CLOCKS = 0x2
SW_POWER = 0x4


def test_idle_and_application_clocks_are_not_throttling() -> None:
    assert not throttle.is_throttling(IDLE | APP_CLOCKS | 0x100)
    assert throttle.state_words(IDLE) == "GPU idle"
    assert throttle.state_words(0) == "none"
    assert throttle.state_words(None) == "N/A"


def test_reasons_have_stable_names_and_words() -> None:
    assert throttle.reason_keys(HW_THERMAL | SW_POWER) == ["sw_power_cap", "hw_thermal_slowdown"]
    assert throttle.throttle_words(HW_THERMAL | SW_POWER) == "HW thermal slowdown, SW power cap"
    assert throttle.mask_from_keys(["sw_power_cap", "gpu_idle"]) == SW_POWER | IDLE
    assert throttle.reason_keys(0x1000) == ["unknown_0x1000"]


def test_explanation_names_clock_and_temperature() -> None:
    s = gpu(throttle_mask=HW_THERMAL, temp_c=87, clock_sm_mhz=945)
    text = throttle.explain(s, since=T0, now=T0 + timedelta(seconds=192), base_clock_sm_mhz=1410)
    assert text.startswith("HW thermal slowdown since ")
    assert "(3m12s)" in text
    assert "SM clock 1410→945 MHz" in text
    assert "87 °C ≥ slowdown 85 °C" in text


def test_power_cap_explanation_names_power() -> None:
    s = gpu(throttle_mask=SW_POWER, power_w=399.6, power_limit_w=400.0)
    assert "400 W of 400 W limit" in throttle.explain(s)


def _feed(tracker: ThrottleTracker, masks: list[int], **kw: object) -> None:
    for t, mask in enumerate(masks):
        temp = 88 if mask else 70
        clock = 945 + t if mask else 1410
        tracker.update([gpu(0, throttle_mask=mask, temp_c=temp, clock_sm_mhz=clock, **kw)],
                       T0 + timedelta(seconds=t), 1000.0 + t)


def test_tracker_turns_samples_into_episodes() -> None:
    tr = ThrottleTracker()
    _feed(tr, [0, 0, HW_THERMAL, HW_THERMAL | SW_POWER, HW_THERMAL, IDLE, 0, SW_POWER])
    eps = tr.episodes()
    assert len(eps) == 2
    first, second = eps
    assert first.start == T0 + timedelta(seconds=2)
    assert first.end == T0 + timedelta(seconds=5)
    assert first.duration_s() == 3.0
    assert first.reasons == ["sw_power_cap", "hw_thermal_slowdown"]
    assert first.peak_temp_c == 88
    assert first.min_clock_sm_mhz == 947
    assert first.clock_sm_before_mhz == 1410
    assert second.ongoing and tr.ongoing()[0] is second
    d = first.to_dict()
    assert d["start"] == "2026-11-21T14:02:13.000Z" and d["end"] == "2026-11-21T14:02:16.000Z"


def test_idle_only_never_opens_an_episode() -> None:
    tr = ThrottleTracker()
    _feed(tr, [IDLE, IDLE | APP_CLOCKS, 0])
    assert tr.episodes() == ()


def test_lost_gpu_closes_its_episode() -> None:
    tr = ThrottleTracker()
    tr.update([gpu(0, throttle_mask=HW_THERMAL)], T0, 0.0)
    tr.update([gpu(0, lost=True, throttle_mask=None)], T0 + timedelta(seconds=1), 1.0)
    (ep,) = tr.episodes()
    assert ep.end == T0 + timedelta(seconds=1)


def test_overlapping_selects_by_time_and_gpu() -> None:
    tr = ThrottleTracker()
    _feed(tr, [0, HW_THERMAL, 0, 0, 0])
    assert len(tr.overlapping(T0, T0 + timedelta(seconds=1))) == 1
    assert tr.overlapping(T0 + timedelta(seconds=3), T0 + timedelta(seconds=4)) == []
    assert tr.overlapping(T0, T0 + timedelta(seconds=4), gpu_index=1) == []


def test_a_failed_read_does_not_split_an_episode() -> None:
    tr = ThrottleTracker()
    masks = [HW_THERMAL, None, HW_THERMAL, 0]
    for t, mask in enumerate(masks):
        tr.update([gpu(0, throttle_mask=mask)], T0 + timedelta(seconds=t), float(t))
    (ep,) = tr.episodes()
    assert ep.duration_s() == 3.0
