"""NVLink links: link count, per-link state and per-link rates (GPM), and the
data sent + received since boot (dcgm-exporter's DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL), in
the sample and the snapshot JSON, through the real pynvml and the fake library."""

from __future__ import annotations

import json

import pytest

from gputui.telemetry.model import NvLink
from gputui.telemetry.nvml import ALL_FIELDS, MONITOR_FIELDS, NvmlSource
from tests.cli import CliEnv
from tests.fakenvml.harness import FakeNvml, FakeNvmlLib, derive_scenario, scenario_path

MIB = 1024 * 1024
# gpm.conf: 4096 MiB/s TX and 2048 MiB/s RX in total, over links 0-2 (link 3 is down).
H100_LINKS = (
    NvLink(0, True, 4096 / 3 * MIB, 2048 / 3 * MIB),
    NvLink(1, True, 4096 / 3 * MIB, 2048 / 3 * MIB),
    NvLink(2, True, 4096 / 3 * MIB, 2048 / 3 * MIB),
    NvLink(3, False, 0.0, 0.0),
)
NVLINK_BYTES = (123456 + 654321) * 1024  # gpm.conf: nvlink_tx_kib + nvlink_rx_kib


def test_links_states_and_rates(fake_nvml: FakeNvml) -> None:
    fake_nvml.use("gpm")
    src = NvmlSource(fields=ALL_FIELDS)
    ticks = iter(range(1000, 2000))  # a second per reading (GPM pairs need a gap)
    src.gpm_clock = lambda: float(next(ticks))  # type: ignore[method-assign]
    src.open()
    (g0, g1), _ = src.read()
    # First reading: states known, rates need a second GPM sample.
    assert g0.nvlink_links == tuple(NvLink(n.link, n.active) for n in H100_LINKS)
    assert g1.nvlink_links is None  # the A100 scenario has no NVLink
    assert (g0.nvlink_bytes_total, g1.nvlink_bytes_total) == (NVLINK_BYTES, None)
    (g0, g1), _ = src.read()
    assert g0.nvlink_links == H100_LINKS
    assert fake_nvml.count_for("nvmlDeviceGetNvLinkState") == 5 + 1  # H100: 4 + the 5th; A100: 1
    src.close()


def test_snapshot_json_lists_the_links(fake_nvml_lib: FakeNvmlLib, cli_env: CliEnv) -> None:
    proc = cli_env(["snapshot", "--json"], fake_nvml_lib.env(scenario_path("gpm")))
    assert proc.returncode == 0, proc.stderr
    g0, g1 = json.loads(proc.stdout)["gpus"]
    assert g0["nvlink_links"] == [
        {"link": n.link, "active": n.active, "tx_bps": n.tx_bps, "rx_bps": n.rx_bps}
        for n in H100_LINKS]
    assert g1["nvlink_links"] is None
    assert (g0["nvlink_bytes_total"], g1["nvlink_bytes_total"]) == (NVLINK_BYTES, None)


def test_a_driver_without_the_nvlink_data_counters_is_asked_once(fake_nvml: FakeNvml) -> None:
    # NVLink links, but nvmlDeviceGetFieldValues NOT_SUPPORTED (an older driver).
    fake_nvml.use({"device_count": 1, "gpu.0.nvlink": 1, "gpu.0.nvlink_links": 2,
                   "gpu.0.unsupported": "field_values"})
    src = NvmlSource(fields=ALL_FIELDS, slow_every=1)  # every read a slow tick
    src.open()
    for _ in range(3):
        (g0,), _ = src.read()
        assert g0.nvlink_bytes_total is None and g0.nvlink_links is not None
    # Once for the NVLink counters, once for the memory temperature: neither again.
    assert fake_nvml.count_for("nvmlDeviceGetFieldValues") == 2
    src.close()


def test_per_link_rates_follow_the_traffic_and_add_up_to_the_total(
        fake_nvml: FakeNvml, tmp_path) -> None:  # type: ignore[no-untyped-def]
    # The NVLink TX total swings by ±3000 MiB/s over 7 s: each reading's links must carry
    # that reading's share, not an earlier tick's (links are reused only when unchanged).
    fake_nvml.use(derive_scenario("gpm", {"gpu.0.gpm_nvlink_tx_mibps.wave": "3000,7"},
                                  tmp_path / "wave.conf"), frozen_time=1000.0)
    src = NvmlSource(fields=ALL_FIELDS)
    now = [1000.0]
    src.gpm_clock = lambda: now[0]  # type: ignore[method-assign]
    src.open()
    totals = []
    for t in range(1000, 1006):
        fake_nvml.set_time(float(t))
        now[0] = float(t)
        (g0, _), _ = src.read()
        if t == 1000:
            continue  # rates need a second GPM sample
        links = g0.nvlink_links
        assert links is not None and g0.nvlink_tx_bps is not None
        assert sum(n.tx_bps or 0.0 for n in links) == pytest.approx(g0.nvlink_tx_bps)
        assert links[3].tx_bps == 0.0  # link 3 is down
        totals.append(g0.nvlink_tx_bps)
    assert len(set(totals)) == 5  # the traffic moved every second
    src.close()


def test_the_monitor_reads_per_link_rates_only_while_asked(fake_nvml: FakeNvml) -> None:
    # The live monitor's fields: link states and the all-links totals every tick; the
    # per-link rates (36 more GPM metrics on an 18-link GPU) while a view asks for them.
    fake_nvml.use("gpm")
    src = NvmlSource(fields=MONITOR_FIELDS)
    ticks = iter(range(1000, 2000))
    src.gpm_clock = lambda: float(next(ticks))  # type: ignore[method-assign]
    src.open()
    src.read()
    (g0, _), _ = src.read()
    assert g0.nvlink_links == tuple(NvLink(n.link, n.active) for n in H100_LINKS)
    assert (g0.nvlink_tx_bps, g0.nvlink_rx_bps) == (4096 * MIB, 2048 * MIB)
    src.want_link_rates(True)
    (g0, _), _ = src.read()
    assert g0.nvlink_links == H100_LINKS
    src.want_link_rates(False)
    (g0, _), _ = src.read()
    assert g0.nvlink_links == tuple(NvLink(n.link, n.active) for n in H100_LINKS)
    assert (g0.nvlink_tx_bps, g0.nvlink_rx_bps) == (4096 * MIB, 2048 * MIB)
    src.close()
    # Recordings and exports ("link_rates" in their fields) read them without asking.
    src = NvmlSource(fields=ALL_FIELDS)
    src.open()
    src.want_link_rates(False)
    assert src.link_rates_wanted
    src.close()
