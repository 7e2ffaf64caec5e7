"""ctrl+l: after another program wrote over the monitor, the screen is the app's again.

The monitor's real writer (DiffingDriver) runs in front of a stand-in for the terminal's
file that keeps what reaches it; the minimal terminal of test_terminal_writer shows it.
The writer sends only what it believes changed, so garbage written by someone else stays
until ctrl+l makes it forget what it believes is on the screen.
"""

from __future__ import annotations

import asyncio
import signal
from typing import ClassVar

import pytest
from textual import events
from textual.drivers.linux_driver import LinuxDriver
from textual.geometry import Size

from gputui.telemetry.sampler import Sampler
from gputui.ui import terminal_writer
from gputui.ui.app import GputuiApp
from gputui.ui.fleet_app import FleetApp
from gputui.ui.options import AppOptions
from gputui.ui.terminal_writer import DiffingDriver
from tests.ui.helpers import feed, gpu, snap
from tests.ui.test_terminal_writer import Terminal

WIDTH, HEIGHT = 100, 30


class TerminalFile(LinuxDriver):
    """Below the writer: what Linux's driver would send to the tty, kept; no tty touched."""

    sent: ClassVar[list[str]] = []

    @property
    def is_headless(self) -> bool:
        return False  # Textual renders frames only for a driver with output

    def write(self, data: str) -> None:
        TerminalFile.sent.append(data)

    def flush(self) -> None:
        pass

    def start_application_mode(self) -> None:
        size = Size(*(self._size or (WIDTH, HEIGHT)))
        asyncio.run_coroutine_threadsafe(self._app._post_message(events.Resize(size, size)),
                                         loop=asyncio.get_running_loop())

    def disable_input(self) -> None:
        pass

    def stop_application_mode(self) -> None:
        pass

    def close(self) -> None:
        pass


class WriterOnTerminal(DiffingDriver, TerminalFile):
    """The monitor's writer, writing into TerminalFile (its MRO puts it under the writer)."""


@pytest.fixture
def terminal(monkeypatch: pytest.MonkeyPatch) -> object:
    # The writer asks the process's terminal for its size: this one's, here.
    monkeypatch.setattr(terminal_writer, "_terminal_size", lambda: (WIDTH, HEIGHT))
    handlers = {s: signal.getsignal(s) for s in (signal.SIGTSTP, signal.SIGCONT)}
    TerminalFile.sent = []
    yield
    for sig, handler in handlers.items():  # Linux's driver installs its own
        signal.signal(sig, handler)


def test_the_fleet_view_writes_through_the_monitors_writer() -> None:
    assert FleetApp(poller=None).driver_class is DiffingDriver  # type: ignore[arg-type]


async def test_ctrl_l_paints_over_what_another_program_wrote(terminal: object) -> None:
    sampler = Sampler(interval=1.0, nvml=None)
    app = GputuiApp(AppOptions(), sampler=sampler)
    app.driver_class = WriterOnTerminal
    screen = Terminal(WIDTH, HEIGHT)

    def shown() -> list[list[tuple[str, tuple[object, ...]]]]:
        while TerminalFile.sent:
            screen.feed(TerminalFile.sent.pop(0))
        return screen.screen()

    async with app.run_test(size=(WIDTH, HEIGHT), headless=False) as pilot:
        for t in range(3):
            feed(sampler, t, t + 1, lambda t: snap(t, [gpu(0, t), gpu(1, t)]))
            await pilot.pause()
        await pilot.pause(0.2)
        ours = shown()
        assert any("GPU" in "".join(c for c, _ in row) for row in ours)

        screen.feed("\x1b[2J\x1b[12;5Hmake: *** [all] Error 1")  # another program's output
        app.screen.refresh(repaint=True)  # a repaint alone: the writer sends no cell again
        await pilot.pause(0.2)
        assert shown() != ours

        await pilot.press("ctrl+l")
        await pilot.pause(0.2)
        assert shown() == ours
