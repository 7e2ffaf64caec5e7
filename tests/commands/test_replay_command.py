"""`gputui replay`: error paths through the real CLI in-process; the happy path with run_app
faked."""

from __future__ import annotations

import sys
import types
from pathlib import Path

import pytest

from gputui.cli import main
from gputui.telemetry import replay as replay_mod
from gputui.telemetry.record import Recorder
from gputui.telemetry.sampler import Sampler
from gputui.ui.options import AppOptions
from tests.cli import CliResult, CliRunner
from tests.factories import gpu, snapshot


def _one_line_usage_error(proc: CliResult, *needles: str) -> None:
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("gputui: "), proc.stderr
    for needle in needles:
        assert needle in lines[0]
    assert proc.stdout == ""


def test_missing_file(tmp_path: Path, cli: CliRunner) -> None:
    missing = tmp_path / "nope.jsonl"
    _one_line_usage_error(cli("replay", str(missing)), "no such recording", str(missing))


def test_not_a_recording(tmp_path: Path, cli: CliRunner) -> None:
    path = tmp_path / "notes.txt"
    path.write_text("these are my notes\n")
    _one_line_usage_error(cli("replay", str(path)), "is not a gputui recording")


def test_empty_file(tmp_path: Path, cli: CliRunner) -> None:
    path = tmp_path / "empty.jsonl"
    path.write_text("")
    _one_line_usage_error(cli("replay", str(path)), "no snapshots")


def test_a_directory(tmp_path: Path, cli: CliRunner) -> None:
    proc = cli("replay", str(tmp_path))
    assert proc.returncode in (1, 2) and "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("speed", ["0", "-1", "fast", "100", "0.01", "nan"])
def test_bad_speed(tmp_path: Path, speed: str, cli: CliRunner) -> None:
    _one_line_usage_error(cli("replay", str(tmp_path / "x.jsonl"), "--speed", speed))


def test_no_file_given(cli: CliRunner) -> None:
    _one_line_usage_error(cli("replay"))


@pytest.mark.parametrize("speed", ["0.125", "64"])
def test_the_speeds_the_flag_takes_play_as_given(tmp_path: Path, speed: str,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """The flag's bounds are the player's: the slowest and fastest speeds it accepts are
    played at that speed, not clamped to another."""
    path = tmp_path / "run.jsonl"
    rec = Recorder(path, interval=1.0)
    rec.write(snapshot(0, [gpu(0)]))
    rec.close()
    seen: list[AppOptions] = []

    def run_app(options: AppOptions) -> int:
        seen.append(options)
        return 0

    fake = types.ModuleType("gputui.ui.app")
    fake.run_app = run_app  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "gputui.ui.app", fake)
    assert main(["replay", str(path), "--speed", speed]) == 0
    (options,) = seen
    assert options.replay is not None
    player = replay_mod.ReplayPlayer(options.replay, Sampler(), speed=options.replay_speed)
    assert player.speed == float(speed)


def test_warnings_then_the_app(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                               capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "crashed.jsonl"
    rec = Recorder(path, interval=1.0)
    for i in range(3):
        rec.write(snapshot(i, [gpu(0)]))
    rec.close()
    with path.open("a") as fh:
        fh.write('{"time": "2026-')  # the recorder died mid-line
    seen: list[AppOptions] = []

    def run_app(options: AppOptions) -> int:
        seen.append(options)
        return 0

    fake = types.ModuleType("gputui.ui.app")
    fake.run_app = run_app  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "gputui.ui.app", fake)
    assert main(["replay", str(path), "--speed", "8", "--theme", "gputui-light"]) == 0
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].startswith("gputui: warning: ") and "truncated" in err[0]
    (opts,) = seen
    assert opts.replay is not None and len(opts.replay.snapshots) == 3
    assert opts.replay_speed == 8.0 and opts.theme == "gputui-light"
