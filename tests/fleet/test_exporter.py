"""`gputui export` as a real subprocess over the fake NVML library: names, labels, exact values."""

from __future__ import annotations

import signal
import subprocess

import pytest

from gputui.fleet.exporter import ListenAddressError, parse_listen
from tests.fleet.conftest import (
    LOOPBACK,
    ExporterFactory,
    gputui_cmd,
    http_get,
    listening_socket,
    value,
    wait_for,
)

MIB = 1024 * 1024
GPU0 = {
    "gpu": "0",
    "UUID": "GPU-11111111-2222-3333-4444-555555555555",
    "device": "nvidia0",
    "modelName": "NVIDIA A100-SXM4-80GB",
    "Hostname": "node-a",
    "pci_bus_id": "00000000:3B:00.0",
}
GPU1 = {
    "gpu": "1",
    "UUID": "GPU-66666666-7777-8888-9999-000000000000",
    "device": "nvidia1",
    "modelName": "NVIDIA GeForce RTX 4090",
    "Hostname": "node-a",
    "pci_bus_id": "00000000:AF:00.0",
}
EXACT = {
    "device_count": 2,
    "gpu.0.name": GPU0["modelName"],
    "gpu.0.uuid": GPU0["UUID"],
    "gpu.0.pci_bus_id": GPU0["pci_bus_id"],
    "gpu.0.mem_total": 85899345920,  # 81920 MiB
    "gpu.0.mem_used": 3 * 2**30 + 5 * MIB + 123,  # 3077 MiB and a few bytes
    "gpu.0.util_gpu": 87,
    "gpu.0.util_mem": 45,
    "gpu.0.power_mw": 250000,
    "gpu.0.power_limit_mw": 400000,
    "gpu.0.temp_c": 64,
    "gpu.0.temp_slowdown_c": 90,
    "gpu.0.fan_pct": 30,
    "gpu.0.clock_sm_mhz": 1410,
    "gpu.0.clock_mem_mhz": 1593,
    "gpu.0.pcie_tx_kbps": 131072,
    "gpu.0.pcie_rx_kbps": 524288,
    "gpu.0.pcie_gen": 4,
    "gpu.0.pcie_width": 16,
    "gpu.0.throttle_reasons": 0x4,  # SW power cap
    "gpu.1.name": GPU1["modelName"],
    "gpu.1.uuid": GPU1["UUID"],
    "gpu.1.pci_bus_id": GPU1["pci_bus_id"],
    "gpu.1.mem_total": 25757220864,
    "gpu.1.mem_used": 1073741824,
    "gpu.1.power_mw": 0,  # no power drawn: the energy counter stays exactly at its start
    "gpu.1.energy_mj": 123456789,
    "gpu.1.temp_c": 38,
    "gpu.1.throttle_reasons": 0x1,  # idle: not throttling
    "gpu.1.unsupported": ["fan"],
}


def test_dcgm_names_labels_and_exact_values(start_exporter: ExporterFactory) -> None:
    exp = start_exporter(EXACT, hostname="node-a")
    page = http_get(exp.url)
    s = exp.scrape()
    assert value(s, "DCGM_FI_DEV_POWER_USAGE", **GPU0) == 250.0
    assert value(s, "DCGM_FI_DEV_FB_USED", **GPU0) == 3077
    assert value(s, "DCGM_FI_DEV_FB_FREE", **GPU0) == (85899345920 - EXACT["gpu.0.mem_used"]) // MIB
    assert value(s, "DCGM_FI_DEV_FB_TOTAL", **GPU0) == 81920
    assert value(s, "DCGM_FI_DEV_GPU_UTIL", **GPU0) == 87
    assert value(s, "DCGM_FI_DEV_MEM_COPY_UTIL", **GPU0) == 45
    assert value(s, "DCGM_FI_DEV_GPU_TEMP", **GPU0) == 64
    assert value(s, "DCGM_FI_DEV_SLOWDOWN_TEMP", **GPU0) == 90
    assert value(s, "DCGM_FI_DEV_SM_CLOCK", **GPU0) == 1410
    assert value(s, "DCGM_FI_DEV_MEM_CLOCK", **GPU0) == 1593
    assert value(s, "DCGM_FI_DEV_FAN_SPEED", **GPU0) == 30
    assert value(s, "DCGM_FI_DEV_PCIE_TX_THROUGHPUT", **GPU0) == 131072  # KB/s, as NVML
    assert value(s, "DCGM_FI_DEV_PCIE_RX_THROUGHPUT", **GPU0) == 524288
    assert value(s, "DCGM_FI_DEV_PCIE_LINK_GEN", **GPU0) == 4
    assert value(s, "DCGM_FI_DEV_ENFORCED_POWER_LIMIT", **GPU0) == 400.0
    assert value(s, "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS", **GPU0) == 0x4
    assert value(s, "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS", **GPU1) == 0x1
    assert value(s, "DCGM_FI_DEV_POWER_USAGE", **GPU1) == 0.0
    # prometheus_client's parser reports counter samples as NAME_total.
    assert value(s, "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION_total", **GPU1) == 123456789
    assert value(s, "DCGM_FI_DEV_FB_USED", **GPU1) == 1024
    # A field the device does not support is absent, never 0.
    assert not any(n == "DCGM_FI_DEV_FAN_SPEED" and ("gpu", "1") in ls for n, ls in s)
    # The exact dcgm-exporter spelling on the wire: a counter without a _total suffix.
    assert "# TYPE DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION counter\n" in page
    assert "# TYPE DCGM_FI_DEV_GPU_UTIL gauge\n" in page
    assert "# TYPE gputui_throttle_episodes_total counter\n" in page
    # gputui's own metrics
    assert value(s, "gputui_up") == 1
    assert value(s, "gputui_gpu_lost", **GPU0) == 0
    assert value(s, "gputui_gpu_lost", **GPU1) == 0
    assert value(s, "gputui_host_cpu_percent", Hostname="node-a") >= 0
    assert 0 < value(s, "gputui_host_memory_used_bytes", Hostname="node-a") \
        <= value(s, "gputui_host_memory_total_bytes", Hostname="node-a")
    assert not any(n == "gputui_nvml_error_info" for n, _ in s)
    # SW power cap from the first tick: one episode on GPU 0, none on the idle GPU 1.
    assert value(s, "gputui_throttle_episodes_total", **GPU0) == 1
    assert value(s, "gputui_throttle_episodes_total", **GPU1) == 0
    assert value(s, "gputui_throttle_seconds_total", reason="hw_thermal_slowdown", **GPU0) == 0
    assert exp.stop(signal.SIGTERM) == 0


def test_throttle_counters_grow_during_a_throttle_window(
        start_exporter: ExporterFactory) -> None:
    exp = start_exporter({
        "device_count": 2,
        "gpu.0.uuid": "GPU-aaaaaaaa-0000-0000-0000-000000000000",
        "gpu.0.throttle_reasons": 0,
        "gpu.0.throttle_from_s": 1.5,
        "gpu.0.throttle_until_s": 5,
        "gpu.0.during.throttle_reasons": 0x40 | 0x4,
        "gpu.1.throttle_reasons": 0,
    }, hostname="node-t", interval=0.2)
    gpu0 = {"gpu": "0", "Hostname": "node-t"}

    def throttled_seconds() -> float:
        return value(exp.scrape(), "gputui_throttle_seconds_total", reason="hw_thermal_slowdown",
                     **gpu0)

    first = wait_for(lambda: throttled_seconds() > 0 and throttled_seconds(), 15,
                     "throttled seconds to start counting")
    wait_for(lambda: throttled_seconds() > first, 10, "throttled seconds to grow")
    s = exp.scrape()
    assert value(s, "gputui_throttle_episodes_total", **gpu0) == 1
    assert value(s, "gputui_throttle_seconds_total", reason="sw_power_cap", **gpu0) > 0
    assert value(s, "gputui_throttle_seconds_total", reason="sync_boost", **gpu0) == 0
    # After the window the mask clears and the counters stop growing (they never go down).
    wait_for(lambda: value(exp.scrape(), "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS", **gpu0) == 0,
             15, "the throttle window to end")
    after = exp.scrape()
    assert value(after, "gputui_throttle_episodes_total", **gpu0) == 1
    assert value(after, "gputui_throttle_seconds_total", reason="hw_thermal_slowdown",
                 **gpu0) >= first
    assert value(after, "gputui_throttle_episodes_total", gpu="1") == 0
    assert exp.stop(signal.SIGINT) == 0


def test_without_nvml_still_serves_host_metrics(start_exporter: ExporterFactory) -> None:
    exp = start_exporter({"init_error": 9}, hostname="cpu-only")  # NVML_ERROR_DRIVER_NOT_LOADED
    s = exp.scrape()
    assert value(s, "gputui_up") == 0
    reason = [dict(ls)["reason"] for n, ls in s if n == "gputui_nvml_error_info"]
    assert reason and "driver not loaded" in reason[0]
    assert value(s, "gputui_host_memory_total_bytes", Hostname="cpu-only") > 0
    assert not any(n.startswith("DCGM_") for n, _ in s)
    assert exp.stop() == 0
    assert "no GPU data" in exp.stderr.read_text()


def test_port_in_use_is_one_line_and_exit_1() -> None:
    with listening_socket() as port:
        proc = subprocess.run(gputui_cmd("export", "--listen", f"{LOOPBACK}:{port}"),
                              capture_output=True, text=True, timeout=30)
    assert proc.returncode == 1
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("gputui: ") and "in use" in lines[0]


@pytest.mark.parametrize("listen", ["nonsense", "127.0.0.1:99999", "999.1.1.1:9400",
                                    "127.0.0.1:", "my host:9400", "::1:9400"])
def test_malformed_address_is_one_line_and_exit_2(listen: str) -> None:
    proc = subprocess.run(gputui_cmd("export", "--listen", listen), capture_output=True,
                          text=True, timeout=30)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("gputui: ")


@pytest.mark.parametrize(("text", "host", "port"), [
    ("127.0.0.1:9400", "127.0.0.1", 9400),
    ("9401", "127.0.0.1", 9401),
    ("localhost:9402", "127.0.0.1", 9402),
    (":9403", "0.0.0.0", 9403),
    ("[::1]:9404", "::1", 9404),
    ("127.0.0.1:0", "127.0.0.1", 0),
])
def test_parse_listen(text: str, host: str, port: int) -> None:
    addr = parse_listen(text)
    assert (addr.host, addr.port) == (host, port)


def test_parse_listen_rejects_names_that_need_dns() -> None:
    with pytest.raises(ListenAddressError):
        parse_listen("gpu-node-1:9400")
