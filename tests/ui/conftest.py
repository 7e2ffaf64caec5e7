"""UI test fixtures: a clock shown in one time zone, no user theme files, (for the
benchmark screen tests) a temporary data dir for results, and the monitor over the fake
NVML with its own field profile."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from gputui.telemetry.sampler import Sampler
from gputui.ui.app import GputuiApp
from gputui.ui.options import AppOptions

MonitorFactory = Callable[..., tuple[GputuiApp, Sampler]]


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


@pytest.fixture
def fake_monitor(fake_nvml: Any) -> Iterator[MonitorFactory]:
    """`fake_monitor(scenario, frozen_time)` → (app, sampler): the monitor's own sampler
    ("monitor" profile) over the fake NVML through the real pynvml, ticked by the test
    (`sampler.tick()`); closed at the end."""
    opened: list[Sampler] = []

    def make(scenario: object, frozen_time: float = 1.0) -> tuple[GputuiApp, Sampler]:
        fake_nvml.use(scenario, frozen_time=frozen_time)
        sampler = Sampler.open(interval=1.0, profile="monitor")
        opened.append(sampler)
        return GputuiApp(AppOptions(), sampler=sampler), sampler

    yield make
    for sampler in opened:
        sampler.close()
