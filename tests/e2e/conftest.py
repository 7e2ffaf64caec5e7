"""End-to-end fixtures: the real `gputui` in tmux. Skipped only when tmux is absent."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.e2e.tmux import TmuxSession, gputui_command, tmux_available


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    if tmux_available():
        return
    skip = pytest.mark.skip(reason="tmux is not installed (.ci/run installs it)")
    for item in items:
        if "e2e" in item.keywords:
            item.add_marker(skip)


@pytest.fixture
def isolated_env(tmp_path: Path) -> dict[str, str]:
    """os.environ without any NVML or gputui settings, with private config/data dirs."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("FAKENVML_", "GPUTUI_", "TMUX")) and k != "LD_LIBRARY_PATH"}
    for var in ("XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME", "XDG_CACHE_HOME"):
        env[var] = str(tmp_path / var.lower())
    env["GPUTUI_CONFIG_DIR"] = str(tmp_path / "gputui-config")
    env["GPUTUI_DATA_DIR"] = str(tmp_path / "gputui-data")
    return env


@pytest.fixture
def tui() -> Iterator[Callable[..., TmuxSession]]:
    """`tui(env, *args, width=, height=, unset=)` starts `gputui *args` in tmux; every
    session started is killed at teardown, pass or fail."""
    sessions: list[TmuxSession] = []

    def start(env: dict[str, str], *args: str, width: int = 160, height: int = 50,
              unset: tuple[str, ...] = ()) -> TmuxSession:
        session = TmuxSession([*gputui_command(), *args], env=env, unset=unset, width=width,
                              height=height)
        sessions.append(session)
        return session.start()

    yield start
    for session in sessions:
        session.close()
