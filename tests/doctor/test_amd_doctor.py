"""`gputui doctor` on AMD GPUs (fake sysfs trees): the checks that apply, with the same
rules as on NVIDIA, and the ones that do not skipped."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.telemetry.amd.fake_tree import paths, three_cards


def doctor(tmp_path: Path, *args: str) -> tuple[int, dict]:
    cfg = tmp_path / "empty.toml"
    cfg.write_text("")
    env = {**os.environ, "LD_LIBRARY_PATH": "/nonexistent", "GPUTUI_CONFIG": str(cfg)}
    p = subprocess.run([sys.executable, "-m", "gputui", "doctor", "--quick", "--json", *args],
                       capture_output=True, text=True, timeout=60, env=env, cwd=tmp_path)
    assert p.stderr == ""
    return p.returncode, json.loads(p.stdout)


def by_gpu(doc: dict, gpu: int) -> dict[str, tuple[str, object]]:
    return {c["id"]: (c["status"], c["value"]) for c in doc["checks"] if c["gpu"] == gpu}


def test_the_amd_checks_judge_each_gpu(tmp_path: Path) -> None:
    host = three_cards(tmp_path / "box")
    host.cards[2].set_throttle(46)  # the RX 7900 XTX: PROCHOT asserted at idle
    rc, doc = doctor(tmp_path, *paths(host))
    assert rc == 1  # the MI300X's uncorrected errors and the PROCHOT fail
    assert [g["name"] for g in doc["gpus"]] == [
        "AMD Radeon RX 7900 XTX", "AMD Instinct MI250X", "AMD Instinct MI300X"]
    rx, mi250, mi300 = by_gpu(doc, 0), by_gpu(doc, 1), by_gpu(doc, 2)
    assert mi300["ecc_volatile"] == ("fail", 2)
    assert mi300["pcie_gen"] == ("pass", 5) and mi300["pcie_width"] == ("pass", 16)
    assert mi300["temp_headroom"] == ("pass", 39)  # 71 °C against its 110 °C limit
    assert mi300["fan"][0] == "skip" and mi300["vram_idle"] == ("warn", 78.1)
    assert rx["throttle_idle"] == ("fail", "prochot")
    assert rx["ecc_volatile"][0] == "skip"  # no RAS counters on a consumer card
    assert rx["fan"] == ("pass", 35)
    assert mi250["throttle_idle"] == ("pass", "none") and mi250["ecc_volatile"] == ("pass", 0)
    assert {c["id"] for c in doc["checks"] if c["gpu"] is None} == {"amd_driver"}


def test_gpus_select_amd_gpus_by_their_gputui_index(tmp_path: Path) -> None:
    host = three_cards(tmp_path / "box")
    rc, doc = doctor(tmp_path, *paths(host), "--gpus", "1")
    assert [g["index"] for g in doc["gpus"]] == [1]
    assert {c["gpu"] for c in doc["checks"]} == {None, 1}
    assert rc == 0  # the MI250X: every check passes or warns
