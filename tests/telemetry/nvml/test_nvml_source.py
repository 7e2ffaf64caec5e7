"""NvmlSource through the real pynvml module talking to the fake libnvidia-ml.so.1."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from gputui.telemetry.nvml import NvmlSource, NvmlUnavailable
from gputui.telemetry.sampler import Sampler
from tests.fakenvml.harness import FakeNvml


def _open(**kw: object) -> NvmlSource:
    src = NvmlSource(**kw)  # type: ignore[arg-type]
    src.open()
    return src


def test_fixed_values_round_trip_with_unit_conversion(fake_nvml: FakeNvml) -> None:
    fake_nvml.use("two_gpus")
    src = _open(process_every=1)
    assert src.system.driver_version == "550.54.15"
    assert src.system.nvml_version == "12.550.54.15"
    assert src.system.cuda_driver_version == "12.4"
    (g0, g1), procs = src.read()
    info = g0.info
    assert (info.index, info.name, info.uuid, info.pci_bus_id) == (
        0, "NVIDIA A100-SXM4-80GB", "GPU-11111111-2222-3333-4444-555555555555",
        "00000000:3B:00.0")
    assert info.mem_total_bytes == 85899345920
    assert (info.temp_slowdown_c, info.temp_shutdown_c) == (90, 95)
    assert (info.clock_sm_max_mhz, info.clock_mem_max_mhz) == (1410, 1593)
    assert (info.pcie_gen_max, info.pcie_width_max) == (4, 16)
    assert g0.util_gpu_pct == 87 and g0.util_mem_pct == 45
    assert g0.mem_used_bytes == 42949672960 and g0.mem_total_bytes == 85899345920
    assert g0.power_w == 312.0 and g0.power_limit_w == 400.0  # mW → W
    assert g0.energy_j == 123456.789  # mJ → J
    assert g0.pcie_rx_bps == 524288 * 1024 and g0.pcie_tx_bps == 131072 * 1024  # KB/s → B/s
    assert g0.temp_c == 64 and g0.fan_pct == 0 and g0.pstate == 0
    assert (g0.clock_sm_mhz, g0.clock_mem_mhz) == (1410, 1593)
    assert (g0.pcie_gen, g0.pcie_width) == (4, 16)
    assert g0.ecc_uncorrected == 0 and g0.throttle_mask == 0
    assert g1.throttle_mask == 0x1 and g1.fan_pct == 30 and g1.pstate == 8
    assert sorted((p.gpu_index, p.pid, p.gpu_mem_bytes, p.kind) for p in procs) == [
        (0, 4242, 21474836480, "compute"), (0, 4343, 10737418240, "compute"),
        (1, 1999, 268435456, "graphics")]
    src.close()


def test_not_supported_is_none_and_never_asked_again(fake_nvml: FakeNvml) -> None:
    fake_nvml.use("unsupported")
    src = _open()
    first, _ = src.read()
    g0 = first[0]
    assert g0.fan_pct is None and g0.energy_j is None and g0.ecc_uncorrected is None
    assert g0.pcie_rx_bps is None and g0.violation_power_frac is None
    assert g0.util_gpu_pct is not None  # the rest is still read
    fake_nvml.reset_counts()
    for _ in range(12):  # past a slow tick too
        src.read()
    # GPU 1 supports these and is asked every tick; GPU 0 is never asked again.
    assert fake_nvml.count_for("nvmlDeviceGetFanSpeed") == 12
    assert fake_nvml.count_for("nvmlDeviceGetTotalEnergyConsumption") == 12
    assert fake_nvml.count_for("nvmlDeviceGetPcieThroughput") == 2 * 12
    src.close()


def test_older_driver_falls_back_to_older_calls(fake_nvml: FakeNvml) -> None:
    fake_nvml.use("old_driver")
    src = _open()
    (g0, *_), _ = src.read()
    assert g0.temp_c is not None and g0.mem_used_bytes is not None
    assert g0.throttle_mask is not None
    fake_nvml.reset_counts()
    src.read()
    # The missing functions are not tried again after the first failure.
    assert fake_nvml.count_for("nvmlDeviceGetTemperatureV") == 0
    assert fake_nvml.count_for("nvmlDeviceGetMemoryInfo_v2") == 0
    assert fake_nvml.count_for("nvmlDeviceGetCurrentClocksEventReasons") == 0
    assert fake_nvml.count_for("nvmlDeviceGetTemperature") > 0
    assert fake_nvml.count_for("nvmlDeviceGetCurrentClocksThrottleReasons") > 0
    src.close()


def test_lost_gpu_is_marked_and_the_others_go_on(fake_nvml: FakeNvml) -> None:
    fake_nvml.use("lost")
    src = _open()
    gpus, _ = src.read()
    assert not any(g.lost for g in gpus)
    fake_nvml.set_time(2.5)
    gpus, _ = src.read()
    assert gpus[1].lost and gpus[1].error == "GPU is lost"
    assert not gpus[0].lost and gpus[0].util_gpu_pct is not None
    fake_nvml.reset_counts()
    gpus, _ = src.read()
    assert gpus[1].lost and gpus[0].util_gpu_pct is not None
    src.close()


def test_throttle_window_shows_in_samples_and_episodes(fake_nvml: FakeNvml) -> None:
    fake_nvml.use("throttle")
    src = _open()
    sampler = Sampler(interval=1.0, nvml=src)
    for t in range(10):
        fake_nvml.set_time(float(t))
        snap = sampler.tick()
        if t == 4:
            g0 = snap.gpus[0]
            assert g0.throttle_mask == 0x40 and g0.temp_c is not None and g0.temp_c >= 90
            assert sampler.ongoing()[0].gpu_index == 0
            assert 1 not in sampler.ongoing()
    (ep,) = sampler.episodes()
    assert ep.gpu_index == 0 and ep.reasons == ["hw_thermal_slowdown"]
    assert not ep.ongoing and ep.clock_sm_before_mhz == 1410
    assert ep.min_clock_sm_mhz is not None and ep.min_clock_sm_mhz < 1410
    sampler.close()


def test_processes_are_read_every_few_ticks_only(fake_nvml: FakeNvml) -> None:
    fake_nvml.use("two_gpus")
    src = _open(process_every=5)
    fake_nvml.reset_counts()
    for _ in range(10):
        _, procs = src.read()
        assert len(procs) == 3  # cached between refreshes
    # two refreshes × two GPUs, each a two-call protocol for compute processes
    assert fake_nvml.count_for("nvmlDeviceGetComputeRunningProcesses_v3") <= 2 * 2 * 2
    src.close()


@pytest.mark.parametrize(("code", "message"), [
    (9, "NVIDIA driver not loaded"),
    (18, "NVML/driver version mismatch"),
])
def test_init_errors_become_one_line_reasons(fake_nvml: FakeNvml,
                                             make_scenario: Callable[..., Path],
                                             code: int, message: str) -> None:
    fake_nvml.use(make_scenario({"init_error": code, "device_count": 1}))
    with pytest.raises(NvmlUnavailable, match=message):
        _open()


def test_missing_library_gives_host_only_sampler(no_nvml: object) -> None:
    sampler = Sampler.open(interval=1.0)
    assert sampler.nvml is None
    assert sampler.nvml_error == "NVML library not found — is the NVIDIA driver installed?"
    snap = sampler.tick()
    assert snap.gpus == () and snap.host.hostname


def test_a_device_whose_handle_fails_is_reported_and_others_read(
        fake_nvml: FakeNvml, make_scenario: Callable[..., Path]) -> None:
    fake_nvml.use(make_scenario({"device_count": 2, "gpu.0.handle_error": 999,
                                 "gpu.1.name": "Tesla T4"}))
    src = _open()
    (g0, g1), _ = src.read()
    assert g0.error and not g0.lost
    assert g1.info.name == "Tesla T4" and g1.util_gpu_pct is not None
    src.close()


def test_violation_counters_give_fraction_of_time_throttled(
        fake_nvml: FakeNvml) -> None:
    fake_nvml.use("throttle")
    src = _open(slow_every=1)
    fake_nvml.set_time(1.0)
    src.read()
    fake_nvml.set_time(5.0)  # 2 of the last 4 s inside the HW thermal window (3..8)
    (g0, g1), _ = src.read()
    assert g0.violation_thermal_frac == pytest.approx(0.5)
    assert g1.violation_thermal_frac == pytest.approx(0.0)
    src.close()


def test_energy_lookup_by_uuid(fake_nvml: FakeNvml) -> None:
    fake_nvml.use("two_gpus")
    src = _open()
    idx = src.index_of_uuid("GPU-66666666-7777-8888-9999-000000000000")
    assert idx == 1 and src.read_energy_mj(1) == 9876543
    assert src.index_of_uuid("GPU-nope") is None
    src.close()
