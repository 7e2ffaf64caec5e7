"""`gputui export` on a box with NVIDIA (the fake NVML) and AMD GPUs (a fake sysfs tree):
one list of GPUs, each vendor's series under its own exporter's names."""

from __future__ import annotations

from pathlib import Path

from tests.fleet.conftest import ExporterFactory, value
from tests.telemetry.amd.fake_tree import paths, three_cards


def test_export_serves_both_vendors_each_under_its_own_names(
        start_exporter: ExporterFactory, tmp_path: Path) -> None:
    host = three_cards(tmp_path)
    exp = start_exporter("two_gpus", hostname="mixed", extra=tuple(paths(host)))
    page = exp.scrape()
    # Both NVIDIA GPUs first (0, 1), then the AMD ones in PCI order (2, 3, 4).
    assert value(page, "gputui_up") == 1.0
    assert value(page, "DCGM_FI_DEV_GPU_UTIL", gpu="1") >= 0
    assert not [k for k in page if k[0] == "DCGM_FI_DEV_GPU_UTIL" and ("gpu", "4") in k[1]]
    mi300 = {"gpu": "4", "gpu_id": "2", "card_model": "AMD Instinct MI300X",
             "serial_number": "a1b2c3d4e5f60718", "hostname": "mixed",
             "pci_bus_id": "00000000:C1:00.0"}
    assert value(page, "gpu_gfx_activity", **mi300) == 98.0
    assert value(page, "gpu_umc_activity", **mi300) == 40.0
    assert value(page, "gpu_used_vram", **mi300) == 150 * 1024
    assert value(page, "gpu_total_vram", **mi300) == 192 * 1024
    assert value(page, "gpu_free_vram", **mi300) == 42 * 1024
    assert value(page, "gpu_package_power", **mi300) == 612.0
    assert value(page, "gpu_junction_temperature", **mi300) == 71.0
    assert value(page, "gpu_memory_temperature", **mi300) == 64.0
    assert value(page, "gpu_energy_consumed", **mi300) == 50000 * 1e6
    assert value(page, "gpu_clock", clock_type="system", **mi300) == 2093.0
    assert value(page, "gpu_clock", clock_type="memory", **mi300) == 1300.0
    assert value(page, "pcie_speed", **mi300) == 32.0
    assert value(page, "gpu_ecc_uncorrect_total", **mi300) == 2.0
    assert value(page, "gpu_nodes_total", hostname="mixed") == 3.0
    # No edge sensor on an MI300X: no series, never 0; the RX 7900 XTX has one.
    assert not [k for k in page if k[0] == "gpu_edge_temperature" and ("gpu", "4") in k[1]]
    assert value(page, "gpu_edge_temperature", gpu="2") == 52.0
    # gputui's own series cover every GPU, with its labels.
    assert value(page, "gputui_gpu_lost", gpu="4", device="amd4") == 0.0
    assert value(page, "gputui_throttle_seconds_total", gpu="4",
                 reason="current_limit") == 0.0
    assert not [k for k in page if k[0] == "gputui_throttle_seconds_total"
                and ("gpu", "0") in k[1] and ("reason", "current_limit") in k[1]]


def test_the_fleet_reads_a_mixed_gputui_exporter_back(
        start_exporter: ExporterFactory, tmp_path: Path) -> None:
    import json
    import subprocess
    import sys

    host = three_cards(tmp_path)
    exp = start_exporter("two_gpus", hostname="mixed", extra=tuple(paths(host)))
    p = subprocess.run([sys.executable, "-m", "gputui", "fleet", exp.target, "--once",
                        "--json"], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    (h,) = json.loads(p.stdout)["hosts"]
    gpus = {g["gpu"]: g for g in h["gpus"]}
    assert sorted(gpus) == ["0", "1", "2", "3", "4"]
    mi300 = gpus["4"]
    assert (mi300["model"], mi300["util_gpu_pct"], mi300["power_w"], mi300["temp_c"],
            mi300["clock_sm_mhz"], mi300["mem_used_bytes"], mi300["mem_total_bytes"]) == (
        "AMD Instinct MI300X", 98.0, 612.0, 71.0, 2093.0, 150 * 2**30, 192 * 2**30)
    assert gpus["2"]["model"] == "AMD Radeon RX 7900 XTX"
    assert gpus["2"]["throttling"] is False  # the RX 7900 XTX reports its reasons: none


AMD_EXPORTER_PAGE = """\
# HELP gpu_gfx_activity Graphics engine usage percentage (0 - 100)
# TYPE gpu_gfx_activity gauge
gpu_gfx_activity{card_model="AMD Instinct MI300X",gpu_id="0",gpu_partition_id="0",hostname="mi-node",serial_number="S1"} 87
gpu_gfx_activity{card_model="AMD Instinct MI300X",gpu_id="1",gpu_partition_id="0",hostname="mi-node",serial_number="S2"} 12
# TYPE gpu_used_vram gauge
gpu_used_vram{card_model="AMD Instinct MI300X",gpu_id="0",gpu_partition_id="0",hostname="mi-node",serial_number="S1"} 1024
# TYPE gpu_total_vram gauge
gpu_total_vram{card_model="AMD Instinct MI300X",gpu_id="0",gpu_partition_id="0",hostname="mi-node",serial_number="S1"} 196592
# TYPE gpu_package_power gauge
gpu_package_power{card_model="AMD Instinct MI300X",gpu_id="0",gpu_partition_id="0",hostname="mi-node",serial_number="S1"} 701
# TYPE gpu_junction_temperature gauge
gpu_junction_temperature{card_model="AMD Instinct MI300X",gpu_id="0",gpu_partition_id="0",hostname="mi-node",serial_number="S1"} 77
# TYPE gpu_clock gauge
gpu_clock{card_model="AMD Instinct MI300X",clock_index="2",clock_type="system",gpu_id="0",gpu_partition_id="0",hostname="mi-node",serial_number="S1"} 2100
gpu_clock{card_model="AMD Instinct MI300X",clock_index="8",clock_type="memory",gpu_id="0",gpu_partition_id="0",hostname="mi-node",serial_number="S1"} 1300
"""  # noqa: E501


def test_parse_an_amd_device_metrics_exporter_page() -> None:
    from gputui.fleet.scrape import parse_metrics

    r = parse_metrics(AMD_EXPORTER_PAGE)
    assert (r.hostname, r.exporter) == ("mi-node", "amd-metrics-exporter")
    a, b = r.gpus
    assert (a.gpu, a.uuid, a.model, a.util_pct, a.power_w, a.temp_c, a.clock_sm_mhz) == (
        "0", "S1", "AMD Instinct MI300X", 87.0, 701.0, 77.0, 2100.0)
    assert (a.mem_used_bytes, a.mem_total_bytes) == (1024 * 2**20, 196592 * 2**20)
    assert (b.gpu, b.util_pct, b.power_w) == ("1", 12.0, None)
