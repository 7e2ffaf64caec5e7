"""Webhook URLs kept out of the command line: GPUTUI_NOTIFY_WEBHOOK and a private file of
URLs reach the sinks; the command line wins over the environment, the environment over
config.toml; a URL with a secret on the command line is warned about by its host only."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from gputui import cli
from gputui.commands.config_args import apply_config
from gputui.notify.settings import NotifySettings
from tests.fakenvml.harness import FakeNvmlLib, derive_scenario
from tests.notify.conftest import Receiver, clean_env

SECRET = "T0000/B0000/XXXXsecrettokenXXXX"
SLACK = f"https://hooks.slack.com/services/{SECRET}"
SW_POWER = 0x4


@pytest.fixture
def isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """No config.toml and no GPUTUI_NOTIFY_WEBHOOK unless a test sets them."""
    monkeypatch.delenv("GPUTUI_CONFIG", raising=False)
    monkeypatch.delenv("GPUTUI_NOTIFY_WEBHOOK", raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "no-config"))
    return tmp_path


def parsed(*argv: str) -> tuple[argparse.Namespace, NotifySettings]:
    args = cli.build_parser().parse_args(["watch", *argv])
    return args, apply_config(args)


def private_file(path: Path, text: str, mode: int = 0o600) -> Path:
    path.write_text(text)
    path.chmod(mode)
    return path


def test_the_environment_names_webhooks(isolated: Path,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GPUTUI_NOTIFY_WEBHOOK", f" {SLACK}  http://127.0.0.1:9/b \n")
    _, notify = parsed()
    assert notify.webhooks == (SLACK, "http://127.0.0.1:9/b")


def test_a_file_names_webhooks(isolated: Path) -> None:
    hooks = private_file(isolated / "hooks", f"# team channel\n{SLACK}\n\n  http://h:1/x \n")
    _, notify = parsed("--notify-webhook-file", str(hooks))
    assert notify.webhooks == (SLACK, "http://h:1/x")


def test_the_command_line_wins_over_the_environment_which_wins_over_the_file(
        isolated: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    hooks = private_file(isolated / "hooks", "http://from-file:1/x\n")
    config = isolated / "config.toml"
    config.write_text('[notify]\nwebhooks = ["http://from-config:1/x"]\n'
                      f'webhooks_file = "{hooks.name}"\n')  # next to config.toml
    monkeypatch.setenv("GPUTUI_CONFIG", str(config))
    assert parsed()[1].webhooks == ("http://from-config:1/x", "http://from-file:1/x")
    monkeypatch.setenv("GPUTUI_NOTIFY_WEBHOOK", "http://from-env:1/x")
    assert parsed()[1].webhooks == ("http://from-env:1/x",)
    flag_file = private_file(isolated / "flag-hooks", "http://from-flag-file:1/x\n")
    assert parsed("--notify-webhook", "http://from-flag:1",
                  "--notify-webhook-file", str(flag_file))[1].webhooks == (
        "http://from-flag:1", "http://from-flag-file:1/x")


@pytest.mark.parametrize(("mode", "reason"), [
    (0o644, "other users can read or change it (chmod 600 it)"),
    (0o640, "other users can read or change it (chmod 600 it)"),
    (0o602, "other users can read or change it (chmod 600 it)"),
])
def test_a_webhook_file_others_can_read_is_refused(
        isolated: Path, capsys: pytest.CaptureFixture[str], mode: int, reason: str) -> None:
    hooks = private_file(isolated / "hooks", f"{SLACK}\n", mode)
    assert cli.main(["watch", "--count", "1", "--notify-webhook-file", str(hooks)]) == 2
    assert capsys.readouterr().err == f"gputui: webhook file {hooks}: {reason}\n"


@pytest.mark.parametrize(("text", "reason"), [
    ("", "no URL in it"),
    ("# nothing yet\n\n", "no URL in it"),
    (f"{SLACK}\nhooks.slack.com/services/{SECRET}\n", "line 2: not an http:// or https:// URL"),
])
def test_a_webhook_file_without_good_urls_is_one_line_without_them(
        isolated: Path, capsys: pytest.CaptureFixture[str], text: str, reason: str) -> None:
    hooks = private_file(isolated / "hooks", text)
    assert cli.main(["export", "--notify-webhook-file", str(hooks)]) == 2
    sep = "," if reason.startswith("line") else ":"
    assert capsys.readouterr().err == f"gputui: webhook file {hooks}{sep} {reason}\n"


def test_a_missing_webhook_file_named_in_config_is_one_line(
        isolated: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    config = isolated / "config.toml"
    config.write_text('[notify]\nwebhooks_file = "~/nope/hooks"\n')
    monkeypatch.setenv("GPUTUI_CONFIG", str(config))
    monkeypatch.setenv("HOME", str(isolated))
    assert cli.main(["watch", "--count", "1"]) == 2
    assert capsys.readouterr().err == (
        f"gputui: webhook file {isolated / 'nope' / 'hooks'}: no such file\n")


def test_a_bad_url_in_the_environment_is_one_line_without_it(
        isolated: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("GPUTUI_NOTIFY_WEBHOOK", f"http://ok:1/ ftp://x/{SECRET}")
    assert cli.main(["watch", "--count", "1"]) == 2
    assert capsys.readouterr().err == (
        "gputui: GPUTUI_NOTIFY_WEBHOOK, URL 2: not an http:// or https:// URL\n")


@pytest.mark.parametrize("url", [SLACK, "https://user:pw@hooks.slack.com",
                                 "https://hooks.slack.com/?token=abc"])
def test_a_secret_on_the_command_line_is_warned_about_by_host(
        isolated: Path, capsys: pytest.CaptureFixture[str], url: str) -> None:
    _, notify = parsed("--notify-webhook", url, "--notify-webhook", "http://127.0.0.1:9/x")
    assert notify.webhooks == (url, "http://127.0.0.1:9/x")  # still used
    err = capsys.readouterr().err
    assert err == ("gputui: warning: --notify-webhook shows the URL for hooks.slack.com, "
                   "127.0.0.1:9 to every local user (ps); give it in GPUTUI_NOTIFY_WEBHOOK "
                   "or --notify-webhook-file instead\n")
    for secret in (SECRET, "pw", "token", "/x"):
        assert secret not in err


def test_a_url_without_a_secret_is_not_warned_about(
        isolated: Path, capsys: pytest.CaptureFixture[str]) -> None:
    parsed("--notify-webhook", "http://alerts.internal:8080/")
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize("source", ["environment", "file"])
def test_the_environment_and_the_file_reach_the_sink(
        cli_env, fake_nvml_lib: FakeNvmlLib, tmp_path: Path, receiver: Receiver,
        source: str) -> None:
    scenario = derive_scenario("two_gpus", {
        "gpu.0.throttle_from_s": 0.0, "gpu.0.throttle_until_s": 10_000.0,
        "gpu.0.during.throttle_reasons": SW_POWER,
    }, tmp_path / "throttle.conf")
    env = clean_env(fake_nvml_lib.env(scenario))
    env.pop("GPUTUI_CONFIG", None)
    env.pop("GPUTUI_NOTIFY_WEBHOOK", None)
    env["XDG_CONFIG_HOME"] = str(tmp_path / "no-config")
    args = ["watch", "--interval", "0.1", "--count", "2", "--format", "jsonl"]
    url = receiver.url(f"/services/{SECRET}")
    if source == "environment":
        env["GPUTUI_NOTIFY_WEBHOOK"] = url
    else:
        args += ["--notify-webhook-file", str(private_file(tmp_path / "hooks", url + "\n"))]
    result = cli_env(args, env)
    assert result.returncode == 0, result.stderr
    got = receiver.wait_for(1)
    assert [(e["event"], e["kind"], e["gpu"]) for e in got] == [("started", "throttle", 0)]
    assert receiver.paths == [f"/services/{SECRET}"]
    assert result.stderr == ""  # delivered, and nothing to warn about
