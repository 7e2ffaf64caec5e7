"""SIGTERM (or SIGHUP) to the fleet view under a real terminal (tmux): it exits cleanly
and gives the terminal back — main screen, mouse reporting off, cursor shown."""

from __future__ import annotations

import os
import signal
from collections.abc import Callable

import psutil
import pytest

from tests.e2e.tmux import TmuxSession, gputui_command, tmux_available
from tests.fleet.conftest import PageServer, gpu_page, wait_for

pytestmark = pytest.mark.skipif(not tmux_available(), reason="tmux is not installed")

# A shell stays in the pane after gputui ends (tmux reports no cursor for a dead pane),
# so the terminal state gputui left behind can be read.
AFTER = 'exec_status=0; "$@" || exec_status=$?; echo "gputui exited $exec_status"; sleep 120'


def _state(tmux: TmuxSession) -> str:
    return tmux.tmux("display-message", "-p", "-t", tmux.name,
                     "#{alternate_on}|#{mouse_any_flag}|#{cursor_flag}").strip()


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP])
def test_a_signal_restores_the_terminal(page_server: Callable[[bytes], PageServer],
                                        sig: signal.Signals) -> None:
    srv = page_server(gpu_page("node-z"))
    cmd = ["sh", "-c", AFTER, "sh", *gputui_command(), "fleet", "--interval", "0.5", srv.target]
    with TmuxSession(cmd) as tmux:
        tmux.wait_for(["node-z", "1 up, 0 down"], timeout=30)
        assert _state(tmux) == "1|1|0"  # what the app turned on, and must turn off again
        shell = wait_for(lambda: tmux.pid, 10, "the shell's pid")
        (gputui,) = psutil.Process(shell).children()
        os.kill(gputui.pid, sig)
        tmux.wait_for(f"gputui exited {128 + sig}", timeout=15)
        assert _state(tmux) == "0|0|1"
