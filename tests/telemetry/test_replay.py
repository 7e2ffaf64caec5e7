from __future__ import annotations

import json
import re
from datetime import timedelta
from pathlib import Path

import pytest

from gputui.errors import UsageError
from gputui.telemetry.history import History, history_capacity
from gputui.telemetry.model import Snapshot
from gputui.telemetry.record import Recorder, Recording, load_recording
from gputui.telemetry.replay import REBUILD_WINDOW_S, ReplayPlayer, clamp_speed
from gputui.telemetry.sampler import Sampler
from tests.factories import T0, gpu, snapshot

HW_THERMAL = 0x40


def make_recording(n: int, *, throttle: tuple[float, float] | None = None,
                   step: float = 1.0) -> Recording:
    """n snapshots `step` s apart; GPU 0 throttles in [start, end) if asked."""
    snaps = []
    for i in range(n):
        t = i * step
        mask = HW_THERMAL if throttle and throttle[0] <= t < throttle[1] else 0
        # mono deliberately meaningless (as from another machine): the player fixes it.
        snaps.append(snapshot(t, [gpu(0, temp_c=60 + i % 5, throttle_mask=mask)], mono=7.0))
    return Recording(path=Path("hand-made.jsonl"), snapshots=snaps)


class Listener:
    def __init__(self) -> None:
        self.seen: list[Snapshot] = []

    def __call__(self, snap: Snapshot) -> None:
        self.seen.append(snap)


@pytest.fixture
def sampler() -> Sampler:
    return Sampler(interval=1.0)


@pytest.fixture
def history(sampler: Sampler) -> History:
    """What a view keeps: the history built from the sampler's frames."""
    h = History(history_capacity(1.0))
    sampler.subscribe_frames(h.take)
    return h


def test_starts_on_the_first_snapshot(sampler: Sampler, history: History) -> None:
    rec = make_recording(10)
    p = ReplayPlayer(rec, sampler)
    assert p.position == 0 and p.current.time == T0
    assert sampler.latest is p.current and len(history) == 1
    assert p.duration_s == 9.0 and p.elapsed_s == 0.0 and not p.at_end
    assert p.playing and p.speed == 1.0
    assert p.time == T0
    # Replay time becomes the monotonic clock, whatever the snapshots carried.
    assert [p._snap(i).mono for i in range(3)] == [0.0, 1.0, 2.0]


def test_advance_feeds_every_due_snapshot(sampler: Sampler, history: History) -> None:
    listener = Listener()
    sampler.subscribe(listener)
    p = ReplayPlayer(make_recording(10), sampler)
    assert not p.advance(0.5)
    assert p.position == 0 and p.elapsed_s == 0.5
    assert p.advance(0.6)
    assert p.position == 1
    p.speed = 4.0
    assert p.advance(1.0)  # 1.1 + 4 = 5.1 s: snapshots 2..5 all ingested, in order
    assert p.position == 5
    assert [s.time - T0 for s in listener.seen] == [timedelta(seconds=s) for s in range(6)]
    assert len(history) == 6
    assert sampler.latest is p.current


def test_pause_toggle_and_end(sampler: Sampler, history: History) -> None:
    p = ReplayPlayer(make_recording(5), sampler)
    p.pause()
    assert not p.advance(10.0) and p.position == 0
    assert p.toggle() is True
    assert p.advance(100.0)
    assert p.at_end and not p.playing and p.position == 4 and p.elapsed_s == 4.0
    assert not p.advance(1.0)
    p.play()  # after the end: start over
    assert p.playing and p.position == 0 and p.elapsed_s == 0.0
    assert len(history) == 1


def test_speed_is_clamped(sampler: Sampler) -> None:
    p = ReplayPlayer(make_recording(3), sampler, speed=1000)
    assert p.speed == 64.0
    p.speed = 0.001
    assert p.speed == 0.125
    assert p.faster() == 0.25 and p.slower() == 0.125 and p.slower() == 0.125
    assert clamp_speed(float("nan")) == 1.0


def test_step_pauses_and_goes_both_ways(sampler: Sampler, history: History) -> None:
    p = ReplayPlayer(make_recording(10), sampler)
    assert p.step(3)
    assert not p.playing and p.position == 3 and p.elapsed_s == 3.0
    assert len(history) == 4
    assert p.step(-2)
    assert p.position == 1 and len(history) == 2  # rebuilt: no future in history
    assert not p.step(-5) or p.position == 0
    assert p.position == 0
    assert p.step(100) and p.position == 9 and p.at_end


def test_seek_backwards_rebuilds_history_and_episodes(sampler: Sampler, history: History) -> None:
    p = ReplayPlayer(make_recording(40, throttle=(10, 20)), sampler)
    p.seek(15.5)
    assert p.position == 15 and p.elapsed_s == 15.5
    ongoing = sampler.ongoing()
    assert list(ongoing) == [0] and ongoing[0].start == T0 + timedelta(seconds=10)
    p.seek(30)
    eps = sampler.episodes()
    assert len(eps) == 1 and eps[0].duration_s() == 10.0 and not sampler.ongoing()
    p.seek(5)
    assert sampler.episodes() == () and len(history) == 6
    p.seek_relative(10)
    assert p.position == 15 and list(sampler.ongoing()) == [0]
    p.seek_relative(-100)
    assert p.position == 0 and p.elapsed_s == 0.0
    p.seek(1e9)
    assert p.at_end


def test_seek_rebuilds_only_the_history_window_and_notifies_once(sampler: Sampler,
                                                                 history: History) -> None:
    n = 3600
    rec = make_recording(n, throttle=(2500, 2600))
    p = ReplayPlayer(rec, sampler)
    listener = Listener()
    sampler.subscribe(listener)
    p.seek(3000)  # a long jump forward: rebuilt from the window, not replayed from 0
    assert p.position == 3000
    assert len(history) == int(REBUILD_WINDOW_S) + 1
    assert len(listener.seen) == 1 and listener.seen[0] is p.current
    eps = sampler.episodes()
    assert len(eps) == 1 and eps[0].start == T0 + timedelta(seconds=2500)
    times, _values = history.window(0, "temp_c", 60)
    assert len(times) == 61 and times[-1] == 3000.0
    # Backwards to before the window start: only the earlier window is in history.
    p.seek(100)
    assert len(history) == 101 and sampler.episodes() == ()


def test_wall_clock_stepping_back_does_not_run_replay_backwards(sampler: Sampler) -> None:
    rec = make_recording(4)
    rec.snapshots[2] = snapshot(0.5, rec.snapshots[2].gpus)  # clock stepped back
    p = ReplayPlayer(rec, sampler)
    assert p._offsets == [0.0, 1.0, 1.0, 3.0]
    assert p.advance(1.0) and p.position == 2


def test_empty_recording_is_refused(sampler: Sampler) -> None:
    with pytest.raises(ValueError):
        ReplayPlayer(Recording(path=Path("x"), snapshots=[]), sampler)


# --- over real recording files --------------------------------------------------------


def _record(path: Path, n: int = 6, throttle: tuple[int, int] = (2, 4)) -> None:
    rec = Recorder(path, interval=1.0)
    for i in range(n):
        mask = HW_THERMAL if throttle[0] <= i < throttle[1] else 0
        rec.write(snapshot(i, [gpu(0, throttle_mask=mask), gpu(1)]))
    rec.close()


def test_replays_a_recorder_file(tmp_path: Path, sampler: Sampler) -> None:
    path = tmp_path / "run.jsonl"
    _record(path)
    rec = load_recording(path)
    assert rec.warnings == [] and rec.interval_s == 1.0
    p = ReplayPlayer(rec, sampler)
    assert p.duration_s == 5.0
    p.advance(2.5)
    assert p.position == 2 and list(sampler.ongoing()) == [0]
    assert [g.index for g in p.current.gpus] == [0, 1]
    p.advance(10)
    assert p.at_end
    eps = sampler.episodes()
    assert len(eps) == 1 and eps[0].duration_s() == 2.0


def test_truncated_last_line_warns_and_replays_the_rest(tmp_path: Path,
                                                        sampler: Sampler) -> None:
    path = tmp_path / "crashed.jsonl"
    _record(path)
    text = path.read_text()
    path.write_text(text[: len(text) - 40])  # the recorder died mid-line
    rec = load_recording(path)
    assert len(rec.snapshots) == 5
    assert len(rec.warnings) == 1 and "truncated" in rec.warnings[0]
    assert str(path) in rec.warnings[0]
    p = ReplayPlayer(rec, sampler)
    p.seek(100)
    assert p.position == 4 and p.at_end


def test_a_file_that_is_not_a_recording_is_one_usage_error(tmp_path: Path) -> None:
    path = tmp_path / "notes.txt"
    path.write_text("hello\nworld\n")
    with pytest.raises(UsageError) as err:
        load_recording(path)
    assert "is not a gputui recording" in str(err.value) and "\n" not in str(err.value)
    other = tmp_path / "other.json"
    other.write_text(json.dumps({"some": "json"}) + "\n")
    with pytest.raises(UsageError):
        load_recording(other)


def test_listeners_see_the_position_of_the_snapshot_they_get(sampler: Sampler) -> None:
    p = ReplayPlayer(make_recording(30), sampler)
    seen: list[tuple[int, bool]] = []
    sampler.subscribe(lambda snap: seen.append((p.position, p.current is snap)))
    p.advance(3.0)
    p.seek(20)
    p.seek(5)  # a rewind: the listener sees the position go down at once
    assert seen == [*[(i, True) for i in range(1, 21)], (5, True)]
    assert p.rebuilds == 1


def _recorded(tmp_path: Path, n: int) -> Path:
    path = tmp_path / "run.jsonl"
    rec = Recorder(path, interval=1.0)
    for i in range(n):
        rec.write(snapshot(i, [gpu(0, temp_c=60 + i)]))
    rec.close()
    return path


def test_a_string_in_a_numeric_field_is_one_warning_naming_file_and_line(
        tmp_path: Path, sampler: Sampler) -> None:
    path = _recorded(tmp_path, 6)
    lines = path.read_text().splitlines()
    # Line 4 is the third snapshot (line 1 is the header): temp_c 62 becomes a string.
    assert '"temp_c":62' in lines[3]
    lines[3] = lines[3].replace('"temp_c":62', '"temp_c":"hot"')
    path.write_text("\n".join(lines) + "\n")
    rec = load_recording(path)
    seen: list[str] = []
    rec.on_warning = seen.append
    p = ReplayPlayer(rec, sampler)
    for _ in range(5):
        p.step(1)
    assert p.position == 5 and p.current.gpus[0].temp_c == 65  # played to the end
    assert len(seen) == 1 and f"{path}: line 4 skipped" in seen[0]
    assert "gpus[0].temp_c is a string, not a number" in seen[0]
    # The damaged line's place shows the reading before it, at the line's own time.
    p.seek(2.0)
    assert p.current.gpus[0].temp_c == 61 and p.current.time == T0 + timedelta(seconds=2)
    assert len(seen) == 1  # said once


def test_a_damaged_first_snapshot_is_a_one_line_usage_error(tmp_path: Path) -> None:
    path = _recorded(tmp_path, 3)
    lines = path.read_text().splitlines()
    lines = [re.sub(r'"power_w":[0-9.]+', '"power_w":"lots"', lines[1])]
    assert '"power_w":"lots"' in lines[0]
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(UsageError) as err:
        load_recording(path)
    assert "not a gputui recording" in str(err.value) and "power_w" in str(err.value)


def test_replay_indexes_the_file_and_parses_snapshots_only_when_reached(
        tmp_path: Path, sampler: Sampler) -> None:
    path = _recorded(tmp_path, 200)
    rec = load_recording(path)
    assert len(rec.snapshots) == 200 and rec.duration_s == 199.0
    cached = rec.snapshots._cache  # type: ignore[attr-defined]
    assert len(cached) <= 2  # the first and (checked) last line only
    p = ReplayPlayer(rec, sampler)
    p.step(3)
    assert p.current.gpus[0].temp_c == 63
    assert len(cached) <= 5
