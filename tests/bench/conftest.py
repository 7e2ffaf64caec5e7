"""Fixtures of the benchmark tests."""

from __future__ import annotations

import pytest

from tests.cli import CliResult, CliRunner


@pytest.fixture
def gputui(cli: CliRunner, monkeypatch: pytest.MonkeyPatch) -> CliRunner:
    """``gputui(*argv, env={...}, hook=None)``: the CLI in-process with those variables set;
    ``hook`` is a worker test hook injected into the request the CLI builds (not a CLI flag)."""
    from gputui.bench import request

    def run(*argv: str, env: dict[str, str] | None = None,
            hook: str | None = None) -> CliResult:
        for key, value in (env or {}).items():
            monkeypatch.setenv(key, value)
        if hook is not None:
            orig = request.make_request
            monkeypatch.setattr(request, "make_request",
                                lambda *a, **k: orig(*a, **{**k, "test_hook": hook}))
        return cli(*argv)

    return run
