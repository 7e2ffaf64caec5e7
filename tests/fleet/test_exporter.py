"""`gputui export` as a real subprocess over the fake NVML library: names, labels, exact values."""

from __future__ import annotations

import signal
import time

import pytest

from gputui.cli import build_parser, main
from gputui.fleet.listen import ListenAddress, ListenAddressError, check_local, parse_listen
from tests.cli import CliEnv
from tests.fakenvml.harness import scenario_path
from tests.fleet.conftest import (
    LOOPBACK,
    ExporterFactory,
    Series,
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
    "hostname": "node-a",
    "pci_bus_id": "00000000:3B:00.0",
}
GPU1 = {
    "gpu": "1",
    "UUID": "GPU-66666666-7777-8888-9999-000000000000",
    "device": "nvidia1",
    "modelName": "NVIDIA GeForce RTX 4090",
    "hostname": "node-a",
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
    assert value(s, "gputui_host_cpu_percent", hostname="node-a") >= 0
    assert 0 < value(s, "gputui_host_memory_used_bytes", hostname="node-a") \
        <= value(s, "gputui_host_memory_total_bytes", hostname="node-a")
    assert not any(n == "gputui_nvml_error_info" for n, _ in s)
    # SW power cap from the first tick: one episode on GPU 0, none on the idle GPU 1.
    assert value(s, "gputui_throttle_episodes_total", **GPU0) == 1
    assert value(s, "gputui_throttle_episodes_total", **GPU1) == 0
    assert value(s, "gputui_throttle_seconds_total", reason="hw_thermal_slowdown", **GPU0) == 0
    assert exp.stop(signal.SIGTERM) == 0


def _scenario_value(name: str, key: str) -> float:
    for line in scenario_path(name).read_text().splitlines():
        k, sep, v = line.partition("=")
        if sep and k.strip() == key:
            text = v.split("#", 1)[0].strip()
            return float(int(text, 16)) if text.lower().startswith("0x") else float(text)
    raise KeyError(key)


def test_throttle_counters_match_the_time_spent_in_the_throttle_window(
        start_exporter: ExporterFactory) -> None:
    """throttle.conf: GPU 0 in HW thermal slowdown from t=3 s to t=8 s (fake-NVML time).

    gputui_throttle_seconds_total must track the time actually spent in that window:
    between two scrapes inside it, it grows by the time between them; after it, it
    holds the window's length. Each scrape sees a snapshot up to one sampling
    interval old, hence the tolerance. GPU 1 draws a constant power meanwhile, and
    its energy counter must grow at that power (mW × s = mJ).
    """
    interval = 0.25
    window_from = _scenario_value("throttle", "gpu.0.throttle_from_s")
    window_until = _scenario_value("throttle", "gpu.0.throttle_until_s")
    throttle_bit = int(_scenario_value("throttle", "gpu.0.during.throttle_reasons"))
    assert throttle_bit == 0x40  # hw_thermal_slowdown
    exp = start_exporter("throttle", hostname="node-t", interval=interval)
    gpu0 = {"gpu": "0", "hostname": "node-t"}
    gpu1 = {"gpu": "1", "hostname": "node-t"}

    def timed_scrape() -> tuple[float, Series]:
        t = time.monotonic()
        return t, exp.scrape()

    def mask(s: Series) -> float:
        return value(s, "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS", **gpu0)

    def hw_thermal(s: Series) -> float:
        return value(s, "gputui_throttle_seconds_total", reason="hw_thermal_slowdown", **gpu0)

    def energy(s: Series) -> float:
        return value(s, "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION_total", **gpu1)

    before = exp.scrape()
    assert mask(before) == 0 and hw_thermal(before) == 0  # started before the window
    t_a, a = wait_for(lambda: (r := timed_scrape()) and mask(r[1]) == throttle_bit and r, 20,
                      "the throttle window to start")
    # Two scrapes inside the window, a few sampling intervals apart.
    time.sleep(8 * interval)
    t_b, b = timed_scrape()
    assert mask(b) == throttle_bit, "the second scrape fell outside the window"
    grown = hw_thermal(b) - hw_thermal(a)
    assert abs(grown - (t_b - t_a)) <= interval, (grown, t_b - t_a)
    assert value(b, "gputui_throttle_episodes_total", **gpu0) == 1
    assert value(b, "gputui_throttle_seconds_total", reason="sw_power_cap", **gpu0) == 0
    assert value(b, "gputui_throttle_seconds_total", reason="hw_thermal_slowdown", **gpu1) == 0

    power_mw = value(b, "DCGM_FI_DEV_POWER_USAGE", **gpu1) * 1000
    assert power_mw == _scenario_value("throttle", "gpu.1.power_mw")
    expected_mj = power_mw * (t_b - t_a)
    assert abs((energy(b) - energy(a)) - expected_mj) <= power_mw * interval, \
        (energy(b) - energy(a), expected_mj)

    # After the window the mask clears; the counter holds the time spent inside it.
    wait_for(lambda: mask(exp.scrape()) == 0, 20, "the throttle window to end")
    after = exp.scrape()
    assert abs(hw_thermal(after) - (window_until - window_from)) <= interval, hw_thermal(after)
    assert value(after, "gputui_throttle_episodes_total", **gpu0) == 1
    assert value(after, "gputui_throttle_episodes_total", **gpu1) == 0
    time.sleep(2 * interval)
    assert hw_thermal(exp.scrape()) == hw_thermal(after)  # no longer growing
    assert exp.stop(signal.SIGINT) == 0


def test_without_nvml_still_serves_host_metrics(start_exporter: ExporterFactory) -> None:
    exp = start_exporter({"init_error": 9}, hostname="cpu-only")  # NVML_ERROR_DRIVER_NOT_LOADED
    s = exp.scrape()
    assert value(s, "gputui_up") == 0
    reason = [dict(ls)["reason"] for n, ls in s if n == "gputui_nvml_error_info"]
    assert reason and "driver not loaded" in reason[0]
    assert value(s, "gputui_host_memory_total_bytes", hostname="cpu-only") > 0
    assert not any(n.startswith("DCGM_") for n, _ in s)
    assert exp.stop() == 0
    assert "no GPU data" in exp.stderr.read_text()


def test_port_in_use_is_one_line_and_exit_1(cli_env: CliEnv) -> None:
    with listening_socket() as port:
        proc = cli_env(["export", "--listen", f"{LOOPBACK}:{port}"])
    assert proc.returncode == 1
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("gputui: ") and "in use" in lines[0]


@pytest.mark.parametrize("listen", ["nonsense", "127.0.0.1:99999", "999.1.1.1:9400",
                                    "127.0.0.1:", "my host:9400", "::1:9400"])
def test_malformed_address_is_one_line_and_exit_2(listen: str, cli_env: CliEnv) -> None:
    proc = cli_env(["export", "--listen", listen])
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


def test_default_listen_address_is_loopback_9400() -> None:
    args = build_parser().parse_args(["export"])
    addr = parse_listen(args.listen)
    assert (addr.host, addr.port) == ("127.0.0.1", 9400)
    check_local(addr)  # and it passes the this-machine check


@pytest.mark.parametrize("listen", ["[fe80::1]:9400", "192.0.2.1:9400", "[2001:db8::1]:9400"])
def test_an_address_of_another_machine_is_one_line_and_exit_2(
        listen: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """Checked before anything binds: the server class must never be reached."""
    import gputui.fleet.metrics_server as metrics_server

    def no_bind(*args: object, **kwargs: object) -> None:
        raise AssertionError("tried to bind a socket")

    monkeypatch.setattr(metrics_server, "MetricsServer", no_bind)
    assert main(["export", "--listen", listen]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("gputui: cannot listen on ")


def test_check_local_against_given_addresses() -> None:
    mine = ["10.1.2.3", "fe80::42%eth0"]
    check_local(ListenAddress("10.1.2.3", 1), mine)
    check_local(ListenAddress("127.0.0.2", 1), mine)  # all of 127/8 is loopback
    check_local(ListenAddress("0.0.0.0", 1), mine)
    check_local(ListenAddress("::", 1), mine)
    with pytest.raises(ListenAddressError, match="not an address of this machine"):
        check_local(ListenAddress("10.1.2.4", 1), mine)
    with pytest.raises(ListenAddressError, match="needs a zone"):
        check_local(ListenAddress("fe80::42", 1), mine)
