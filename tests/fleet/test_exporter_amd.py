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
