"""The Doctor screen as a user sees it: the real `gputui` in tmux against the fake NVML,
`d` opens it, the table fills in, the verdict line appears, the GPU rows stay beside it."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.e2e.tmux import TmuxSession, gputui_command, tmux_available
from tests.fakenvml.harness import FakeNvmlLib, scenario_path

pytestmark = [pytest.mark.e2e,
              pytest.mark.skipif(not tmux_available(), reason="tmux is not installed")]


def test_d_runs_the_doctor_in_the_tui(fake_nvml_lib: FakeNvmlLib, tmp_path: Path) -> None:
    base = {k: v for k, v in os.environ.items()
            if not k.startswith(("FAKENVML_", "GPUTUI_", "TMUX")) and k != "LD_LIBRARY_PATH"}
    base["GPUTUI_CONFIG_DIR"] = str(tmp_path / "config")
    base["GPUTUI_DATA_DIR"] = str(tmp_path / "data")
    env = fake_nvml_lib.env(scenario_path("doctor_faults"), base=base)
    session = TmuxSession(gputui_command(), env=env, width=160, height=50)
    try:
        session.start()
        session.wait_for("H100 80GB HBM3", timeout=30)
        session.send_keys("d")
        screen = session.wait_for("doctor: FAIL", timeout=60)
        assert "Traceback" not in screen
        assert "pcie_width" in screen and "x8" in screen and "x16" in screen
        # The live compact rows beside the table: GPU 0's power brake, in words.
        assert "HW power brake" in screen
        session.send_keys("Escape")
        session.wait_for("GPU 0 ·", timeout=15)
    finally:
        session.close()
