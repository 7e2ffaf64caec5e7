"""Notice that the terminal is gone even when no SIGHUP says so.

When the terminal's far side disappears (tmux server killed with SIGKILL, an ssh
session torn down while the process ignores or never gets SIGHUP), Textual's input
thread reads EOF in a loop and the app spins at 100 % CPU forever. A daemon thread
asks the tty for its attributes once a second; on a hung-up pty that fails (EIO), and
the app is told. A thread, not a timer: the event loop may be stuck writing to the
dead terminal.
"""

from __future__ import annotations

import os
import termios
import threading
from collections.abc import Callable, Iterable

CHECK_EVERY_S = 1.0


def terminal_lost(fds: Iterable[int]) -> bool:
    """True when any of these (terminal) fds no longer works as a terminal."""
    for fd in fds:
        try:
            termios.tcgetattr(fd)
        except (termios.error, OSError):
            return True
    return False


def watch_terminal(on_lost: Callable[[], object], fds: Iterable[int] = (0, 1),
                   interval: float = CHECK_EVERY_S) -> threading.Event:
    """Call `on_lost()` (on the watcher thread) once the terminal is gone.

    Only fds that are terminals now are watched (none: nothing is started). Set the
    returned event to stop watching.
    """
    stop = threading.Event()
    ttys = []
    for fd in fds:
        try:
            if os.isatty(fd):
                ttys.append(fd)
        except OSError:
            pass
    if not ttys:
        return stop

    def run() -> None:
        while not stop.wait(interval):
            if terminal_lost(ttys):
                on_lost()
                return

    threading.Thread(target=run, name="gputui-terminal-watch", daemon=True).start()
    return stop
