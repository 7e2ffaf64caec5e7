"""The fleet view: one row per host × GPU, alerts underneath; polling runs off the event loop.

The poller (gputui.fleet.poller) reads each host on a daemon thread of its own and
says when something changed; this app then shows `poller.snapshot()` (an immutable
record, taken without waiting for the network). A hung or huge host holds up only its
own thread, so the good hosts keep their refresh, and `q` never waits for a request:
the threads are daemons and are simply abandoned. SIGHUP (exit 129), and a terminal
that went away, end the app the way `q` does; SIGTERM too (143) (`terminal_watch.exit_on_sigterm`,
installed by the command around `run()`), so the terminal is given back. Like the monitor,
it writes only the cells that changed (gputui.ui.terminal_writer.DiffingDriver).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import threading
from typing import ClassVar

from rich.text import Text
from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.message import Message
from textual.widgets import DataTable, Header, Static

from gputui.fleet.model import FleetSnapshot, HostState, local_clock
from gputui.fleet.poller import Poller
from gputui.fleet.view import alert_text, host_rows
from gputui.safe_text import printable
from gputui.ui.terminal_watch import watch_terminal
from gputui.ui.terminal_writer import diffing_driver
from gputui.ui.widgets.footer import KeyFooter

COLUMNS = ("Host", "GPU", "Model", "Util", "SM active", "Memory", "Power", "Temp",
           "Throttle / state")
STATUS_STYLE = {
    "ok": "",
    "throttling": "bold magenta",
    "hot": "bold yellow",
    "lost": "bold red",
    "stale": "yellow",
    "down": "bold red",
    "error": "yellow",
    "pending": "dim",
    "nogpu": "dim",
}
SEVERITY_STYLE = {"critical": "bold red", "warning": "yellow"}


class FleetChanged(Message):
    """A host's state changed (posted from a polling thread; at most one pending)."""


class FleetApp(App[None]):
    TITLE = "gputui fleet"
    CSS = """
    #status { height: 1; padding: 0 1; color: $text-muted; }
    #fleet { height: 1fr; }
    #alerts { height: auto; max-height: 12; padding: 0 1; border-top: solid $primary; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("q", "quit", "Quit"),
        Binding("r", "refresh", "Refresh now"),
    ]

    def __init__(self, poller: Poller, *, interval: float = 2.0) -> None:
        super().__init__(driver_class=diffing_driver())  # only the cells that changed
        self.poller = poller
        self.interval = interval
        self.snapshot: FleetSnapshot | None = None
        self.polls = 0  # snapshots shown so far (tests wait on it)
        self._pending = threading.Event()
        self._stop_watch: threading.Event | None = None

    def compose(self) -> ComposeResult:
        yield Header()
        yield Static("connecting…", id="status")
        yield DataTable(id="fleet", cursor_type="row", zebra_stripes=True)
        yield Static("", id="alerts")
        yield KeyFooter()

    def on_mount(self) -> None:
        table = self.query_one("#fleet", DataTable)
        table.add_columns(*COLUMNS)
        if not self.is_headless:
            asyncio.get_running_loop().add_signal_handler(
                signal.SIGHUP, lambda: self.exit(return_code=128 + signal.SIGHUP))
            self._stop_watch = watch_terminal(self._terminal_gone)
        self.poller.start(self._news)
        self._redraw()  # every host "waiting for the first answer" (where they are known)
        # Redrawn every interval even without news: "last seen … ago" and retry countdowns.
        self.set_interval(self.interval, self._redraw)

    def _terminal_gone(self) -> None:
        """On the watcher's thread, when the terminal is gone (ssh dropped, tmux killed):
        a normal shutdown writes reset sequences, and with the pty gone that write can
        block forever. The fleet view keeps nothing to save, so it leaves at once."""
        with contextlib.suppress(Exception):
            self.poller.close()
        os._exit(0)

    def on_unmount(self) -> None:
        self.poller.close()
        if self._stop_watch is not None:
            self._stop_watch.set()
        if not self.is_headless:
            asyncio.get_running_loop().remove_signal_handler(signal.SIGHUP)

    def _news(self) -> None:
        # Called on polling threads: never blocks, and at most one message is pending, so
        # many hosts answering at once cost one redraw.
        if self._pending.is_set():
            return
        self._pending.set()
        try:
            self.post_message(FleetChanged())
        except RuntimeError:
            pass  # the event loop is gone; nobody to show it to

    def on_fleet_changed(self, message: FleetChanged) -> None:
        self._pending.clear()
        self._redraw()

    def _redraw(self) -> None:
        snap = self.poller.snapshot()
        if snap is not None:
            self.show(snap)

    def action_refresh(self) -> None:
        self.poller.refresh()

    def show(self, snap: FleetSnapshot) -> None:
        self.snapshot = snap
        self.polls += 1
        table = self.query_one("#fleet", DataTable)
        cursor = table.cursor_row
        table.clear()
        for row in host_rows(snap):
            style = STATUS_STYLE.get(row.status, "")
            table.add_row(*(Text(c, style=style) for c in row.cells), key=row.key)
        if table.row_count:
            table.move_cursor(row=min(cursor, table.row_count - 1))
        up = sum(1 for h in snap.hosts if h.state is HostState.UP)
        gpus = sum(len(h.gpus) for h in snap.hosts)
        self.query_one("#status", Static).update(Text(
            f"{printable(snap.source)}: {up}/{len(snap.hosts)} hosts up, {gpus} GPUs — "
            f"updated {local_clock(snap.time)}, every {self.interval:g}s"))
        alerts = snap.alerts()
        text = Text()
        if not alerts:
            text.append("No alerts.", style="green")
        for i, a in enumerate(alerts):
            if i:
                text.append("\n")
            text.append(f"{a.severity.upper():8} ", style=SEVERITY_STYLE.get(a.severity, ""))
            text.append(alert_text(a))
        self.query_one("#alerts", Static).update(text)
