"""The real `gputui` in tmux on a box with NVIDIA (the fake NVML) and AMD GPUs (a fake
sysfs tree under --path.sysfs): one list of GPUs, AMD's with their own facts."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.e2e.tmux import TmuxSession
from tests.fakenvml.harness import FakeNvmlLib, scenario_path
from tests.telemetry.amd.fake_tree import paths, three_cards

pytestmark = pytest.mark.e2e

Start = Callable[..., TmuxSession]


def test_nvidia_and_amd_gpus_in_one_monitor(tui: Start, fake_nvml_lib: FakeNvmlLib,
                                            isolated_env: dict[str, str],
                                            tmp_path: Path) -> None:
    host = three_cards(tmp_path / "box")
    env = fake_nvml_lib.env(scenario_path("two_gpus"), base=isolated_env)
    session = tui(env, *paths(host), width=200, height=60)
    screen = session.wait_for(["GPU 0 · NVIDIA A100-SXM4-80GB", "GPU 4 · AMD Instinct MI300X",
                               "GPU 2 · AMD Radeon RX 7900 XTX"], timeout=30)
    assert "amdgpu 6.8.0-45-generic" in screen  # beside NVIDIA's driver in the header
    assert "150.0/192.0G" in screen and "612/750W" in screen  # the MI300X's VRAM and power
    assert "Traceback" not in screen
    # The compact rows name the AMD GPUs too, without the vendor word.
    session.send_keys("c")
    session.wait_for(["Instinct MI300X", "Radeon RX 7900 XTX"], timeout=10)
