"""The replay's transport without an app: what it plays into its sampler, when, and what
the header is told of where it is. The clock is the test's."""

from __future__ import annotations

from pathlib import Path

from gputui.telemetry.frame import Frame
from gputui.telemetry.record import Recording
from gputui.ui.replay_control import ReplayController, ReplayPosition
from tests.ui.helpers import gpu, snap


def _controller() -> tuple[ReplayController, list[Frame], list[float]]:
    recording = Recording(path=Path("/tmp/night.jsonl"),
                          snapshots=[snap(t, [gpu(0, t)]) for t in range(60)],
                          warnings=["line 7: not JSON, skipped"], interval_s=2.0)
    now = [100.0]
    control = ReplayController(recording, speed=1.0, clock=lambda: now[0])
    frames: list[Frame] = []
    control.sampler.subscribe_frames(frames.append)  # what the monitor's feed does
    return control, frames, now


def test_nothing_plays_before_it_starts_then_the_first_snapshot_and_the_warnings() -> None:
    control, frames, _clock = _controller()
    assert control.sampler.interval == 2.0  # the recording's interval
    assert control.position() is None and not control.tick() and frames == []
    warned: list[str] = []
    control.start(warned.append)
    assert warned == ["line 7: not JSON, skipped"]
    assert [f.snapshot.seq for f in frames] == [1]
    assert control.position() == ReplayPosition(name="night.jsonl", playing=True, speed=1.0,
                                                elapsed_s=0.0, duration_s=59.0)
    control.recording.warn("line 30: cut short")  # met while playing: said then
    assert warned[-1] == "line 30: cut short"


def test_the_clock_plays_it_and_the_keys_move_it() -> None:
    control, frames, now = _controller()
    control.start(lambda w: None)
    now[0] += 0.05
    assert not control.tick()  # not yet a second in: nothing new to draw
    now[0] += 2.0
    assert control.tick() and [f.snapshot.seq for f in frames] == [1, 2, 3]
    control.toggle()  # pause
    now[0] += 10.0
    assert not control.tick() and len(frames) == 3
    position = control.position()
    assert position is not None and not position.playing
    assert control.seek(10.0) and frames[-1].snapshot.seq == 13
    assert control.step(-1) and frames[-1].snapshot.seq == 12
    assert control.jump("start") and frames[-1].snapshot.seq == 1 and frames[-1].reset
    assert control.jump("end") and frames[-1].snapshot.seq == 60
    control.speed_by(4.0)
    position = control.position()
    assert position is not None and position.speed == 4.0 and position.elapsed_s == 59.0
