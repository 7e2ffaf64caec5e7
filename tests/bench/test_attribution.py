from __future__ import annotations

from datetime import timedelta

from gputui.bench.attribution import ThroughputPoint, attribute
from gputui.telemetry.throttle import ThrottleEpisode
from tests.factories import T0


def _episode(start_s: float, end_s: float | None) -> ThrottleEpisode:
    return ThrottleEpisode(gpu_index=0, gpu_uuid="GPU-x", mask=0x40,
                           start=T0 + timedelta(seconds=start_s),
                           end=None if end_s is None else T0 + timedelta(seconds=end_s),
                           peak_temp_c=88, min_clock_sm_mhz=945, clock_sm_before_mhz=1410)


def _points(values: list[float]) -> list[ThroughputPoint]:
    return [ThroughputPoint(T0 + timedelta(seconds=i + 1), 1.0, v) for i, v in enumerate(values)]


def test_drop_is_measured_inside_against_outside() -> None:
    pts = _points([100, 100, 100, 82, 82, 82, 100, 100])
    (a,) = attribute(pts, [_episode(3, 6)])
    assert a.inside == 82 and a.outside == 100
    assert round(a.drop_pct or 0) == 18
    text = a.text()
    assert text.startswith("throughput fell 18 % during HW thermal slowdown ")
    assert text.endswith("on GPU 0")


def test_ongoing_episode_runs_to_the_end_of_the_run() -> None:
    pts = _points([100, 100, 50, 50])
    (a,) = attribute(pts, [_episode(2, None)])
    assert a.drop_pct == 50 and "ongoing" in a.text()


def test_no_episodes_no_attribution_and_no_samples_is_said() -> None:
    assert attribute(_points([1, 2]), []) == []
    (a,) = attribute([], [_episode(0, 1)])
    assert a.drop_pct is None and "not enough samples" in a.text()
