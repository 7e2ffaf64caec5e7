"""Fixtures of the benchmark tests."""

from __future__ import annotations

import pytest

from tests.cli import CliResult, CliRunner


@pytest.fixture
def gputui(cli: CliRunner, monkeypatch: pytest.MonkeyPatch) -> CliRunner:
    """``gputui(*argv, env={...}, hook=None)``: the CLI in-process with those variables set;
    ``hook`` is a worker test hook injected into the spec the CLI builds (not a CLI flag)."""
    from gputui.bench import runner

    def run(*argv: str, env: dict[str, str] | None = None,
            hook: str | None = None) -> CliResult:
        for key, value in (env or {}).items():
            monkeypatch.setenv(key, value)
        if hook is not None:
            orig = runner.make_spec
            monkeypatch.setattr(runner, "make_spec",
                                lambda *a, **k: orig(*a, **{**k, "test_hook": hook}))
        return cli(*argv)

    return run
