"""The GPU panels and compact rows as a user sees them: the real `gputui` in tmux against
the fake NVML's GPM scenario (an H100 whose SMs are 22.5 % active while "utilization"
says 98 %, and an A100 without GPM counters), at 80×24 and 120×40."""

from __future__ import annotations

import re
from collections.abc import Callable

import pytest

from tests.e2e.tmux import TmuxSession
from tests.fakenvml.harness import FakeNvmlLib, scenario_path

pytestmark = pytest.mark.e2e

Start = Callable[..., TmuxSession]


def test_sm_active_and_the_verdict_in_panels_at_120x40(
        tui: Start, fake_nvml_lib: FakeNvmlLib, isolated_env: dict[str, str]) -> None:
    env = fake_nvml_lib.env(scenario_path("gpm"), base=isolated_env)
    session = tui(env, width=120, height=40)
    screen = session.wait_for(["GPU 0 · NVIDIA H100 80GB HBM3", "SMs 22 % active"],
                              timeout=30)
    lines = screen.splitlines()
    h100 = next(i for i, line in enumerate(lines) if "GPU 0 · NVIDIA H100" in line)
    # SM active right under GPU util, with a value; the A100 below has a dash.
    assert re.search(r"│ GPU .* 98% ", lines[h100 + 1])
    assert re.search(r"│ SM ACT .* 22% .* 0–100%", lines[h100 + 2])
    a100 = next(i for i, line in enumerate(lines) if "GPU 1 · NVIDIA A100" in line)
    assert re.search(r"│ SM ACT \S* +— ", lines[a100 + 2])
    assert "◇ busy 98 % but SMs 22 % active, tensor cores idle: launch- or input-bound?" \
        in screen
    assert re.search(r"−5m .* now", screen)  # the graphs' time axis


def test_compact_rows_at_80x24_keep_every_column(
        tui: Start, fake_nvml_lib: FakeNvmlLib, isolated_env: dict[str, str]) -> None:
    env = fake_nvml_lib.env(scenario_path("gpm"), base=isolated_env)
    session = tui(env, width=80, height=24)
    screen = session.wait_for(["SM clk", "◇ SMs mostly idle"], timeout=30)
    header = next(line for line in screen.splitlines() if "SM clk" in line)
    assert header.split()[:9] == ["#", "GPU", "−5m…now", "SMact", "MEMC", "VRAM", "PWR",
                                  "TEMP", "SM"]
    rows = [line for line in screen.splitlines() if "MHz" in line]
    assert len(rows) == 2
    # The same columns in both rows: each value ends where its title ends.
    for title in ("GPU", "SMact", "MEMC", "VRAM", "PWR", "TEMP", "clk"):
        end = header.index(f" {title}") + 1 + len(title)
        for row in rows:
            assert row[end - 1] != " " and (end == len(row) or row[end] == " "), (title, row)
    assert re.search(r" 98% .* 22% ", rows[0]) and re.search(r" 40% .* — ", rows[1])
