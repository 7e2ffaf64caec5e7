"""ctrl+l in a real terminal: text another program wrote over the monitor stays (the
writer sends only the cells it believes changed) until ctrl+l paints the screen again."""

from __future__ import annotations

import time
from collections.abc import Callable

from tests.e2e.tmux import TmuxSession
from tests.fakenvml.harness import FakeNvmlLib, scenario_path

GARBAGE = "OTHER-PROGRAM-WROTE-THIS"


def _header(session: TmuxSession) -> str:
    return session.capture().splitlines()[0]


def _wait_ticks(session: TmuxSession, n: int, timeout: float = 20.0) -> None:
    """Until the header's clock moved `n` times (the monitor drew `n` new frames)."""
    deadline = time.monotonic() + timeout
    last = _header(session)
    while n > 0:
        assert time.monotonic() < deadline, "the monitor stopped ticking"
        time.sleep(0.05)
        now = _header(session)
        if now != last:
            last, n = now, n - 1


def test_ctrl_l_repaints_what_another_program_wrote_over(
        fake_nvml_lib: FakeNvmlLib, isolated_env: dict[str, str],
        tui: Callable[..., TmuxSession]) -> None:
    env = fake_nvml_lib.env(scenario_path("two_gpus"), base=isolated_env)
    session = tui(env, width=120, height=40)
    session.wait_for("NVIDIA A100-SXM4-80GB", timeout=30)
    tty = session.tmux("display-message", "-p", "-t", session.name, "#{pane_tty}").strip()
    with open(tty, "w") as pane:  # as a background job or `wall` would
        pane.write(f"\x1b[34;4H{GARBAGE}\x1b[34;50H{GARBAGE}")
    _wait_ticks(session, 2)
    assert session.capture().count(GARBAGE) == 2

    session.send_keys("C-l")
    deadline = time.monotonic() + 10
    while GARBAGE in session.capture():
        assert time.monotonic() < deadline, session.capture()
        time.sleep(0.05)
    assert "Processes (" in session.capture() and "Traceback" not in session.capture()
