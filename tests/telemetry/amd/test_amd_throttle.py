"""amdgpu's throttle status in gputui's vocabulary: the words a user reads, and the
episodes a bit that sets and clears makes."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from gputui.telemetry import throttle
from gputui.telemetry.amd import AmdSource
from gputui.telemetry.amd.gpu_metrics import Residency
from gputui.telemetry.amd.throttle_bits import from_indep, from_residency
from gputui.telemetry.throttle import ThrottleTracker
from tests.factories import T0
from tests.telemetry.amd import fake_tree as ft
from tests.telemetry.amd.fake_tree import FakeHost, mi250x, mi300x


@pytest.mark.parametrize(("smu_bits", "keys"), [
    ((ft.PPT0,), ["sw_power_cap"]),
    ((ft.SPL,), ["sw_power_cap"]),
    ((ft.TDC_GFX, ft.EDC_GFX), ["current_limit"]),
    ((ft.TEMP_HOTSPOT,), ["sw_thermal_slowdown"]),
    ((ft.TEMP_EDGE, ft.TEMP_GPU), ["sw_thermal_slowdown"]),
    ((ft.TEMP_MEM,), ["mem_thermal_slowdown"]),
    ((ft.TEMP_VR_GFX,), ["vr_thermal_slowdown"]),
    ((ft.VRHOT0,), ["vr_thermal_slowdown"]),
    ((ft.PROCHOT_GFX,), ["prochot"]),
    ((ft.PPM,), ["platform_power_limit"]),
    ((ft.FIT,), ["reliability_limit"]),
    ((ft.PPT0, ft.TEMP_HOTSPOT), ["sw_power_cap", "sw_thermal_slowdown"]),
    ((), []),
    ((8, 31, 50, 63), []),  # reserved bits say nothing
])
def test_indep_throttle_bits_in_gputui_words(smu_bits: tuple[int, ...], keys: list[str]) -> None:
    assert throttle.reason_keys(from_indep(ft.bits(*smu_bits))) == keys


def test_amd_only_reasons_read_as_words_and_count_as_throttling() -> None:
    mask = from_indep(ft.bits(ft.PROCHOT_GFX, ft.TEMP_MEM, ft.TDC_GFX, ft.PPT0))
    assert throttle.is_throttling(mask)
    assert throttle.throttle_words(mask) == (
        "PROCHOT, memory thermal slowdown, current limit (TDC/EDC), SW power cap")
    assert throttle.mask_from_keys(throttle.reason_keys(mask)) == mask
    assert not mask & ~throttle.THROTTLE_MASK
    assert throttle.AMD_ONLY_MASK & 0x1FF == 0  # clear of every NVML bit


def test_a_throttle_bit_that_sets_and_clears_makes_one_episode(tmp_path: Path) -> None:
    host = FakeHost(tmp_path)
    card = mi250x(host, 0)
    src = AmdSource(host.sys, host.proc)
    src.open()
    tracker = ThrottleTracker()
    masks = []
    for t, smu_bits in enumerate([(), (ft.PPT0,), (ft.PPT0, ft.TEMP_HOTSPOT), (), ()]):
        card.set_throttle(*smu_bits)
        sample, _ = src.read_device(0, slow=False, processes=False)
        masks.append(sample.throttle_mask)
        tracker.update([sample], T0 + timedelta(seconds=t), 1000.0 + t)
    assert masks == [0, 0x4, 0x4 | 0x20, 0, 0]
    (episode,) = tracker.episodes()
    assert episode.reasons == ["sw_power_cap", "sw_thermal_slowdown"]
    assert (episode.start, episode.end) == (T0 + timedelta(seconds=1), T0 + timedelta(seconds=3))
    assert episode.gpu_uuid == "AMD-38d1a2b3c4d5e6f7"
    assert episode.peak_temp_c == 58 and episode.min_clock_sm_mhz == 1700


def test_mi300_throttles_are_its_residency_counters_growing(tmp_path: Path) -> None:
    host = FakeHost(tmp_path)
    card = mi300x(host, 0)
    src = AmdSource(host.sys, host.proc)
    src.open()

    def tick(**counters: int) -> int | None:
        card.set_metrics(**counters)
        return src.read_device(0, slow=False, processes=False)[0].throttle_mask

    assert tick() is None  # the first reading has nothing to compare with
    assert tick(accumulation_counter=2000, ppt_residency_acc=700) == 0x4
    assert tick(accumulation_counter=3000, ppt_residency_acc=900,
                hbm_thm_residency_acc=5, prochot_residency_acc=1) == (
        0x4 | throttle.MEM_THERMAL | throttle.PROCHOT)
    assert tick(accumulation_counter=4000) == 0  # counted on, no throttler grew
    assert tick(accumulation_counter=4000) is None  # the same table again: says nothing
    assert tick(accumulation_counter=10, socket_thm_residency_acc=1) is None  # restarted
    assert tick(accumulation_counter=20, socket_thm_residency_acc=2,
                vr_thm_residency_acc=1) == 0x20 | throttle.VR_THERMAL


def test_residency_counters_the_firmware_leaves_unfilled_say_nothing() -> None:
    a = Residency(10, None, 5, None, None, None)
    b = Residency(20, None, 5, None, None, None)
    assert from_residency(a, b) == 0
    assert from_residency(a, Residency(20, None, 4, None, None, None)) is None
