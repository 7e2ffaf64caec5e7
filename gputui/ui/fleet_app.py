"""The fleet view: one row per host, problems first; Enter opens a host's GPUs and jobs.

The poller (gputui.fleet.poller reading each host, or gputui.fleet.prometheus reading
Prometheus' per-host aggregates) works on daemon threads and says when something
changed; this app then shows `poller.snapshot()` (an immutable record, taken without
waiting for the network). The hosts are drawn by `HostList`, which formats only the
rows on screen, so a thousand hosts cost what forty do. `/` filters the hosts by text,
`s` changes their order, Enter opens one (`FleetHostScreen`; the poller reads that
host's GPUs while it is open), Esc goes back. A hung or huge host holds up only its own
thread, and `q` never waits for a request: the threads are daemons and are simply
abandoned. SIGHUP (exit 129), and a terminal that went away, end the app the way `q`
does; SIGTERM too (143) (`terminal_watch.exit_on_sigterm`, installed by the command
around `run()`), so the terminal is given back. Like the monitor, it writes only the
cells that changed (gputui.ui.terminal_writer.DiffingDriver).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import threading
import time
from datetime import UTC, datetime
from typing import ClassVar

from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.message import Message
from textual.widgets import Header, Input

from gputui.fleet.host_table import ORDERS, arrange, columns_for, fleet_line
from gputui.fleet.model import FleetSnapshot, FleetSummary, local_clock
from gputui.fleet.poller import Poller
from gputui.safe_text import printable
from gputui.ui.screens.fleet_host import FleetHostScreen
from gputui.ui.terminal_watch import watch_terminal
from gputui.ui.terminal_writer import diffing_driver
from gputui.ui.textual_adapter import FORGET_REMOVED_EVERY_S, forget_removed_widgets
from gputui.ui.widgets.footer import KeyFooter
from gputui.ui.widgets.host_list import HostList, header
from gputui.ui.widgets.text_lines import TextLines


class FleetChanged(Message):
    """A host's state changed (posted from a polling thread; at most one pending)."""


class FleetApp(App[None]):
    TITLE = "gputui fleet"
    CSS = """
    #summary { height: 1; padding: 0 1; text-style: bold; }
    #status { padding: 0 1; color: $text-muted; }
    #columns { height: 1; padding: 0 1; text-style: bold; background: $boost; }
    #hosts { height: 1fr; padding: 0 1; }
    #filter { dock: bottom; height: 3; display: none; }
    #filter.shown { display: block; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("q", "quit", "Quit"),
        Binding("r", "refresh", "Refresh now"),
        Binding("slash", "filter", "Filter"),
        Binding("s", "sort(1)", "Sort"),
        Binding("S", "sort(-1)", "Sort back", show=False),
        Binding("escape", "clear_filter", "Clear filter", show=False),
    ]

    def __init__(self, poller: Poller, *, interval: float = 2.0,
                 advice: str | None = None) -> None:
        super().__init__(driver_class=diffing_driver())  # only the cells that changed
        self.poller = poller
        self.interval = interval
        self.advice = advice  # said once, in the status line (direct mode, many targets)
        self.snapshot: FleetSnapshot | None = None
        self.polls = 0  # snapshots shown so far (tests wait on it)
        self.order = 0  # index into host_table.ORDERS
        self.filter_text = ""
        self._pending = threading.Event()
        self._stop_watch: threading.Event | None = None
        self._shown_at = 0.0  # time.monotonic() of the last show()

    def compose(self) -> ComposeResult:
        yield Header()
        yield TextLines("connecting…", id="summary")
        yield TextLines("", id="status")
        yield TextLines("", id="columns")
        yield HostList(id="hosts")
        yield Input(placeholder="filter: host, target, problem (down, lost, xid, throttling, "
                    "hot, idle held) or alert; Enter keeps it, Esc clears it", id="filter")
        yield KeyFooter()

    def on_mount(self) -> None:
        if not self.is_headless:
            asyncio.get_running_loop().add_signal_handler(
                signal.SIGHUP, lambda: self.exit(return_code=128 + signal.SIGHUP))
            self._stop_watch = watch_terminal(self._terminal_gone)
        self.query_one(HostList).focus()
        self.poller.start(self._news)
        self._redraw()  # every host "waiting for the first answer" (where they are known)
        # Redrawn every interval even without news ("last seen … ago", retry countdowns),
        # unless news came within it.
        self.set_interval(self.interval, self._tick)
        # Host screens and toasts come and go for as long as the view runs.
        self.set_interval(FORGET_REMOVED_EVERY_S, forget_removed_widgets)

    def _tick(self) -> None:
        if time.monotonic() - self._shown_at >= self.interval * 0.9:
            self._redraw()

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

    # --- keys ---------------------------------------------------------------------------

    def action_refresh(self) -> None:
        self.poller.refresh()

    def action_filter(self) -> None:
        box = self.query_one("#filter", Input)
        box.add_class("shown")
        box.value = self.filter_text
        box.focus()

    def on_input_changed(self, event: Input.Changed) -> None:
        self.filter_text = event.value.strip()
        self._show_hosts()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        self._close_filter()

    def action_clear_filter(self) -> None:
        self.filter_text = ""
        self.query_one("#filter", Input).value = ""
        self._close_filter()
        self._show_hosts()

    def _close_filter(self) -> None:
        self.query_one("#filter", Input).remove_class("shown")
        self.query_one(HostList).focus()

    def action_sort(self, step: int) -> None:
        self.order = (self.order + step) % len(ORDERS)
        self._show_hosts()

    def on_host_list_chosen(self, message: HostList.Chosen) -> None:
        self.open_host(message.target)

    def open_host(self, target: str) -> None:
        self.poller.open(target)
        self.push_screen(FleetHostScreen(target, self.snapshot),
                         callback=lambda _: self.poller.open(None))

    # --- drawing ------------------------------------------------------------------------

    def show(self, snap: FleetSnapshot) -> None:
        self.snapshot = snap
        self.polls += 1
        self._shown_at = time.monotonic()
        if isinstance(self.screen, FleetHostScreen) and self.screen.is_mounted:
            self.screen.show(snap)
        self.query_one("#summary", TextLines).set(fleet_line(FleetSummary.of(snap.summaries)))
        self._show_hosts()

    def _show_hosts(self) -> None:
        snap = self.snapshot
        if snap is None:
            return
        prometheus = snap.source != "targets"
        columns = columns_for(prometheus)
        order = ORDERS[self.order]
        rows = arrange(snap.summaries, order, self.filter_text)
        hosts = self.query_one(HostList)
        hosts.set_rows(rows, columns, datetime.now(UTC))
        self.query_one("#columns", TextLines).set(header(columns, hosts.name_width))
        shown = "" if not self.filter_text else (
            f" · filter {printable(self.filter_text)!r}: {len(rows)} of {len(snap.summaries)}")
        read = "" if snap.poll_s is None else f" (read in {snap.poll_s:.2f} s)"
        how = "" if not prometheus else (
            f" · history {snap.history_s / 60:.0f} min" if snap.history_s else "")
        if snap.aggregation:
            how += f" · per-host figures: {snap.aggregation}"
        lines = [f"{printable(snap.source)}: updated {local_clock(snap.time)}{read}, every "
                 f"{self.interval:g}s · sort: {order.name}{shown}{how}"]
        if snap.error:
            lines.append(f"ERROR: {printable(snap.error)}")
        notes = [n for n in (snap.warning, self.advice) if n]
        lines += [printable(n) for n in notes]
        self.query_one("#status", TextLines).set("\n".join(lines))
