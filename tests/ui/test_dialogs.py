"""The kill dialog and the alerts screen at 80×24, 120×40 and 200×60:
the dialog's keys are on its buttons and a cancel says so; an alert's whole sentence can
be read however narrow the terminal."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator

import pytest
from textual.widgets import Button, DataTable

from gputui.ui.screens.alerts import AlertsScreen
from gputui.ui.screens.confirm import ConfirmScreen
from tests.ui.helpers import (
    feed,
    gpu,
    lost,
    proc,
    screen_text,
    snap,
    spy_notifications,
    throttled,
)
from tests.ui.test_app import make_app

SIZES = ((80, 24), (120, 40), (200, 60))
LOST_SENTENCE = ("GPU 1: NVIDIA A100-SXM4-80GB is lost (fell off the bus or the driver gave "
                 "up on it); the other GPUs are still monitored")


@pytest.fixture
def child() -> Iterator[int]:
    """A process of ours to point the dialog at (it is never signalled: every test cancels)."""
    p = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    yield p.pid
    assert p.poll() is None, "a cancelled dialog signalled the process"
    p.kill()
    p.wait()


@pytest.mark.parametrize("size", SIZES)
async def test_kill_dialog_shows_its_keys_and_a_cancel_says_what_happened(
        size: tuple[int, int], child: int) -> None:
    app, sampler = make_app()
    async with app.run_test(size=size) as pilot:
        seen = spy_notifications(app)
        sampler.ingest(snap(0, [gpu(0)], [proc(child, 0, 30, started=None)]))
        await pilot.pause()
        await pilot.press("k")
        await pilot.pause()
        assert isinstance(app.screen, ConfirmScreen)
        text = screen_text(app)
        assert "Send SIGTERM [y]" in text and "Cancel [n]" in text
        assert app.screen.focused is app.screen.query_one("#no", Button)
        await pilot.press("enter")  # the focused Cancel
        await pilot.pause()
        assert not isinstance(app.screen, ConfirmScreen)
        assert ("information", f"Cancelled: SIGTERM not sent to PID {child}") in seen


async def test_n_and_escape_also_say_nothing_was_sent(child: int) -> None:
    app, sampler = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        seen = spy_notifications(app)
        sampler.ingest(snap(0, [gpu(0)], [proc(child, 0, 30, started=None)]))
        await pilot.pause()
        for key in ("n", "escape"):
            await pilot.press("K")
            await pilot.pause()
            assert isinstance(app.screen, ConfirmScreen)
            await pilot.press(key)
            await pilot.pause()
            assert not isinstance(app.screen, ConfirmScreen)
        assert [m for _, m in seen] == [f"Cancelled: SIGKILL not sent to PID {child}"] * 2


@pytest.mark.parametrize("size", SIZES)
async def test_the_selected_alert_is_shown_whole(size: tuple[int, int]) -> None:
    app, sampler = make_app()
    async with app.run_test(size=size) as pilot:
        feed(sampler, 0, 2, lambda t: snap(t, [gpu(0, t), gpu(1, t)]))
        feed(sampler, 2, 4, lambda t: snap(t, [throttled(0, t), lost(1)]))
        await pilot.pause()
        await pilot.press("a")
        await pilot.pause()
        assert isinstance(app.screen, AlertsScreen)
        # The episodes table has the focus: its selected row is spelled out.
        text = " ".join(screen_text(app).split())
        assert "GPU 0: HW thermal slowdown" in text
        await pilot.press("tab")  # the active alerts
        await pilot.pause()
        active = app.screen.query_one("#active", DataTable)
        assert app.screen.focused is active
        rows = [str(active.get_row_at(i)[4]) for i in range(active.row_count)]
        while LOST_SENTENCE not in rows[active.cursor_row]:
            await pilot.press("down")
            await pilot.pause()
        # Wrapped into the detail pane (line breaks and borders removed), never cut.
        flat = " ".join(line.strip(" │╭╮╰╯─") for line in screen_text(app).splitlines())
        assert LOST_SENTENCE in " ".join(flat.split()), screen_text(app)
