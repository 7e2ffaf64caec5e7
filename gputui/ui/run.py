"""Running the monitor in this terminal: signals, a vanished terminal, exit codes.

- SIGTERM closes the app the normal way, so the terminal is restored, and the exit
  status is 143 (128 + SIGTERM, what a shell reports for a terminated job).
- SIGHUP (ssh dropped, tmux killed) leaves at once, closing the recording: a normal
  shutdown writes reset sequences to a dead pty, which can block forever.
- No SIGHUP at all (tmux server SIGKILLed, SIGHUP ignored): a watcher thread
  notices the dead tty.
- Threads stuck forever in a hung driver call are daemon threads: they never keep
  the process from exiting.
"""

from __future__ import annotations

import signal
from typing import TYPE_CHECKING, Protocol

from gputui.ui.terminal_watch import exit_on_sigterm, watch_terminal

if TYPE_CHECKING:
    from gputui.telemetry.feed import MonitorFeed


class Monitor(Protocol):
    """What running the monitor needs of its app (gputui.ui.app.GputuiApp)."""

    feed: MonitorFeed
    return_code: int | None

    def run(self) -> int | None: ...

    def on_hangup(self) -> None: ...


def run_monitor(app: Monitor) -> int:
    """Run `app` in this terminal; returns the exit code."""

    def on_hangup(signum: int = signal.SIGHUP, frame: object = None) -> None:
        app.on_hangup()

    # A plain signal handler, not the event loop's: when the pty is gone, Textual's
    # writer can block the loop thread in a queue put, and a loop callback would never
    # run; a Python-level handler still does (blocking lock waits are interruptible).
    previous = signal.signal(signal.SIGHUP, on_hangup)
    undo_term = exit_on_sigterm(app)
    stop_watch = watch_terminal(app.on_hangup)
    try:
        result = app.run()
    finally:
        stop_watch.set()
        undo_term()
        signal.signal(signal.SIGHUP, previous)
        # Closed already as the app unmounted, unless it never got that far: the
        # recording ended, NVML closed (never blocking on a hung driver call).
        app.feed.close()
    if app.return_code not in (None, 0):
        return app.return_code
    return int(result or 0)
