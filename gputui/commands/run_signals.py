"""Ctrl-C, SIGTERM and SIGHUP while a command supervises benchmark runs (`bench run`,
`bench suite run`): the run is cancelled and its partial result saved, never this process
killed mid-write; a terminal that hung up is let go of."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from gputui.bench.run_queue import RunQueue


def terminal_fds() -> list[int]:
    """stdout and stderr where they are a terminal. Taken before the run: once the
    terminal has hung up, isatty() may no longer say so."""
    return [fd for fd in (1, 2) if _isatty(fd)]


@contextmanager
def cancel_on_signals(queue: RunQueue, terminal_fds: list[int]) -> Iterator[list[int]]:
    """Ctrl-C (and SIGTERM/SIGHUP) cancel the worker instead of killing us mid-write.

    The first signal asks the worker to stop and report partial numbers; a second
    SIGINT kills it at once. The worker is in its own session, so the terminal's
    Ctrl-C reaches only this process. After SIGHUP the terminal is gone: whatever of
    stdout/stderr pointed at it now points at /dev/null, so the result is still saved
    and the exit status is still 129 (a write to a dead terminal is not a failure).
    """
    received: list[int] = []

    def handler(signum: int, frame: FrameType | None) -> None:
        if received and signum == signal.SIGINT:
            queue.kill()
            return
        received.append(signum)
        if signum == signal.SIGHUP:
            detach_from_terminal(terminal_fds)
        else:
            # On a terminal the progress bar owns the current line; elsewhere no blank line.
            lead = "\n" if sys.stderr.isatty() else ""
            with contextlib.suppress(OSError):
                print(f"{lead}gputui: cancelling… (Ctrl-C again to stop at once)",
                      file=sys.stderr)
        queue.cancel()

    previous = {}
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        try:
            previous[sig] = signal.signal(sig, handler)
        except (ValueError, OSError):  # not the main thread, or no such signal here
            pass
    try:
        yield received
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


def _isatty(fd: int) -> bool:
    try:
        return os.isatty(fd)
    except OSError:
        return False


def detach_from_terminal(fds: list[int]) -> None:
    """Point the terminal's fds (and only those: a redirected --json stays) at /dev/null."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
    except OSError:
        return
    for fd in fds:
        with contextlib.suppress(OSError):
            os.dup2(devnull, fd)
    os.close(devnull)
