"""config.toml: defaults under the flags, and a file that cannot be used is one line naming
the file and the line (exit 2)."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from gputui import cli
from gputui.commands.config_args import apply_config
from gputui.notify.settings import NotifySettings

GOOD = """\
interval = 0.5
theme = "nord"

[notify]
webhooks = ["https://hooks.slack.com/services/T000/B000/SECRET"]
command = "logger gputui"
terminal = true
min_duration = 30
kinds = ["throttle", "xid"]
"""


@pytest.fixture
def config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv("GPUTUI_THEME", raising=False)

    def write(text: str) -> Path:
        path = tmp_path / "config.toml"
        path.write_text(text, encoding="utf-8")
        monkeypatch.setenv("GPUTUI_CONFIG", str(path))
        return path

    return write


def parsed(*argv: str) -> tuple[argparse.Namespace, NotifySettings]:
    args = cli.build_parser().parse_args(list(argv))
    return args, apply_config(args, monitor=not argv or argv[0].startswith("-"))


def test_the_file_sets_the_defaults(config) -> None:
    config(GOOD)
    args, notify = parsed("watch")
    assert args.interval == 0.5
    assert notify == NotifySettings(
        webhooks=("https://hooks.slack.com/services/T000/B000/SECRET",),
        command="logger gputui", terminal=False,  # the terminal sink is the monitor's
        min_duration_s=30.0, kinds=frozenset({"throttle", "xid"}))
    args, notify = parsed()  # the monitor
    assert args.interval == 0.5 and args.theme == "nord" and notify.terminal


def test_flags_win(config, monkeypatch: pytest.MonkeyPatch) -> None:
    config(GOOD)
    args, notify = parsed("--interval", "2", "--theme", "textual-dark", "--no-notify-terminal",
                          "--notify-webhook", "http://127.0.0.1:9/x", "--notify-command",
                          "true", "--notify-min-duration", "0", "--notify-kinds", "lost")
    assert args.interval == 2.0 and args.theme == "textual-dark"
    assert notify == NotifySettings(webhooks=("http://127.0.0.1:9/x",), command="true",
                                    terminal=False, min_duration_s=0.0,
                                    kinds=frozenset({"lost"}))
    monkeypatch.setenv("GPUTUI_THEME", "gruvbox")  # the environment wins over the file too
    args, _ = parsed()
    assert args.theme is None


def test_no_file_no_settings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GPUTUI_CONFIG", raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    args, notify = parsed("watch")
    assert args.interval == 1.0 and notify == NotifySettings() and not notify.any_sink


def test_the_default_place_is_the_user_config_dir(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GPUTUI_CONFIG", raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    (tmp_path / "gputui").mkdir()
    (tmp_path / "gputui" / "config.toml").write_text("interval = 3\n")
    args, _ = parsed("export")
    assert args.interval == 3.0


@pytest.mark.parametrize(("text", "line", "reason"), [
    ("interval = 1\n\n[notify\ncommand = 'x'\n", 3, "Expected ']' at the end of a table "
     "declaration"),
    ("interval = 0.01\n", 1, "interval: must be between 0.1 and 3600 seconds"),
    ("theme = 'nord'\nintervall = 2\n", 2, "intervall: unknown setting (known: interval, "
     "theme, notify, path, energy)"),
    ("[notify]\nterminal = true\nmin_duration = 'long'\n", 3,
     "min_duration: must be a number of seconds (0 or more)"),
    ("[notify]\n\nkinds = ['throttle', 'fire']\n", 3, "kinds: unknown kind 'fire' (known: "
     "throttle, temperature, memory_temperature, memory_full, remap, lost, stale, xid, ecc, "
     "clock_change, gpm_busy, job_slowdown)"),
    ("[notify]\nterminal = 'yes'\n", 2, "terminal: must be true or false"),
    ("[notify]\nwebhook = 'x'\n", 2, "webhook: unknown setting (known: webhooks, "
     "webhooks_file, command, terminal, min_duration, kinds)"),
])
def test_a_malformed_file_is_one_line_with_the_file_and_line(
        config, capsys: pytest.CaptureFixture[str], text: str, line: int,
        reason: str) -> None:
    path = config(text)
    assert cli.main(["watch", "--count", "1"]) == 2
    err = capsys.readouterr().err
    assert err == f"gputui: config file {path}, line {line}: {reason}\n"


def test_a_bad_webhook_in_the_file_is_not_printed(config,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    path = config("[notify]\nwebhooks = ['hooks.slack.com/services/T0/B0/SECRET']\n")
    assert cli.main(["export"]) == 2
    err = capsys.readouterr().err
    assert err == (f"gputui: config file {path}, line 2: webhooks: not an http:// or "
                   "https:// URL\n")


def test_a_named_file_that_is_missing_is_an_error(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("GPUTUI_CONFIG", str(tmp_path / "nope.toml"))
    assert cli.main(["watch", "--count", "1"]) == 2
    missing = tmp_path / "nope.toml"
    assert capsys.readouterr().err == f"gputui: config file {missing}: no such file\n"
