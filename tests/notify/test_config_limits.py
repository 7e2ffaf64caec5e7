"""config.toml accepts only what gputui can handle: the bounds the flags have, a regular file
under 1 MiB, nesting the parser survives. Each refusal is one `gputui: config file …` line
and exit 2, promptly, from every command that reads the file."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli import CliResult

COMMANDS = [["watch", "--count", "1"], ["export", "--listen", "127.0.0.1:0"], []]
IDS = ["watch", "export", "monitor"]
RANGE = "interval: must be between 0.1 and 3600 seconds"


def run_with(cli, monkeypatch: pytest.MonkeyPatch, path: Path | str,
             argv: list[str]) -> CliResult:
    monkeypatch.setenv("GPUTUI_CONFIG", str(path))
    monkeypatch.delenv("GPUTUI_NOTIFY_WEBHOOK", raising=False)
    return cli(*argv)


@pytest.mark.parametrize("argv", COMMANDS, ids=IDS)
@pytest.mark.parametrize(("text", "line", "reason"), [
    ("interval = inf\n", 1, RANGE),
    ("interval = -inf\n", 1, RANGE),
    ("interval = nan\n", 1, RANGE),
    ("theme = 'nord'\ninterval = 1e300\n", 2, RANGE),
    ("interval = 3601\n", 1, RANGE),
    ("interval = 99999999999999999999999\n", 1, RANGE),
    ("interval = '1'\n", 1, RANGE),
    ("[notify]\ncommand = 'true'\nmin_duration = inf\n", 3,
     "min_duration: must be a number of seconds (0 or more)"),
    ("[notify]\nmin_duration = nan\n", 2,
     "min_duration: must be a number of seconds (0 or more)"),
], ids=["inf", "-inf", "nan", "1e300", "over-an-hour", "huge-int", "string", "min-inf",
        "min-nan"])
def test_a_value_out_of_the_flags_range_is_one_line(
        cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, argv: list[str], text: str,
        line: int, reason: str) -> None:
    path = tmp_path / "config.toml"
    path.write_text(text)
    result = run_with(cli, monkeypatch, path, argv)
    assert (result.returncode, result.stderr) == (
        2, f"gputui: config file {path}, line {line}: {reason}\n")


@pytest.mark.parametrize("argv", COMMANDS, ids=IDS)
@pytest.mark.parametrize(("content", "reason"), [
    ("a = " + "[" * 10_000 + "]" * 10_000 + "\n", "nested too deeply"),
    ("a = " + "{b = " * 10_000 + "1" + "}" * 10_000 + "\n", "nested too deeply"),
    ("# padding\n" * 200_000, "larger than 1 MiB"),  # 2 MB
    (b"interval = 2\n\xff\n", "not UTF-8 text"),
], ids=["arrays", "tables", "2MB", "binary"])
def test_a_file_the_parser_cannot_take_is_one_line(
        cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, argv: list[str],
        content: str | bytes, reason: str) -> None:
    path = tmp_path / "config.toml"
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content)
    result = run_with(cli, monkeypatch, path, argv)
    assert (result.returncode, result.stderr) == (2, f"gputui: config file {path}: {reason}\n")


def test_a_directory_is_one_line(cli, tmp_path: Path,
                                 monkeypatch: pytest.MonkeyPatch) -> None:
    result = run_with(cli, monkeypatch, tmp_path, ["watch", "--count", "1"])
    assert (result.returncode, result.stderr) == (
        2, f"gputui: config file {tmp_path}: is a directory\n")


def special(tmp_path: Path, kind: str) -> str:
    if kind == "fifo":  # nobody ever writes to it: reading it would wait forever
        os.mkfifo(tmp_path / "config.toml")
        return str(tmp_path / "config.toml")
    return "/dev/zero"  # endless: reading it whole grows memory until the OOM killer


@pytest.mark.parametrize("kind", ["fifo", "dev-zero"])
def test_a_path_that_is_not_a_regular_file_is_one_line_at_once(tmp_path: Path,
                                                                kind: str) -> None:
    path = special(tmp_path, kind)
    env = {k: v for k, v in os.environ.items() if k != "GPUTUI_NOTIFY_WEBHOOK"}
    env["GPUTUI_CONFIG"] = path
    # As a user runs it; the subprocess's timeout is the guard against a hang.
    proc = subprocess.run([sys.executable, "-m", "gputui", "watch", "--count", "1"],
                          env=env, capture_output=True, text=True, timeout=60)
    assert (proc.returncode, proc.stderr) == (
        2, f"gputui: config file {path}: not a regular file\n")


@pytest.mark.parametrize("argv", COMMANDS[1:], ids=IDS[1:])
@pytest.mark.parametrize("kind", ["fifo", "dev-zero"])
def test_the_other_commands_refuse_it_too(cli, tmp_path: Path,
                                         monkeypatch: pytest.MonkeyPatch, argv: list[str],
                                         kind: str) -> None:
    path = special(tmp_path, kind)
    result = run_with(cli, monkeypatch, path, argv)
    assert (result.returncode, result.stderr) == (
        2, f"gputui: config file {path}: not a regular file\n")


@pytest.mark.parametrize("value", ["inf", "nan", "1e300", "3601", "0.05"])
def test_the_interval_flag_has_the_same_bounds(cli, value: str) -> None:
    result = cli("watch", "--count", "1", "--interval", value)
    assert result.returncode == 2
    assert result.stderr.startswith("gputui: argument --interval: interval must be between "
                                    "0.1 and 3600 seconds: ")
    assert result.stderr.count("\n") == 1


def test_the_bounds_are_one_definition() -> None:
    from gputui.telemetry import limits

    assert limits.interval_problem(3600.0) is None
    assert limits.interval_problem(0.1) is None


def test_the_shortest_interval_the_flag_takes_is_one_the_sampler_runs_at() -> None:
    import argparse

    from gputui.commands.argtypes import interval_seconds
    from gputui.telemetry.host import HostSource
    from gputui.telemetry.sampler import Sampler

    assert Sampler(interval=interval_seconds("0.1"), host=HostSource()).interval == 0.1
    with pytest.raises(argparse.ArgumentTypeError):
        interval_seconds("0.09")
    with pytest.raises(ValueError):
        Sampler(interval=0.09)
