"""UI test fixtures: a clock shown in one time zone, no user theme files, and (for the
benchmark screen tests) a temporary data dir for results."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def _stable_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[None]:
    # The header and episode times are shown in local time: pin it so screenshots match.
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    monkeypatch.delenv("GPUTUI_THEME", raising=False)
    monkeypatch.setenv("GPUTUI_CONFIG_DIR", str(tmp_path / "config"))  # no user themes
    yield
    monkeypatch.undo()
    time.tzset()


@pytest.fixture
def data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Benchmark results go under a temporary GPUTUI_DATA_DIR."""
    monkeypatch.setenv("GPUTUI_DATA_DIR", str(tmp_path / "data"))
    return tmp_path / "data"
