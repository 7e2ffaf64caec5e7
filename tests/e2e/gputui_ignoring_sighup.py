"""`gputui` that never sees SIGHUP: for the e2e test of a terminal that vanishes silently.

SIGHUP is ignored, and gputui's own attempt to handle it is turned into a no-op, so
the only way it can notice that its terminal is gone is the dead tty itself.
"""

from __future__ import annotations

import signal
import sys

_real_signal = signal.signal


def _signal(signum: int, handler: object) -> object:
    if signum == signal.SIGHUP:
        return signal.SIG_IGN
    return _real_signal(signum, handler)  # type: ignore[arg-type]


if __name__ == "__main__":
    _real_signal(signal.SIGHUP, signal.SIG_IGN)
    signal.signal = _signal  # type: ignore[assignment]
    sys.argv[0] = "gputui"
    from gputui.cli import main

    sys.exit(main())
