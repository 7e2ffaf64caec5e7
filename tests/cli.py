"""`gputui` run in-process through `gputui.cli.main(argv)`: what a subprocess of
`python -m gputui` would print and return, without an interpreter start per case.

The `cli` fixture (tests/conftest.py) binds it to the test's capsys; environment variables
a case needs are set with monkeypatch, NVML comes from the `fake_nvml` fixture.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import pytest


@dataclass(frozen=True)
class CliResult:
    """The exit status and output of one `gputui` command line, like CompletedProcess."""

    returncode: int
    stdout: str
    stderr: str


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> CliResult:
    """`python -m gputui *argv` in this process: `raise SystemExit(main())` as __main__ does,
    argparse's own exits (bad usage, --help, --version) included."""
    from gputui.cli import main

    capsys.readouterr()  # output of the test's set-up is not the command's
    try:
        code: object = main(list(argv))
    except SystemExit as exc:
        code = exc.code
    out, err = capsys.readouterr()
    if code is None:
        code = 0
    elif not isinstance(code, int):  # SystemExit("message"): printed, status 1
        err += f"{code}\n"
        code = 1
    return CliResult(code, out, err)


CliRunner = Callable[..., CliResult]
CliEnv = Callable[..., CliResult]  # the cli_env fixture: (args, env) -> CliResult


def apply_env(monkeypatch: pytest.MonkeyPatch, env: Mapping[str, str] | None) -> None:
    """Make os.environ equal `env` (a subprocess's environment) until the test ends."""
    if env is None:
        return
    for key in list(os.environ):
        if key not in env:
            monkeypatch.delenv(key)
    for key, value in env.items():
        if os.environ.get(key) != value:
            monkeypatch.setenv(key, value)
