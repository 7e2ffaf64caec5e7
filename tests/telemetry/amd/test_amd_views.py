"""AMD GPUs as a user meets them: `gputui snapshot --json` and `gputui export` over fake
sysfs/procfs trees (--path.sysfs, --path.procfs), a box with both vendors in one list, and
a throttle episode's notifications."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gputui.notify.events import EventTracker
from gputui.telemetry.amd import AmdSource
from gputui.telemetry.sampler import Sampler
from tests.telemetry.amd.fake_tree import FakeHost, GiB, paths, rx7900xtx, three_cards


def no_nvml_env() -> dict[str, str]:
    """NVML out of reach (an empty library path, no driver): the AMD GPUs alone."""
    return {**os.environ, "LD_LIBRARY_PATH": "/nonexistent"}


def test_snapshot_json_has_every_amd_field_exactly(tmp_path: Path) -> None:
    host = three_cards(tmp_path)
    p = subprocess.run([sys.executable, "-m", "gputui", "snapshot", "--json", *paths(host)],
                       capture_output=True, text=True, timeout=60, env=no_nvml_env(),
                       cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    assert doc["amd_driver_version"] == "6.8.0-45-generic"  # no amdgpu module version here
    amd = [g for g in doc["gpus"] if g["vendor"] == "amd"]
    # In PCI order, as nvidia-smi lists its GPUs.
    assert [g["pci_bus_id"] for g in amd] == [
        "00000000:03:00.0", "00000000:29:00.0", "00000000:C1:00.0"]
    rx, mi250, mi300 = amd
    assert {k: mi300[k] for k in (
        "name", "uuid", "util_gpu_pct", "util_mem_pct", "mem_used_bytes", "mem_total_bytes",
        "power_w", "power_limit_w", "temp_c", "temp_junction_c", "temp_edge_c", "mem_temp_c",
        "temp_slowdown_c", "temp_shutdown_c", "temp_mem_max_c", "clock_sm_mhz",
        "clock_sm_max_mhz", "clock_mem_mhz", "clock_mem_max_mhz", "fan_pct", "pcie_gen",
        "pcie_width", "pcie_gen_max", "pcie_width_max", "ecc_uncorrected", "energy_j",
        "lost", "error")} == {
        "name": "AMD Instinct MI300X", "uuid": "AMD-a1b2c3d4e5f60718",
        "util_gpu_pct": 98, "util_mem_pct": 40, "mem_used_bytes": 150 * GiB,
        "mem_total_bytes": 192 * GiB, "power_w": 612.0, "power_limit_w": 750.0,
        "temp_c": 71, "temp_junction_c": 71, "temp_edge_c": None, "mem_temp_c": 64,
        "temp_slowdown_c": 110, "temp_shutdown_c": 115, "temp_mem_max_c": 95,
        "clock_sm_mhz": 2093, "clock_sm_max_mhz": 2100, "clock_mem_mhz": 1300,
        "clock_mem_max_mhz": 1300, "fan_pct": None, "pcie_gen": 5, "pcie_width": 16,
        "pcie_gen_max": 5, "pcie_width_max": 16, "ecc_uncorrected": 2, "energy_j": 50000.0,
        "lost": False, "error": None}
    assert (rx["name"], rx["uuid"], rx["fan_pct"], rx["power_w"], rx["temp_c"],
            rx["temp_edge_c"], rx["clock_sm_mhz"], rx["throttle_reasons"],
            rx["throttling"]) == (
        "AMD Radeon RX 7900 XTX", "AMD-PCI-0000:03:00.0", 35, 181.0, 66, 52, 2400, [], False)
    assert (mi250["temp_c"], mi250["temp_edge_c"], mi250["power_w"], mi250["energy_j"]) == (
        58, 45, 389.0, 10000.0)
    # The fdinfo client is on the MI300X, with its VRAM.
    procs = [q for q in doc["processes"] if q["pid"] == 4242]
    assert [(q["gpu"], q["gpu_mem_bytes"]) for q in procs] == [(mi300["index"], 2 << 20)]


def test_a_throttle_bit_that_sets_and_clears_is_one_started_and_one_ended_event(
        tmp_path: Path) -> None:
    host = FakeHost(tmp_path)
    card = rx7900xtx(host, 0)
    src = AmdSource(host.sys, host.proc, process_every=1000, slow_every=1000)
    src.open_system()
    sampler = Sampler(interval=1.0, source=src, alerts=True)
    tracker = EventTracker()
    events: list[tuple[str, str, int | None, tuple[str, ...]]] = []
    sampler.subscribe_frames(lambda f: events.extend(
        (e.event, e.kind, e.gpu, e.reasons) for e in tracker.update(f)))
    try:
        sampler.tick()
        card.set_throttle(0)  # SMU_THROTTLER_PPT0: the power limit
        sampler.tick()
        sampler.tick()
        card.set_throttle()
        sampler.tick()
    finally:
        sampler.close()
    assert events == [("started", "throttle", 0, ("sw_power_cap",)),
                      ("ended", "throttle", 0, ("sw_power_cap",))]
    (episode,) = sampler.episodes()
    assert episode.gpu_index == 0 and not episode.ongoing


@pytest.fixture(autouse=True)
def _no_user_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = tmp_path / "empty.toml"
    cfg.write_text("")
    monkeypatch.setenv("GPUTUI_CONFIG", str(cfg))


def test_watch_rows_carry_the_amd_gpus(tmp_path: Path) -> None:
    host = three_cards(tmp_path / "box")
    p = subprocess.run([sys.executable, "-m", "gputui", "watch", "--count", "2", "--interval",
                        "0.2", "--format", "jsonl", *paths(host)], capture_output=True,
                       text=True, timeout=60, env=no_nvml_env(), cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert p.stderr == ""  # GPUs were found: no "no GPU data" line
    rows = [json.loads(line) for line in p.stdout.splitlines()]
    assert [(r["gpu"], r["name"]) for r in rows[:3]] == [
        (0, "AMD Radeon RX 7900 XTX"), (1, "AMD Instinct MI250X"), (2, "AMD Instinct MI300X")]
    assert len(rows) == 6 and rows[5]["util_gpu_pct"] == 98
