"""The worker's event pipe: a private duplicate of the original stdout.

fd 1 itself is pointed at stderr, so anything torch or a C library prints can never split
one of our JSON lines (the protocol is in `gputui.bench.events`).
"""

from __future__ import annotations

import os
import sys
import time

from gputui.bench import events


class Emitter:
    """Writes one event per line, whole, with its time since the worker started."""

    def __init__(self, fd: int, t0: float) -> None:
        self.fd = fd
        self.t0 = t0

    def __call__(self, event: events.Event) -> None:
        data = (events.encode(event, time.monotonic() - self.t0) + "\n").encode()
        while data:
            n = os.write(self.fd, data)
            data = data[n:]


def claim_stdout() -> int:
    """Keep the real stdout for events; send everything else written to fd 1 to stderr."""
    sys.stdout.flush()
    fd = os.dup(1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return fd
