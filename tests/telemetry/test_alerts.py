from __future__ import annotations

from gputui.telemetry.alerts import AlertEngine
from gputui.telemetry.model import GpuSample
from gputui.telemetry.throttle import ThrottleTracker
from tests.factories import device, gpu, snapshot

HW_THERMAL = 0x40
IDLE = 0x1
APP_CLOCKS = 0x2
SW_POWER = 0x4
GIB = 2**30


class Feed:
    """Runs snapshots through a real ThrottleTracker and the engine, as the UI does."""

    def __init__(self) -> None:
        self.engine = AlertEngine()
        self.tracker = ThrottleTracker()
        self.t = 0.0

    def tick(self, *gpus: GpuSample, dt: float = 1.0) -> list[str]:
        snap = snapshot(self.t, gpus)
        self.t += dt
        self.tracker.update(snap.gpus, snap.time, snap.mono)
        return [a.key for a in self.engine.update(snap, self.tracker.ongoing())]

    def active(self) -> list[str]:
        return [a.key for a in self.engine.active()]


def test_throttle_alert_raised_once_with_words_and_cleared() -> None:
    f = Feed()
    hot = device(0, temp_slowdown_c=85)
    assert f.tick(gpu(0, info=hot, clock_sm_mhz=1410, temp_c=70)) == []
    # 88 °C is also past the slowdown temperature: a separate, temperature alert.
    assert f.tick(gpu(0, info=hot, clock_sm_mhz=945, temp_c=88,
                      throttle_mask=HW_THERMAL)) == ["throttle:0", "near_slowdown:0"]
    alert = f.engine.get("throttle:0")
    assert alert is not None and alert.active and alert.severity == "warning"
    assert alert.kind == "throttle" and alert.gpu_index == 0
    assert alert.message == ("GPU 0: HW thermal slowdown, SM clock 1410→945 MHz, "
                             "88 °C ≥ slowdown 85 °C")
    start = alert.since
    # Still throttling: not raised again, message follows the reading, since stays.
    assert f.tick(gpu(0, info=hot, clock_sm_mhz=900, temp_c=89, throttle_mask=HW_THERMAL)) == []
    alert = f.engine.get("throttle:0")
    assert alert is not None and "1410→900 MHz" in alert.message and alert.since == start
    assert "throttle:0" in f.active()
    f.tick(gpu(0, info=hot, clock_sm_mhz=1410, temp_c=70, throttle_mask=IDLE))
    cleared = f.engine.get("throttle:0")
    assert cleared is not None and not cleared.active and cleared.until is not None
    assert [a.key for a in f.engine.last_cleared] == ["throttle:0", "near_slowdown:0"]
    assert f.active() == []


def test_idle_and_app_clocks_do_not_alert() -> None:
    f = Feed()
    assert f.tick(gpu(0, throttle_mask=IDLE | APP_CLOCKS)) == []
    assert f.active() == []


def test_throttle_flapping_does_not_re_raise_within_rearm_window() -> None:
    f = Feed()
    on = gpu(0, throttle_mask=SW_POWER, power_w=399.0)
    off = gpu(0, throttle_mask=0)
    assert f.tick(on) == ["throttle:0"]
    for _ in range(5):  # on/off every second: one alert, reactivated quietly
        assert f.tick(off) == []
        assert f.active() == []
        assert f.tick(on) == []
        assert f.active() == ["throttle:0"]
    f.tick(off, dt=60.0)  # a long quiet spell re-arms it
    assert f.tick(on) == ["throttle:0"]
    assert [a.key for a in f.engine.history()] == ["throttle:0", "throttle:0"]


def test_throttle_alert_uses_episode_start_as_since() -> None:
    f = Feed()
    f.tick(gpu(0))
    f.tick(gpu(0, throttle_mask=HW_THERMAL, temp_c=90))
    ep = f.tracker.ongoing()[0]
    alert = f.engine.get("throttle:0")
    assert alert is not None and alert.since == ep.start


def test_near_slowdown_hysteresis() -> None:
    f = Feed()
    info = device(0, temp_slowdown_c=85)
    temps_and_raises = [(79, []), (80, ["near_slowdown:0"]), (79, []), (80, []), (78, []),
                        (81, [])]
    for temp, expect in temps_and_raises:
        assert f.tick(gpu(0, info=info, temp_c=temp)) == expect, temp
        assert f.active() == ["near_slowdown:0"] or temp < 80
    alert = f.engine.get("near_slowdown:0")
    assert alert is not None and alert.message.startswith("GPU 0: 81 °C, within 4 °C of its "
                                                          "slowdown temperature 85 °C")
    assert f.tick(gpu(0, info=info, temp_c=77)) == []  # 77 < 85 − 7: clears, re-arms
    assert f.active() == []
    assert f.tick(gpu(0, info=info, temp_c=86)) == ["near_slowdown:0"]
    alert = f.engine.get("near_slowdown:0")
    assert alert is not None and "at or above its slowdown temperature 85 °C" in alert.message


def test_near_slowdown_needs_a_known_threshold_and_temperature() -> None:
    f = Feed()
    assert f.tick(gpu(0, info=device(0, temp_slowdown_c=None), temp_c=120)) == []
    f.tick(gpu(0, temp_c=84))
    # An unknown temperature for one tick leaves the alert as it was.
    f.tick(gpu(0, temp_c=None))
    assert f.active() == ["near_slowdown:0"]


def test_memory_full_hysteresis() -> None:
    f = Feed()
    total = 80 * GIB

    def at(pct: float) -> GpuSample:
        return gpu(0, mem_used_bytes=int(total * pct / 100), mem_total_bytes=total)

    assert f.tick(at(95.0)) == []  # "more than 95 %"
    assert f.tick(at(95.5)) == ["memory_full:0"]
    alert = f.engine.get("memory_full:0")
    assert alert is not None
    assert alert.message.startswith("GPU 0: memory 95.5% full (76.4GiB of 80.0GiB)")
    assert f.tick(at(94.0)) == [] and f.active() == ["memory_full:0"]
    assert f.tick(at(96.0)) == []
    assert f.tick(at(92.9)) == [] and f.active() == []
    assert f.tick(at(99.0)) == ["memory_full:0"]


def test_ecc_growth_raises_error_and_holds() -> None:
    f = Feed()
    assert f.tick(gpu(0, ecc_uncorrected=3)) == []  # baseline: old errors are not news
    assert f.tick(gpu(0, ecc_uncorrected=3)) == []
    assert f.tick(gpu(0, ecc_uncorrected=5)) == ["ecc:0"]
    alert = f.engine.get("ecc:0")
    assert alert is not None and alert.severity == "error"
    assert alert.message.startswith("GPU 0: 2 new uncorrected ECC errors (5 in total)")
    assert f.tick(gpu(0, ecc_uncorrected=6)) == []  # still active; message follows
    alert = f.engine.get("ecc:0")
    assert alert is not None and "1 new uncorrected ECC error (6 in total)" in alert.message
    f.tick(gpu(0, ecc_uncorrected=6), dt=30.0)
    assert f.active() == ["ecc:0"]  # held so nobody misses it
    f.tick(gpu(0, ecc_uncorrected=6), dt=31.0)
    f.tick(gpu(0, ecc_uncorrected=6))
    assert f.active() == []
    assert f.tick(gpu(0, ecc_uncorrected=0)) == []  # a reset counter is not growth
    assert f.tick(gpu(0, ecc_uncorrected=None)) == []


def test_lost_gpu_raises_error_and_clears_its_other_alerts() -> None:
    f = Feed()
    total = 80 * GIB
    f.tick(gpu(0, mem_used_bytes=total, mem_total_bytes=total, throttle_mask=HW_THERMAL),
           gpu(1, temp_c=84))
    assert sorted(f.active()) == ["memory_full:0", "near_slowdown:1", "throttle:0"]
    assert f.tick(GpuSample(info=device(0), lost=True), gpu(1, temp_c=84)) == ["lost:0"]
    assert f.active() == ["lost:0", "near_slowdown:1"]
    lost = f.engine.get("lost:0")
    assert lost is not None and lost.severity == "error"
    assert lost.message.startswith("GPU 0: NVIDIA A100-SXM4-80GB #0 is lost")
    assert f.tick(GpuSample(info=device(0), lost=True), gpu(1, temp_c=84)) == []
    f.tick(gpu(0), gpu(1, temp_c=84))  # it came back
    assert f.active() == ["near_slowdown:1"]


def test_active_orders_errors_first_and_reset_forgets() -> None:
    f = Feed()
    f.tick(gpu(0, temp_c=84), GpuSample(info=device(1), lost=True))
    assert f.active() == ["lost:1", "near_slowdown:0"]
    f.engine.reset()
    assert f.active() == [] and f.engine.history() == []


def test_alerts_are_frozen() -> None:
    f = Feed()
    f.tick(gpu(0, temp_c=84))
    alert = f.engine.active()[0]
    try:
        alert.active = False  # type: ignore[misc]
    except AttributeError:
        pass
    else:  # pragma: no cover
        raise AssertionError("Alert must be immutable: the UI holds on to them")
