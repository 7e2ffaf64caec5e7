"""The fake NVML library behaves as specified, seen through the real ``pynvml``."""

from __future__ import annotations

import ctypes
import ctypes.util
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pynvml
import pytest

from tests.fakenvml.harness import (
    REASON_GPU_IDLE,
    REASON_HW_THERMAL_SLOWDOWN,
    REASON_SW_POWER_CAP,
    read_stats,
    render_scenario,
    scenario_path,
    shipped_scenarios,
    write_scenario,
)

GIB = 1 << 30

# Every per-device key set to a distinct value.
FULL = {
    "driver_version": "555.42.06",
    "nvml_version": "12.555.42.06",
    "cuda_driver_version": 12050,
    "device_count": 2,
    "gpu.0.name": "NVIDIA H100 80GB HBM3",
    "gpu.0.uuid": "GPU-abcdef01-2345-6789-abcd-ef0123456789",
    "gpu.0.pci_bus_id": "00000000:3B:00.0",
    "gpu.0.pci_device_id": 0x233010DE,
    "gpu.0.pci_subsystem_id": 0x16C110DE,
    "gpu.0.mem_total": 80 * GIB,
    "gpu.0.mem_used": 30 * GIB,
    "gpu.0.mem_reserved": GIB // 2,
    "gpu.0.util_gpu": 91,
    "gpu.0.util_mem": 47,
    "gpu.0.power_mw": 612345,
    "gpu.0.power_limit_mw": 700000,
    "gpu.0.temp_c": 71,
    "gpu.0.temp_slowdown_c": 89,
    "gpu.0.temp_shutdown_c": 94,
    "gpu.0.temp_gpu_max_c": 86,
    "gpu.0.fan_pct": 57,
    "gpu.0.clock_sm_mhz": 1755,
    "gpu.0.clock_mem_mhz": 2619,
    "gpu.0.clock_graphics_mhz": 1740,
    "gpu.0.clock_sm_max_mhz": 1980,
    "gpu.0.clock_mem_max_mhz": 2620,
    "gpu.0.clock_graphics_max_mhz": 1970,
    "gpu.0.pstate": 2,
    "gpu.0.energy_mj": 987654321,
    "gpu.0.pcie_gen": 4,
    "gpu.0.pcie_width": 8,
    "gpu.0.pcie_gen_max": 5,
    "gpu.0.pcie_width_max": 16,
    "gpu.0.pcie_rx_kbps": 123456,
    "gpu.0.pcie_tx_kbps": 65432,
    "gpu.0.ecc_uncorrected": 3,
    "gpu.0.throttle_reasons": "0x24",
    "gpu.0.num_cores": 16896,
    "gpu.0.cc_major": 9,
    "gpu.0.cc_minor": 0,
    "gpu.0.processes": {1234: 10 * GIB, 5678: 5 * GIB},
    "gpu.0.graphics_processes": {999: 256 << 20},
    "gpu.1.name": "NVIDIA GeForce RTX 4090",
    "gpu.1.uuid": "GPU-00000000-1111-2222-3333-444444444444",
    "gpu.1.pci_bus_id": "00000000:AF:00.0",
}


@pytest.fixture
def nvml(fake_nvml):
    """pynvml initialised on the FULL scenario; yields the two handles."""
    fake_nvml.use(FULL)
    pynvml.nvmlInit()
    return [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(2)]


# --------------------------------------------------------------------------- fixed values


def test_system_values(nvml):
    assert pynvml.nvmlSystemGetDriverVersion() == "555.42.06"
    assert pynvml.nvmlSystemGetNVMLVersion() == "12.555.42.06"
    assert pynvml.nvmlSystemGetCudaDriverVersion() == 12050
    assert pynvml.nvmlSystemGetCudaDriverVersion_v2() == 12050
    assert pynvml.nvmlDeviceGetCount() == 2


def test_identity_values(nvml):
    h0, h1 = nvml
    assert pynvml.nvmlDeviceGetName(h0) == "NVIDIA H100 80GB HBM3"
    assert pynvml.nvmlDeviceGetName(h1) == "NVIDIA GeForce RTX 4090"
    assert pynvml.nvmlDeviceGetUUID(h0) == "GPU-abcdef01-2345-6789-abcd-ef0123456789"
    assert pynvml.nvmlDeviceGetIndex(h0) == 0
    assert pynvml.nvmlDeviceGetIndex(h1) == 1
    pci = pynvml.nvmlDeviceGetPciInfo(h0)
    assert pci.busId == "00000000:3B:00.0"
    assert pci.busIdLegacy == "0000:3B:00.0"
    assert (pci.domain, pci.bus, pci.device) == (0, 0x3B, 0)
    assert pci.pciDeviceId == 0x233010DE
    assert pci.pciSubSystemId == 0x16C110DE
    assert pynvml.nvmlDeviceGetPciInfo(h1).bus == 0xAF
    assert pynvml.nvmlDeviceGetCudaComputeCapability(h0) == (9, 0)
    assert pynvml.nvmlDeviceGetNumGpuCores(h0) == 16896


def test_lookup_by_uuid_and_pci_bus_id(nvml):
    by_uuid = pynvml.nvmlDeviceGetHandleByUUID("GPU-00000000-1111-2222-3333-444444444444")
    assert pynvml.nvmlDeviceGetIndex(by_uuid) == 1
    for bus_id in ("00000000:AF:00.0", "0000:af:00.0", "AF:00.0"):
        assert pynvml.nvmlDeviceGetIndex(pynvml.nvmlDeviceGetHandleByPciBusId(bus_id)) == 1
    with pytest.raises(pynvml.NVMLError_NotFound):
        pynvml.nvmlDeviceGetHandleByUUID("GPU-nope")
    with pytest.raises(pynvml.NVMLError_NotFound):
        pynvml.nvmlDeviceGetHandleByPciBusId("00000000:01:00.0")


def test_memory_v1_and_v2(nvml):
    h0 = nvml[0]
    v2 = pynvml.nvmlDeviceGetMemoryInfo(h0, version=pynvml.nvmlMemory_v2)
    assert v2.version == pynvml.nvmlMemory_v2
    assert (v2.total, v2.used, v2.reserved) == (80 * GIB, 30 * GIB, GIB // 2)
    assert v2.free == 80 * GIB - 30 * GIB - GIB // 2
    v1 = pynvml.nvmlDeviceGetMemoryInfo(h0)
    # v1 "used" is reserved + allocated, so total == free + used
    assert (v1.total, v1.used, v1.free) == (80 * GIB, 30 * GIB + GIB // 2, v2.free)


def test_memory_v2_checks_struct_version(nvml):
    with pytest.raises(pynvml.NVMLError_ArgumentVersionMismatch):
        pynvml.nvmlDeviceGetMemoryInfo(nvml[0], version=0x01000028)


def test_power_thermal_fan(nvml):
    h0 = nvml[0]
    assert pynvml.nvmlDeviceGetPowerUsage(h0) == 612345
    assert pynvml.nvmlDeviceGetEnforcedPowerLimit(h0) == 700000
    assert pynvml.nvmlDeviceGetPowerManagementLimit(h0) == 700000
    assert pynvml.nvmlDeviceGetTotalEnergyConsumption(h0) == 987654321  # t frozen at 0
    assert pynvml.nvmlDeviceGetTemperature(h0, pynvml.NVML_TEMPERATURE_GPU) == 71
    assert pynvml.nvmlDeviceGetTemperatureV(h0, pynvml.NVML_TEMPERATURE_GPU) == 71
    threshold = pynvml.nvmlDeviceGetTemperatureThreshold
    assert threshold(h0, pynvml.NVML_TEMPERATURE_THRESHOLD_SLOWDOWN) == 89
    assert threshold(h0, pynvml.NVML_TEMPERATURE_THRESHOLD_SHUTDOWN) == 94
    assert threshold(h0, pynvml.NVML_TEMPERATURE_THRESHOLD_GPU_MAX) == 86
    with pytest.raises(pynvml.NVMLError_NotSupported):
        threshold(h0, pynvml.NVML_TEMPERATURE_THRESHOLD_MEM_MAX)
    assert pynvml.nvmlDeviceGetFanSpeed(h0) == 57
    util = pynvml.nvmlDeviceGetUtilizationRates(h0)
    assert (util.gpu, util.memory) == (91, 47)


def test_clocks_pstate_pcie_ecc(nvml):
    h0 = nvml[0]
    clock, max_clock = pynvml.nvmlDeviceGetClockInfo, pynvml.nvmlDeviceGetMaxClockInfo
    assert clock(h0, pynvml.NVML_CLOCK_SM) == 1755
    assert clock(h0, pynvml.NVML_CLOCK_MEM) == 2619
    assert clock(h0, pynvml.NVML_CLOCK_GRAPHICS) == 1740
    assert max_clock(h0, pynvml.NVML_CLOCK_SM) == 1980
    assert max_clock(h0, pynvml.NVML_CLOCK_MEM) == 2620
    assert max_clock(h0, pynvml.NVML_CLOCK_GRAPHICS) == 1970
    assert pynvml.nvmlDeviceGetPerformanceState(h0) == 2
    assert pynvml.nvmlDeviceGetCurrPcieLinkGeneration(h0) == 4
    assert pynvml.nvmlDeviceGetCurrPcieLinkWidth(h0) == 8
    assert pynvml.nvmlDeviceGetMaxPcieLinkGeneration(h0) == 5
    assert pynvml.nvmlDeviceGetMaxPcieLinkWidth(h0) == 16
    assert pynvml.nvmlDeviceGetPcieThroughput(h0, pynvml.NVML_PCIE_UTIL_RX_BYTES) == 123456
    assert pynvml.nvmlDeviceGetPcieThroughput(h0, pynvml.NVML_PCIE_UTIL_TX_BYTES) == 65432
    ecc = pynvml.nvmlDeviceGetTotalEccErrors
    uncorrected = pynvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED
    assert ecc(h0, uncorrected, pynvml.NVML_VOLATILE_ECC) == 3
    assert ecc(h0, pynvml.NVML_MEMORY_ERROR_TYPE_CORRECTED, pynvml.NVML_VOLATILE_ECC) == 0
    assert pynvml.nvmlDeviceGetCurrentClocksEventReasons(h0) == 0x24
    assert pynvml.nvmlDeviceGetCurrentClocksThrottleReasons(h0) == 0x24


def test_graphics_clock_defaults_to_sm(fake_nvml):
    fake_nvml.use({"gpu.0.clock_sm_mhz": 1234, "gpu.0.clock_sm_max_mhz": 1500})
    pynvml.nvmlInit()
    h = pynvml.nvmlDeviceGetHandleByIndex(0)
    assert pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_GRAPHICS) == 1234
    assert pynvml.nvmlDeviceGetMaxClockInfo(h, pynvml.NVML_CLOCK_GRAPHICS) == 1500


def test_processes_two_call_protocol(nvml, fake_nvml):
    h0, h1 = nvml
    procs = pynvml.nvmlDeviceGetComputeRunningProcesses(h0)
    assert [(p.pid, p.usedGpuMemory) for p in procs] == [(1234, 10 * GIB), (5678, 5 * GIB)]
    assert fake_nvml.count_for("nvmlDeviceGetComputeRunningProcesses_v3") == 2
    gprocs = pynvml.nvmlDeviceGetGraphicsRunningProcesses(h0)
    assert [(p.pid, p.usedGpuMemory) for p in gprocs] == [(999, 256 << 20)]
    assert pynvml.nvmlDeviceGetComputeRunningProcesses(h1) == []
    assert pynvml.nvmlDeviceGetGraphicsRunningProcesses(h1) == []


def test_processes_insufficient_size_in_c(nvml):
    fn = pynvml._nvmlGetFunctionPointer("nvmlDeviceGetComputeRunningProcesses_v3")
    count = ctypes.c_uint(1)
    infos = (pynvml.c_nvmlProcessInfo_v3_t * 1)()
    assert fn(nvml[0], ctypes.byref(count), infos) == pynvml.NVML_ERROR_INSUFFICIENT_SIZE
    assert count.value == 2


def test_process_memory_not_available(fake_nvml):
    fake_nvml.use({"gpu.0.processes": {42: None, 43: 1024}})
    pynvml.nvmlInit()
    procs = pynvml.nvmlDeviceGetComputeRunningProcesses(pynvml.nvmlDeviceGetHandleByIndex(0))
    assert [(p.pid, p.usedGpuMemory) for p in procs] == [(42, None), (43, 1024)]


# --------------------------------------------------------------------------- errors


UNSUPPORTED_CALLS = {
    "util": lambda h: pynvml.nvmlDeviceGetUtilizationRates(h),
    "memory": lambda h: pynvml.nvmlDeviceGetMemoryInfo(h, version=pynvml.nvmlMemory_v2),
    "power": lambda h: pynvml.nvmlDeviceGetPowerUsage(h),
    "power_limit": lambda h: pynvml.nvmlDeviceGetEnforcedPowerLimit(h),
    "temperature": lambda h: pynvml.nvmlDeviceGetTemperatureV(h, 0),
    "temp_thresholds": lambda h: pynvml.nvmlDeviceGetTemperatureThreshold(h, 1),
    "fan": lambda h: pynvml.nvmlDeviceGetFanSpeed(h),
    "clocks": lambda h: pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_SM),
    "max_clocks": lambda h: pynvml.nvmlDeviceGetMaxClockInfo(h, pynvml.NVML_CLOCK_SM),
    "pstate": lambda h: pynvml.nvmlDeviceGetPerformanceState(h),
    "energy": lambda h: pynvml.nvmlDeviceGetTotalEnergyConsumption(h),
    "pcie_link": lambda h: pynvml.nvmlDeviceGetCurrPcieLinkGeneration(h),
    "pcie_throughput": lambda h: pynvml.nvmlDeviceGetPcieThroughput(h, 0),
    "ecc": lambda h: pynvml.nvmlDeviceGetTotalEccErrors(h, 1, 0),
    "throttle": lambda h: pynvml.nvmlDeviceGetCurrentClocksEventReasons(h),
    "violation": lambda h: pynvml.nvmlDeviceGetViolationStatus(h, 0),
    "processes": lambda h: pynvml.nvmlDeviceGetComputeRunningProcesses(h),
    "graphics_processes": lambda h: pynvml.nvmlDeviceGetGraphicsRunningProcesses(h),
    "num_cores": lambda h: pynvml.nvmlDeviceGetNumGpuCores(h),
}


@pytest.mark.parametrize("feature", sorted(UNSUPPORTED_CALLS))
def test_unsupported_feature(fake_nvml, feature):
    fake_nvml.use({"device_count": 2, "gpu.0.unsupported": feature, "gpu.0.processes": {1: 1}})
    pynvml.nvmlInit()
    h0, h1 = (pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(2))
    with pytest.raises(pynvml.NVMLError_NotSupported) as info:
        UNSUPPORTED_CALLS[feature](h0)
    assert str(info.value) == "Not Supported"
    UNSUPPORTED_CALLS[feature](h1)  # the other GPU is fine
    for other, call in UNSUPPORTED_CALLS.items():
        if other != feature:
            call(h0)


def test_unsupported_scenario(fake_nvml):
    fake_nvml.use("unsupported")
    pynvml.nvmlInit()
    h0, h1 = (pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(2))
    for feature in ("fan", "ecc", "energy", "pcie_throughput", "violation"):
        with pytest.raises(pynvml.NVMLError_NotSupported):
            UNSUPPORTED_CALLS[feature](h0)
        UNSUPPORTED_CALLS[feature](h1)
    assert pynvml.nvmlDeviceGetPowerUsage(h0) == 120000


def test_not_found_functions(fake_nvml):
    fake_nvml.use("old_driver")
    pynvml.nvmlInit()
    h = pynvml.nvmlDeviceGetHandleByIndex(0)
    with pytest.raises(pynvml.NVMLError_FunctionNotFound) as info:
        pynvml.nvmlDeviceGetTemperatureV(h, 0)
    assert str(info.value) == "Function Not Found"
    with pytest.raises(pynvml.NVMLError_FunctionNotFound):
        pynvml.nvmlDeviceGetMemoryInfo(h, version=pynvml.nvmlMemory_v2)
    with pytest.raises(pynvml.NVMLError_FunctionNotFound):
        pynvml.nvmlDeviceGetCurrentClocksEventReasons(h)
    # the fallbacks work
    assert pynvml.nvmlDeviceGetTemperature(h, 0) == 51
    assert pynvml.nvmlDeviceGetMemoryInfo(h).total == 32 * GIB
    assert pynvml.nvmlDeviceGetCurrentClocksThrottleReasons(h) == REASON_SW_POWER_CAP
    assert pynvml.nvmlSystemGetDriverVersion() == "470.239.06"


@pytest.mark.parametrize(
    ("code", "exc", "text"),
    [
        (9, "NVMLError_DriverNotLoaded", "Driver Not Loaded"),
        (18, "NVMLError_LibRmVersionMismatch", "RM has detected an NVML/RM version mismatch."),
        (4, "NVMLError_NoPermission", "Insufficient Permissions"),
        (999, "NVMLError_Unknown", "Unknown Error"),
    ],
)
def test_init_error(fake_nvml, code, exc, text):
    fake_nvml.use({"init_error": code})
    with pytest.raises(getattr(pynvml, exc)) as info:
        pynvml.nvmlInit()
    assert info.value.value == code
    assert str(info.value) == text
    assert fake_nvml.init_refcount() == 0
    with pytest.raises(pynvml.NVMLError_Uninitialized):
        pynvml.nvmlDeviceGetCount()


def test_error_strings_come_from_c(nvml):
    # pynvml asks the library for codes it has no text for
    pynvml.NVMLError._errcode_to_string.pop(19, None)
    assert str(pynvml.NVMLError(19)) == "In use by another client"
    assert pynvml.nvmlErrorString(15) == "GPU is lost"
    assert pynvml.nvmlErrorString(3) == "Not Supported"
    assert pynvml.nvmlErrorString(13) == "Function Not Found"
    assert pynvml.nvmlErrorString(9) == "Driver Not Loaded"
    assert pynvml.nvmlErrorString(999) == "Unknown Error"
    assert pynvml.nvmlErrorString(12345) == "Unknown Error"


def test_calls_before_init_are_uninitialized(fake_nvml):
    fake_nvml.use("two_gpus")
    with pytest.raises(pynvml.NVMLError_Uninitialized):
        pynvml.nvmlDeviceGetCount()
    with pytest.raises(pynvml.NVMLError_Uninitialized):
        pynvml.nvmlSystemGetDriverVersion()
    pynvml.nvmlInit()
    h = pynvml.nvmlDeviceGetHandleByIndex(0)
    pynvml.nvmlShutdown()
    with pytest.raises(pynvml.NVMLError_Uninitialized):
        pynvml.nvmlDeviceGetName(h)


def test_init_is_reference_counted(fake_nvml):
    fake_nvml.use("two_gpus")
    pynvml.nvmlInit()
    pynvml.nvmlInit()
    pynvml.nvmlShutdown()
    assert pynvml.nvmlDeviceGetCount() == 2
    pynvml.nvmlShutdown()
    with pytest.raises(pynvml.NVMLError_Uninitialized):
        pynvml.nvmlDeviceGetCount()


def test_dropping_every_init_ends_a_blocked_event_wait(fake_nvml):
    # The teardown drops every init: a listener blocked in an event wait ends then, not
    # at its timeout (a minute here).
    fake_nvml.use("two_gpus")
    pynvml.nvmlInit()
    events = pynvml.nvmlEventSetCreate()
    pynvml.nvmlDeviceRegisterEvents(pynvml.nvmlDeviceGetHandleByIndex(0),
                                    pynvml.nvmlEventTypeXidCriticalError, events)
    ended = []

    def wait():
        try:
            pynvml.nvmlEventSetWait_v2(events, 60_000)
        except pynvml.NVMLError as exc:
            ended.append(exc)

    waiter = threading.Thread(target=wait, daemon=True)
    waiter.start()
    # Counted under the lock the wait lets go of only to sleep: once seen, it sleeps.
    deadline = time.monotonic() + 10
    while fake_nvml.count_for("nvmlEventSetWait_v2") == 0 and time.monotonic() < deadline:
        time.sleep(0.001)
    fake_nvml.force_shutdown()
    waiter.join(10)
    assert [type(exc) for exc in ended] == [pynvml.NVMLError_Uninitialized]


def test_bad_arguments(nvml):
    with pytest.raises(pynvml.NVMLError_InvalidArgument):
        pynvml.nvmlDeviceGetHandleByIndex(2)
    with pytest.raises(pynvml.NVMLError_InvalidArgument):
        pynvml.nvmlDeviceGetName(pynvml.c_nvmlDevice_t())  # NULL handle
    fn = pynvml._nvmlGetFunctionPointer("nvmlDeviceGetPowerUsage")
    assert fn(nvml[0], None) == pynvml.NVML_ERROR_INVALID_ARGUMENT
    fn = pynvml._nvmlGetFunctionPointer("nvmlDeviceGetName")
    small = ctypes.create_string_buffer(4)
    assert fn(nvml[0], small, ctypes.c_uint(4)) == pynvml.NVML_ERROR_INSUFFICIENT_SIZE


def test_handle_error(fake_nvml):
    fake_nvml.use({"device_count": 3, "gpu.1.handle_error": 15})
    pynvml.nvmlInit()
    with pytest.raises(pynvml.NVMLError_GpuIsLost):
        pynvml.nvmlDeviceGetHandleByIndex(1)
    pynvml.nvmlDeviceGetHandleByIndex(0)
    pynvml.nvmlDeviceGetHandleByIndex(2)


# --------------------------------------------------------------------------- time


def test_gpu_lost_from_second_n(fake_nvml):
    fake_nvml.use("lost")
    pynvml.nvmlInit()
    h0, h1 = (pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(2))
    fake_nvml.set_time(1.99)
    assert pynvml.nvmlDeviceGetUtilizationRates(h1).gpu == 80
    fake_nvml.set_time(2.0)
    with pytest.raises(pynvml.NVMLError_GpuIsLost) as info:
        pynvml.nvmlDeviceGetUtilizationRates(h1)
    assert str(info.value) == "GPU is lost"
    with pytest.raises(pynvml.NVMLError_GpuIsLost):
        pynvml.nvmlDeviceGetName(h1)
    with pytest.raises(pynvml.NVMLError_GpuIsLost):
        pynvml.nvmlDeviceGetHandleByIndex(1)
    assert pynvml.nvmlDeviceGetUtilizationRates(h0).gpu == 75
    assert pynvml.nvmlDeviceGetCount() == 2
    fake_nvml.set_time(100)
    with pytest.raises(pynvml.NVMLError_GpuIsLost):
        pynvml.nvmlDeviceGetPowerUsage(h1)


def test_throttle_window(fake_nvml):
    fake_nvml.use("throttle")
    pynvml.nvmlInit()
    h0, h1 = (pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(2))
    reasons = pynvml.nvmlDeviceGetCurrentClocksEventReasons
    sm = lambda h: pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_SM)  # noqa: E731
    temp = lambda h: pynvml.nvmlDeviceGetTemperatureV(h, 0)  # noqa: E731

    fake_nvml.set_time(2.9)
    assert (reasons(h0), temp(h0), sm(h0)) == (0, 82, 1410)
    assert pynvml.nvmlDeviceGetPowerUsage(h0) == 380000

    seen_temps, seen_clocks = set(), set()
    for t in (3.0, 4.0, 5.0, 6.25, 7.99):
        fake_nvml.set_time(t)
        assert reasons(h0) == REASON_HW_THERMAL_SLOWDOWN
        assert reasons(h1) == 0
        assert 90 <= temp(h0) <= 94
        assert 885 <= sm(h0) <= 1005
        assert pynvml.nvmlDeviceGetPowerUsage(h0) == 260000
        assert sm(h1) == 1410
        seen_temps.add(temp(h0))
        seen_clocks.add(sm(h0))
    assert len(seen_temps) > 1 and len(seen_clocks) > 1  # they move during the window

    fake_nvml.set_time(8.0)
    assert (reasons(h0), temp(h0), sm(h0)) == (0, 82, 1410)


def test_violation_counters(fake_nvml):
    fake_nvml.use("throttle")
    pynvml.nvmlInit()
    h0, h1 = (pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(2))
    thermal, power = pynvml.NVML_PERF_POLICY_THERMAL, pynvml.NVML_PERF_POLICY_POWER
    fake_nvml.set_time(2.0)
    v = pynvml.nvmlDeviceGetViolationStatus(h0, thermal)
    assert (v.referenceTime, v.violationTime) == (2_000_000, 0)
    fake_nvml.set_time(5.5)
    v = pynvml.nvmlDeviceGetViolationStatus(h0, thermal)
    assert (v.referenceTime, v.violationTime) == (5_500_000, 2_500_000_000)
    assert pynvml.nvmlDeviceGetViolationStatus(h0, power).violationTime == 0
    assert pynvml.nvmlDeviceGetViolationStatus(h1, thermal).violationTime == 0
    fake_nvml.set_time(20.0)
    assert pynvml.nvmlDeviceGetViolationStatus(h0, thermal).violationTime == 5_000_000_000


def test_power_violation_and_open_ended_window(fake_nvml):
    fake_nvml.use(
        {
            "gpu.0.throttle_from_s": 1,
            "gpu.0.during.throttle_reasons": REASON_SW_POWER_CAP,
            "gpu.0.during.clock_sm_mhz": 900,
        }
    )
    pynvml.nvmlInit()
    h = pynvml.nvmlDeviceGetHandleByIndex(0)
    fake_nvml.set_time(1000.0)  # no until: throttled forever once started
    assert pynvml.nvmlDeviceGetCurrentClocksEventReasons(h) == REASON_SW_POWER_CAP
    assert pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_SM) == 900
    assert pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_GRAPHICS) == 900  # follows sm
    v = pynvml.nvmlDeviceGetViolationStatus(h, pynvml.NVML_PERF_POLICY_POWER)
    assert v.violationTime == 999 * 10**9
    v = pynvml.nvmlDeviceGetViolationStatus(h, pynvml.NVML_PERF_POLICY_THERMAL)
    assert v.violationTime == 0


def test_waves_vary_with_time(fake_nvml):
    fake_nvml.use(
        {
            "gpu.0.util_gpu": 50,
            "gpu.0.util_gpu.wave": (20, 4),
            "gpu.0.temp_c": 60,
            "gpu.0.temp_c.wave": (100, 4),  # clamped at 0
            "gpu.0.fan_pct": 90,
            "gpu.0.fan_pct.wave": (30, 4),  # clamped at 100
        }
    )
    pynvml.nvmlInit()
    h = pynvml.nvmlDeviceGetHandleByIndex(0)
    util = lambda: pynvml.nvmlDeviceGetUtilizationRates(h).gpu  # noqa: E731
    samples = {}
    for t in (0.0, 1.0, 2.0, 3.0, 4.0, 0.5):
        fake_nvml.set_time(t)
        samples[t] = util()
    assert samples[0.0] == 50
    assert samples[1.0] == 70
    assert samples[2.0] == 50
    assert samples[3.0] == 30
    assert samples[4.0] == 50
    assert samples[0.5] == 64  # 50 + 20 * sin(pi/4) = 64.14
    fake_nvml.set_time(1.0)
    assert pynvml.nvmlDeviceGetFanSpeed(h) == 100
    fake_nvml.set_time(3.0)
    assert pynvml.nvmlDeviceGetTemperatureV(h, 0) == 0


def test_energy_counter_grows_with_power(fake_nvml):
    fake_nvml.use({"gpu.0.energy_mj": 1000, "gpu.0.power_mw": 250000})
    pynvml.nvmlInit()
    h = pynvml.nvmlDeviceGetHandleByIndex(0)
    assert pynvml.nvmlDeviceGetTotalEnergyConsumption(h) == 1000
    fake_nvml.set_time(10.0)
    assert pynvml.nvmlDeviceGetTotalEnergyConsumption(h) == 1000 + 250000 * 10
    fake_nvml.set_time(10.5)
    assert pynvml.nvmlDeviceGetTotalEnergyConsumption(h) == 1000 + 250000 * 10.5


def test_energy_counter_integrates_waves_and_episodes(fake_nvml):
    fake_nvml.use(
        {
            "gpu.0.energy_mj": 0,
            "gpu.0.power_mw": 100000,
            "gpu.0.power_mw.wave": (50000, 2),  # integrates to 0 over whole periods
            "gpu.0.throttle_from_s": 4,
            "gpu.0.throttle_until_s": 6,
            "gpu.0.during.power_mw": 10000,
        }
    )
    pynvml.nvmlInit()
    h = pynvml.nvmlDeviceGetHandleByIndex(0)
    fake_nvml.set_time(4.0)
    assert pynvml.nvmlDeviceGetTotalEnergyConsumption(h) == pytest.approx(400000, abs=1)
    fake_nvml.set_time(8.0)
    expected = 100000 * 4 + 10000 * 2 + 100000 * 2
    assert pynvml.nvmlDeviceGetTotalEnergyConsumption(h) == pytest.approx(expected, abs=1)
    values = []
    for t in range(0, 80):
        fake_nvml.set_time(t / 10)
        values.append(pynvml.nvmlDeviceGetTotalEnergyConsumption(h))
    assert values == sorted(values)  # monotonic


def test_real_time_clock(fake_nvml):
    fake_nvml.use({"gpu.0.lost_from_s": 0.2}, frozen_time=None)
    pynvml.nvmlInit()
    h = pynvml.nvmlDeviceGetHandleByIndex(0)
    assert fake_nvml.time() < 0.2
    time.sleep(0.25)
    with pytest.raises(pynvml.NVMLError_GpuIsLost):
        pynvml.nvmlDeviceGetName(h)
    fake_nvml.set_time(0.1)  # freeze back before the loss
    pynvml.nvmlDeviceGetName(h)


def test_call_delay(fake_nvml):
    fake_nvml.use({"device_count": 2, "call_delay_ms": 30, "gpu.1.call_delay_ms": 0})
    pynvml.nvmlInit()
    start = time.perf_counter()
    h0 = pynvml.nvmlDeviceGetHandleByIndex(0)
    pynvml.nvmlDeviceGetPowerUsage(h0)
    assert time.perf_counter() - start >= 0.055
    h1 = pynvml.nvmlDeviceGetHandleByIndex(1)
    start = time.perf_counter()
    for _ in range(5):
        pynvml.nvmlDeviceGetPowerUsage(h1)
    assert time.perf_counter() - start < 0.1


# --------------------------------------------------------------------------- counting / threads


def test_call_counts(fake_nvml):
    fake_nvml.use("two_gpus")
    assert fake_nvml.call_count() == 0
    pynvml.nvmlInit()
    h = pynvml.nvmlDeviceGetHandleByIndex(0)
    pynvml.nvmlDeviceGetPowerUsage(h)
    pynvml.nvmlDeviceGetPowerUsage(h)
    pynvml.nvmlErrorString(3)  # not counted
    assert fake_nvml.call_count() == 4
    assert fake_nvml.count_for("nvmlInitWithFlags") == 1
    assert fake_nvml.count_for("nvmlDeviceGetHandleByIndex_v2") == 1
    assert fake_nvml.count_for("nvmlDeviceGetPowerUsage") == 2
    assert fake_nvml.count_for("nvmlErrorString") == 0
    assert fake_nvml.count_for("noSuchFunction") == 0
    fake_nvml.reset_counts()
    assert fake_nvml.call_count() == 0
    pynvml.nvmlDeviceGetName(h)
    assert fake_nvml.call_count() == 1
    fake_nvml.use("two_gpus")  # loading resets the counts
    assert fake_nvml.call_count() == 0


def test_threads(fake_nvml):
    fake_nvml.use("eight_gpus", frozen_time=None)
    pynvml.nvmlInit()
    handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(8)]
    errors = []

    def worker():
        try:
            for _ in range(200):
                for h in handles:
                    pynvml.nvmlDeviceGetPowerUsage(h)
                    pynvml.nvmlDeviceGetMemoryInfo(h, version=pynvml.nvmlMemory_v2)
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert fake_nvml.count_for("nvmlDeviceGetPowerUsage") == 4 * 200 * 8


# --------------------------------------------------------------------------- scenarios


@pytest.mark.parametrize("name", shipped_scenarios())
def test_shipped_scenarios_load_cleanly(fake_nvml, capfd, name):
    fake_nvml.use(name)
    pynvml.nvmlInit()
    for i in range(pynvml.nvmlDeviceGetCount()):
        h = pynvml.nvmlDeviceGetHandleByIndex(i)
        assert pynvml.nvmlDeviceGetName(h)
    assert "fakenvml" not in capfd.readouterr().err


def test_shipped_scenario_shapes(fake_nvml):
    expected = {
        "two_gpus": 2,
        "eight_gpus": 8,
        "throttle": 2,
        "lost": 2,
        "unsupported": 2,
        "old_driver": 2,
    }
    assert set(expected) <= set(shipped_scenarios())
    for name, count in expected.items():
        fake_nvml.use(name)
        pynvml.nvmlInit()
        assert pynvml.nvmlDeviceGetCount() == count
        uuids = {
            pynvml.nvmlDeviceGetUUID(pynvml.nvmlDeviceGetHandleByIndex(i)) for i in range(count)
        }
        assert len(uuids) == count
        pynvml.nvmlShutdown()


def test_two_gpus_is_fixed(fake_nvml):
    fake_nvml.use("two_gpus")
    pynvml.nvmlInit()
    h0, h1 = (pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(2))
    snapshots = []
    for t in (0.0, 3.3, 123.0):
        fake_nvml.set_time(t)
        snapshots.append(
            (
                pynvml.nvmlDeviceGetUtilizationRates(h0).gpu,
                pynvml.nvmlDeviceGetTemperatureV(h0, 0),
                pynvml.nvmlDeviceGetClockInfo(h0, pynvml.NVML_CLOCK_SM),
                pynvml.nvmlDeviceGetPowerUsage(h1),
            )
        )
    assert snapshots[0] == snapshots[1] == snapshots[2] == (87, 64, 1410, 32000)
    assert pynvml.nvmlDeviceGetCurrentClocksEventReasons(h1) == REASON_GPU_IDLE
    assert [p.pid for p in pynvml.nvmlDeviceGetComputeRunningProcesses(h0)] == [4242, 4343]


def test_eight_gpus_vary_gently(fake_nvml):
    fake_nvml.use("eight_gpus")
    pynvml.nvmlInit()
    handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(8)]
    power = []
    for t in (0.0, 2.0, 4.0):
        fake_nvml.set_time(t)
        power.append([pynvml.nvmlDeviceGetPowerUsage(h) for h in handles])
    assert power[0] != power[1] != power[2]
    for row in power:
        assert all(500000 <= p <= 700000 for p in row)


def test_builtin_default_scenario(fake_nvml):
    fake_nvml.use(None)
    pynvml.nvmlInit()
    assert pynvml.nvmlDeviceGetCount() == 2
    names = {pynvml.nvmlDeviceGetUUID(pynvml.nvmlDeviceGetHandleByIndex(i)) for i in range(2)}
    assert names == {
        "GPU-00000000-0000-0000-0000-000000000000",
        "GPU-00000000-0000-0000-0000-000000000001",
    }
    assert pynvml.nvmlSystemGetDriverVersion() == "550.54.15"
    assert pynvml.nvmlSystemGetNVMLVersion() == "12.550.54.15"
    assert pynvml.nvmlSystemGetCudaDriverVersion() == 12040


def test_device_count_defaults_to_highest_index(fake_nvml):
    fake_nvml.use({"gpu.4.name": "X"})
    pynvml.nvmlInit()
    assert pynvml.nvmlDeviceGetCount() == 5


def test_unknown_keys_warn(fake_nvml, capfd):
    fake_nvml.use({"bogus": 1, "gpu.0.bogus": 2, "gpu.0.temp_c": "hot", "gpu.0.fan_pct": 12})
    err = capfd.readouterr().err
    assert "unknown key 'bogus'" in err
    assert "unknown key 'gpu.0.bogus'" in err
    assert "bad value 'hot'" in err
    pynvml.nvmlInit()
    assert pynvml.nvmlDeviceGetFanSpeed(pynvml.nvmlDeviceGetHandleByIndex(0)) == 12


def test_load_of_unreadable_file_fails(fake_nvml, tmp_path, capfd):
    fake_nvml.use("two_gpus")
    hooks = fake_nvml._hooks
    assert hooks.fakenvml_load(str(tmp_path / "missing.conf").encode()) != 0
    assert hooks.fakenvml_load(str(tmp_path).encode()) != 0  # a directory
    err = capfd.readouterr().err
    assert "missing.conf" in err
    assert "Is a directory" in err
    pynvml.nvmlInit()  # the previous scenario is still loaded
    assert pynvml.nvmlDeviceGetCount() == 2
    with pytest.raises(RuntimeError):
        fake_nvml.use(tmp_path)
    with pytest.raises(FileNotFoundError):
        fake_nvml.use(tmp_path / "missing.conf")


def test_write_scenario_formats(tmp_path):
    text = render_scenario(
        {
            "device_count": 1,
            "gpu.0.util_gpu.wave": (10, 2.5),
            "gpu.0.unsupported": ["fan", "ecc"],
            "gpu.0.processes": {1: 2, 3: None},
            "gpu.0.power_mw": 1.5,
            "gpu.0.name": "NVIDIA X",
        }
    )
    assert "gpu.0.util_gpu.wave = 10,2.5\n" in text
    assert "gpu.0.unsupported = fan,ecc\n" in text
    assert "gpu.0.processes = 1:2,3:na\n" in text
    assert "gpu.0.power_mw = 1.5\n" in text
    assert "gpu.0.name = NVIDIA X\n" in text
    path = write_scenario(tmp_path / "sub" / "s.conf", {"device_count": 1})
    assert path.read_text().endswith("device_count = 1\n")
    with pytest.raises(ValueError):
        render_scenario({"gpu.0.name": "a#b"})
    assert scenario_path("throttle") == scenario_path("throttle.conf")
    with pytest.raises(FileNotFoundError):
        scenario_path("nope")


# --------------------------------------------------------------------------- no NVML


def test_no_nvml(no_nvml):
    if ctypes.util.find_library("nvidia-ml") is None:
        assert no_nvml.natural
    with pytest.raises(pynvml.NVMLError_LibraryNotFound):
        pynvml.nvmlInit()


def test_in_process_fake_does_not_leak_the_soname(fake_nvml):
    """Using the fake in-process must not make dlopen("libnvidia-ml.so.1") succeed."""
    if ctypes.util.find_library("nvidia-ml") is not None:
        pytest.skip("a real libnvidia-ml is installed")
    fake_nvml.use("two_gpus")
    pynvml.nvmlInit()
    with pytest.raises(OSError):
        ctypes.CDLL("libnvidia-ml.so.1")


# --------------------------------------------------------------------------- subprocesses

PROBE = textwrap.dedent(
    """
    import pynvml
    pynvml.nvmlInit()
    n = pynvml.nvmlDeviceGetCount()
    for i in range(n):
        h = pynvml.nvmlDeviceGetHandleByIndex(i)
        print(i, pynvml.nvmlDeviceGetName(h), pynvml.nvmlDeviceGetPowerUsage(h))
    """
)


def run_python(code: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60
    )


def test_subprocess_sees_scenario(fake_nvml_lib):
    assert fake_nvml_lib.path.name == "libnvidia-ml.so.1"
    assert fake_nvml_lib.path.parent == fake_nvml_lib.lib_dir
    proc = run_python(
        PROBE + "pynvml.nvmlShutdown()\n", fake_nvml_lib.env(scenario_path("two_gpus"))
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == [
        "0 NVIDIA A100-SXM4-80GB 312000",
        "1 NVIDIA GeForce RTX 4090 32000",
    ]


def test_subprocess_builtin_default(fake_nvml_lib):
    proc = run_python(PROBE, fake_nvml_lib.env(None))
    assert proc.returncode == 0, proc.stderr
    assert len(proc.stdout.splitlines()) == 2


def test_subprocess_unreadable_scenario(fake_nvml_lib, tmp_path):
    env = fake_nvml_lib.env(None)
    env["FAKENVML_SCENARIO"] = str(tmp_path / "missing.conf")
    proc = run_python(
        "import pynvml\n"
        "try:\n"
        "    pynvml.nvmlInit()\n"
        "except pynvml.NVMLError_Unknown as e:\n"
        "    print('unknown:', e)\n",
        env,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "unknown: Unknown Error"
    assert "missing.conf" in proc.stderr


def test_subprocess_stats_file(fake_nvml_lib, tmp_path):
    stats = tmp_path / "stats.txt"
    env = fake_nvml_lib.env("two_gpus", stats_file=stats)
    proc = run_python(PROBE + "pynvml.nvmlShutdown()\n", env)
    assert proc.returncode == 0, proc.stderr
    counts = read_stats(stats)
    # init + count + 2 * (handle + name + power) + shutdown
    assert counts["calls"] == 9
    assert counts["nvmlInitWithFlags"] == 1
    assert counts["nvmlDeviceGetPowerUsage"] == 2
    assert counts["nvmlShutdown"] == 1
    assert not list(tmp_path.glob("stats.txt.tmp*"))


def test_subprocess_stats_file_written_at_exit(fake_nvml_lib, tmp_path):
    stats = tmp_path / "stats.txt"
    proc = run_python(PROBE, fake_nvml_lib.env("two_gpus", stats_file=stats))  # no shutdown
    assert proc.returncode == 0, proc.stderr
    assert read_stats(stats)["calls"] == 8


def test_env_keeps_existing_library_path(fake_nvml_lib, monkeypatch):
    monkeypatch.setenv("LD_LIBRARY_PATH", "/opt/x")
    monkeypatch.setenv("FAKENVML_STATS_FILE", "/tmp/leak")
    env = fake_nvml_lib.env("lost")
    assert env["LD_LIBRARY_PATH"] == f"{fake_nvml_lib.lib_dir}:/opt/x"
    assert Path(env["FAKENVML_SCENARIO"]) == scenario_path("lost")
    assert "FAKENVML_STATS_FILE" not in env
