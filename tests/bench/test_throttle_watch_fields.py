"""The runner's throttle watcher reads only what throttling needs."""

from __future__ import annotations

from gputui.bench.throttle_watch import ThrottleWatch


def test_watch_reads_no_pcie_throughput_and_no_processes(fake_nvml) -> None:
    fake_nvml.use({"device_count": 2})
    watch = ThrottleWatch.start(None, None)
    assert watch is not None
    sampler = watch._sampler
    assert sampler.nvml.fields == frozenset({"clock_mem"})
    for _ in range(3):
        sampler.tick()
    watch.stop()
    # Reasons, clocks, temperature and power were read; the ~20 ms PCIe throughput call
    # and the process list were not.
    assert fake_nvml.count_for("nvmlDeviceGetCurrentClocksEventReasons") >= 2
    assert fake_nvml.count_for("nvmlDeviceGetClockInfo") >= 2
    assert fake_nvml.count_for("nvmlDeviceGetTemperatureV") + fake_nvml.count_for(
        "nvmlDeviceGetTemperature") >= 2
    assert fake_nvml.count_for("nvmlDeviceGetPowerUsage") >= 2
    assert fake_nvml.count_for("nvmlDeviceGetPcieThroughput") == 0
    # The process list (milliseconds, serialised in the driver) is never due again.
    assert sampler.nvml.process_every >= 1_000_000
