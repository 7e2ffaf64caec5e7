"""The real `gputui` in tmux against the fake NVML (as a user sees
them): per-process SM% / MEM% / ENC% / DEC% in the process table, the GPU detail screen
(`i`), and a clock-change alert."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.e2e.tmux import TmuxSession
from tests.fakenvml.harness import FakeNvmlLib, write_scenario

pytestmark = pytest.mark.e2e

Start = Callable[..., TmuxSession]


@pytest.fixture
def sleeper() -> Iterator[int]:
    """A real process for the fake GPU to list (psutil describes it)."""
    child = subprocess.Popen(["sleep", "300"])
    yield child.pid
    child.kill()
    child.wait()


def test_process_columns_detail_screen_and_clock_alert(
        tui: Start, fake_nvml_lib: FakeNvmlLib, isolated_env: dict[str, str],
        tmp_path: Path, sleeper: int) -> None:
    scenario = write_scenario(tmp_path / "detail.conf", {
        "device_count": 1, "gpu.0.processes": {sleeper: 30 * 2**30},
        "gpu.0.process_util": f"{sleeper}:87:41:3:12",
        "gpu.0.mem_temp_c": 71, "gpu.0.temp_mem_max_c": 95,
        "gpu.0.nvlink": 1, "gpu.0.nvlink_links": 4, "gpu.0.nvlink_down_mask": 8,
        "gpu.0.clock_events_at_s": [2.0, 2.1, 2.2]})
    session = tui(fake_nvml_lib.env(scenario, base=isolated_env), width=160, height=50)
    # No CONTAINER column: the sleeper runs in none. Its share of the GPU's energy: it has
    # the GPU to itself.
    session.wait_for(["SM%", "MEM%", "ENC%", "DEC%", "POWER", "ENERGY"], timeout=30)
    row = session.wait_for(f" {sleeper} ", timeout=15)
    line = next(ln for ln in row.splitlines() if f" {sleeper} " in ln)
    assert "sleep 300" in line and " 87 " in line and " 41 " in line and " 12 " in line
    # Three clock changes in 0.2 s: one alert (its toast may be gone: read the screen).
    session.send_keys("a")
    # (The monitor's toast says the same words: wait for the alerts screen's kind column.)
    screen = session.wait_for(["GPU 0: clocks changed 3 times", "clock_change"], timeout=15)
    assert screen.count("clock_change") == 1
    session.send_keys("Escape")
    # Wait before the next key: ESC followed at once by "i" reads as alt+i.
    session.wait_for("COMMAND", timeout=10)
    session.send_keys("i")
    screen = session.wait_for(["Identity", "memory (HBM)       71°C of limit 95°C",
                               "links              4, 3 up", "link 3             down"],
                              timeout=10)
    assert "Traceback" not in screen
    session.send_keys("Escape")
    session.wait_for("COMMAND", timeout=10)  # back on the monitor


DETAIL_LABELS = ("SM clock in tick", "energy", "RX / TX")


def _detail_lines(screen: str) -> dict[str, str]:
    """The detail screen's line for each of DETAIL_LABELS (label → the rest of the line,
    up to the box's right border)."""
    out = {}
    for line in screen.splitlines():
        for label in DETAIL_LABELS:
            if f"│ {label}  " in line:
                out[label] = line.split(f"│ {label}", 1)[1].split("│", 1)[0].strip()
    return out


def test_detail_screen_reads_the_fields_the_monitor_does_not(
        tui: Start, fake_nvml_lib: FakeNvmlLib, isolated_env: dict[str, str],
        tmp_path: Path) -> None:
    """Energy, the SM clock's range within the tick and PCIe RX/TX: the fake GPU has them,
    so the detail screen (`i`) shows values, never N/A."""
    scenario = write_scenario(tmp_path / "fields.conf", {"device_count": 1})
    session = tui(fake_nvml_lib.env(scenario, base=isolated_env), width=160, height=50)
    session.wait_for("COMMAND", timeout=30)
    session.send_keys("i")
    session.wait_for(["Identity", *DETAIL_LABELS], timeout=10)
    deadline = time.monotonic() + 10
    lines: dict[str, str] = {}
    while time.monotonic() < deadline:  # the fields come with the next reading
        lines = _detail_lines(session.capture())
        # Until then they say "reading…".
        if len(lines) == len(DETAIL_LABELS) and not any(
                "N/A" in v or "reading" in v for v in lines.values()):
            break
        time.sleep(0.1)
    assert len(lines) == len(DETAIL_LABELS) and not any("N/A" in v for v in lines.values()), \
        session.capture()
    assert "MHz – " in lines["SM clock in tick"] and "/s / " in lines["RX / TX"], lines
