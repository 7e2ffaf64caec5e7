"""Leaving the terminal as it was: when it is gone, and when we are told to stop.

`watch_terminal`: notice that the terminal is gone even when no SIGHUP says so.

When the terminal's far side disappears (tmux server killed with SIGKILL, an ssh
session torn down while the process ignores or never gets SIGHUP), Textual's input
thread reads EOF in a loop and the app spins at 100 % CPU forever (the monitor's own
input thread stops reading at EOF, Textual's does not). A daemon thread asks the tty for
its attributes every CHECK_EVERY_S; on a hung-up pty that fails (EIO), and the app is
told. A thread, not a timer: the event loop may be stuck writing to the dead terminal.

`exit_on_sigterm`: SIGTERM closes a Textual app cleanly (terminal restored) instead
of killing it in the alternate screen with mouse reporting on and the cursor hidden.
"""

from __future__ import annotations

import asyncio
import os
import termios
import threading
from collections.abc import Callable, Iterable

# Nobody is watching a terminal that is gone: a few seconds to notice is soon enough, and
# each wake-up of an idle thread costs this VM 36–113 µs of CPU.
CHECK_EVERY_S = 3.0


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


# Sequences that undo what a Textual app turned on: alternate screen, mouse reporting
# (every mode Textual enables), bracketed paste, hidden cursor.
RESTORE_SEQUENCES = ("\x1b[?1000l\x1b[?1002l\x1b[?1003l\x1b[?1006l\x1b[?1015l"
                     "\x1b[?2004l\x1b[?1049l\x1b[?25h")
# If the app has not closed this long after SIGTERM (its loop is stuck), restore the
# terminal by hand and leave.
SIGTERM_GRACE_S = 2.0
SIGTERM_EXIT_CODE = 143  # 128 + SIGTERM: what a shell reports for a terminated job


def restore_terminal(fd: int | None = None, attrs: list | None = None) -> None:
    """Put the terminal back the way a shell wants it, without Textual's help."""
    if fd is None:
        try:
            fd = os.open("/dev/tty", os.O_WRONLY | os.O_NOCTTY)
        except OSError:
            fd = 1
    try:
        os.write(fd, RESTORE_SEQUENCES.encode())
        if attrs is not None:
            termios.tcsetattr(fd, termios.TCSANOW, attrs)
    except (OSError, termios.error):
        pass


def exit_on_sigterm(app: object, code: int = SIGTERM_EXIT_CODE,
                    grace_s: float = SIGTERM_GRACE_S) -> Callable[[], None]:
    """Make SIGTERM close a running Textual `app` the normal way (so it restores the
    terminal: main screen, mouse off, cursor on) with exit status `code`.

    Call before `app.run()`; call the returned function after it to put the previous
    handler back. If the app's loop is stuck and it has not closed within `grace_s`,
    the terminal is restored by hand and the process leaves with `os._exit(code)`.
    """
    import signal

    attrs = None
    try:
        attrs = termios.tcgetattr(0) if os.isatty(0) else None
    except (termios.error, OSError):
        pass

    def force() -> None:
        restore_terminal(None, attrs)
        os._exit(code)

    def on_term(signum: int, frame: object) -> None:
        # A Python-level handler runs on the main thread (the loop's): ask the loop to
        # exit (thread-safe wake-up), and arm a watchdog in case the loop never runs it.
        timer = threading.Timer(grace_s, force)
        timer.daemon = True
        timer.start()
        try:
            # The app's loop, when the signal lands while it runs: the handler runs on
            # the loop's thread, inside run_forever.
            loop: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:  # before the app started or after it ended
            loop = None
        exit_fn = app.exit
        try:
            if loop is not None:
                loop.call_soon_threadsafe(lambda: exit_fn(return_code=code))
            else:
                exit_fn(return_code=code)
        except RuntimeError:  # the loop is already closed: nothing left to restore
            force()

    previous = signal.signal(signal.SIGTERM, on_term)

    def undo() -> None:
        signal.signal(signal.SIGTERM, previous)

    return undo
