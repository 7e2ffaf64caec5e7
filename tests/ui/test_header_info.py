"""What the header says, as a function of the latest frame and a few facts of the app (no
app running): the host and versions, the reading's own time, the interval, the alerts and
stale GPUs, a benchmark in progress, where a replay is."""

from __future__ import annotations

from gputui.telemetry.alert import Alert
from gputui.telemetry.frame import Frame
from gputui.telemetry.model import SystemInfo
from gputui.ui.replay_control import ReplayPosition
from gputui.ui.widgets.header import HeaderInfo, header_info
from tests.ui.helpers import T0, gpu, snap


def _alert(gpu_index: int, severity: str) -> Alert:
    return Alert(key=f"temp:{gpu_index}", gpu_index=gpu_index, kind="near_slowdown",
                 severity=severity, message=f"GPU {gpu_index}: hot", since=T0)  # type: ignore[arg-type]


def test_before_the_first_reading_only_the_interval_is_known() -> None:
    assert header_info(None, interval_s=0.5) == HeaderInfo(interval_s=0.5)


def test_a_live_frame_gives_host_versions_time_alerts_and_stale_gpus() -> None:
    reading = snap(4, [gpu(0, 4), gpu(1, 4, stale=True, stale_s=3.0)], skipped_ticks=2)
    frame = Frame(reading, alerts=(_alert(0, "error"), _alert(1, "warning")))
    info = header_info(frame, interval_s=2.0, bench="cnn-train 42%")
    assert info == HeaderInfo(hostname="trainbox", driver="550.54.15", cuda="12.4",
                              time=reading.time, interval_s=2.0, alerts=2, errors=1,
                              skipped_ticks=2, stale=1, bench="cnn-train 42%")


def test_an_amd_box_and_a_replay() -> None:
    reading = snap(0, [gpu(0)], system=SystemInfo(amd_driver_version="6.8.5"))
    where = ReplayPosition(name="run.jsonl", playing=False, speed=2.0, elapsed_s=30.0,
                           duration_s=120.0)
    info = header_info(Frame(reading), interval_s=1.0, replay=where)
    assert (info.driver, info.cuda, info.amd_driver) == (None, None, "6.8.5")
    assert (info.replay, info.playing, info.speed, info.elapsed_s, info.duration_s) == (
        "run.jsonl", False, 2.0, 30.0, 120.0)
    assert info.alerts == info.errors == info.stale == 0 and info.bench is None
