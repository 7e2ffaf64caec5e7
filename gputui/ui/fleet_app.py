"""The fleet view: one row per host × GPU, alerts underneath; scraping runs off the event loop.

The poller (gputui.fleet.scrape) does every blocking call; this app only asks it
for a FleetSnapshot on a daemon thread and shows the immutable result, posted back
as a message. Not a Textual thread worker: those run on asyncio's default executor,
which is joined when the app exits, so a poll in flight would keep the process alive
after `q`. A daemon thread is simply abandoned.
"""

from __future__ import annotations

import threading
from datetime import UTC, datetime
from typing import ClassVar

from rich.text import Text
from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.message import Message
from textual.widgets import DataTable, Footer, Header, Static

from gputui.fleet.model import FleetSnapshot, local_clock
from gputui.fleet.scrape import Poller
from gputui.fleet.view import host_rows

COLUMNS = ("Host", "GPU", "Model", "Util", "Memory", "Power", "Temp", "Throttle / state")
STATUS_STYLE = {
    "ok": "",
    "throttling": "bold magenta",
    "hot": "bold yellow",
    "lost": "bold red",
    "down": "bold red",
    "error": "yellow",
    "pending": "dim",
    "nogpu": "dim",
}
SEVERITY_STYLE = {"critical": "bold red", "warning": "yellow"}


class Polled(Message):
    """A poll finished (posted from the polling thread)."""

    def __init__(self, snapshot: FleetSnapshot) -> None:
        super().__init__()
        self.snapshot = snapshot


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
        super().__init__()
        self.poller = poller
        self.interval = interval
        self.snapshot: FleetSnapshot | None = None
        self.polls = 0  # snapshots shown so far (tests wait on it)
        self._busy = False

    def compose(self) -> ComposeResult:
        yield Header()
        yield Static("connecting…", id="status")
        yield DataTable(id="fleet", cursor_type="row", zebra_stripes=True)
        yield Static("", id="alerts")
        yield Footer()

    def on_mount(self) -> None:
        table = self.query_one("#fleet", DataTable)
        table.add_columns(*COLUMNS)
        self.set_interval(self.interval, self._start_poll)
        self._start_poll(force=True)

    def action_refresh(self) -> None:
        self._start_poll(force=True)

    def _start_poll(self, force: bool = False) -> None:
        # One poll at a time: a slow host must not pile up overlapping scrapes.
        if self._busy:
            return
        self._busy = True
        threading.Thread(target=self._poll_in_thread, args=(force,), name="gputui-fleet-poll",
                         daemon=True).start()

    def _poll_in_thread(self, force: bool) -> None:
        try:
            snap = self.poller.poll(force)
        except Exception as exc:  # keep the view alive and say what went wrong
            snap = FleetSnapshot(time=datetime.now(UTC), source="fleet",
                                 error=f"polling failed: {type(exc).__name__}: {exc}")
        try:
            self.post_message(Polled(snap))  # never blocks; dropped once the app is closing
        except RuntimeError:
            pass  # the event loop is gone; nobody to show it to

    def on_polled(self, message: Polled) -> None:
        self.show(message.snapshot)

    def show(self, snap: FleetSnapshot) -> None:
        self._busy = False
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
        up = sum(1 for h in snap.hosts if h.state.value == "up")
        gpus = sum(len(h.gpus) for h in snap.hosts)
        self.query_one("#status", Static).update(
            f"{snap.source}: {up}/{len(snap.hosts)} hosts up, {gpus} GPUs — "
            f"updated {local_clock(snap.time)}, every {self.interval:g}s")
        alerts = snap.alerts()
        text = Text()
        if not alerts:
            text.append("No alerts.", style="green")
        for i, a in enumerate(alerts):
            if i:
                text.append("\n")
            text.append(f"{a.severity.upper():8} ", style=SEVERITY_STYLE.get(a.severity, ""))
            text.append(a.text)
        self.query_one("#alerts", Static).update(text)
