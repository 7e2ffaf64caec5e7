"""Driving the benchmark screen in Pilot tests: an app with a hand-fed sampler, the fake
worker, bounded waits, and reading the results table."""

from __future__ import annotations

import importlib.util
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psutil
import pytest
from textual.pilot import Pilot
from textual.widgets import Input

from gputui.ui.app import GputuiApp
from gputui.ui.bench_session import BenchSession
from gputui.ui.screens.bench import BenchScreen, CatalogList, ResultsTable
from tests.ui.helpers import make_app as make_app  # shared with the non-bench UI tests

REPO = Path(__file__).resolve().parents[2]
FAKE = REPO / "tests" / "bench" / "fake_worker.py"
HAS_TORCH = importlib.util.find_spec("torch") is not None
needs_torch = pytest.mark.skipif(not HAS_TORCH, reason="needs torch (the bench extra)")
SIZE = (140, 50)


def use_fake_worker(app: GputuiApp, mode: str) -> BenchSession:
    session = app.bench
    session.worker_cmd = [sys.executable, str(FAKE)]
    session.env = {**os.environ, "FAKE_WORKER_MODE": mode, "PYTHONPATH": str(REPO)}
    session.grace_s = 2.0
    return session


async def wait_until(pilot: Pilot[Any], cond: Callable[[], object], what: str,
                     tries: int = 600) -> None:
    """Bounded polling (never a timing assertion): up to `tries` × 0.1 s. Once `cond`
    holds, one more pause lets the screen lay out and draw what changed with it (a
    screen read at once could still have the old layout: a new multi-line error cut)."""
    for _ in range(tries):
        if cond():
            await pilot.pause()
            return
        await pilot.pause(0.1)
    raise AssertionError(f"timed out waiting for {what}")


async def open_bench(pilot: Pilot[Any]) -> BenchScreen:
    await pilot.press("b")
    await pilot.pause()
    screen = pilot.app.screen
    assert isinstance(screen, BenchScreen)
    return screen


async def pick(pilot: Pilot[Any], screen: BenchScreen, name: str) -> None:
    catalog = screen.query_one(CatalogList)
    catalog.focus()
    await pilot.pause()
    while screen.bench_name != name:
        await pilot.press("down")
    await pilot.pause()


async def type_into(pilot: Pilot[Any], screen: BenchScreen, wid: str, text: str) -> None:
    field = screen.query_one(f"#{wid}", Input)
    field.focus()
    field.value = ""
    await pilot.press(*text)


def gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def table_rows(screen: BenchScreen) -> list[list[str]]:
    table = screen.query_one(ResultsTable)
    return [[str(c) for c in table.get_row_at(i)] for i in range(table.row_count)]
