"""Configuration and health of a device, for `gputui doctor` and benchmark results
(never read per tick), and how two GPUs reach each other."""

from __future__ import annotations

from typing import Any

import pynvml

from gputui.telemetry.health import DeviceHealth
from gputui.telemetry.nvml.device import DeviceReader
from gputui.telemetry.nvml.errors import text
from gputui.telemetry.nvml.query import NvmlQuery
from gputui.telemetry.nvml.source import NvmlSource
from gputui.telemetry.units import mw_to_w


def read_health(source: NvmlSource, index: int) -> DeviceHealth:
    """Every configuration and health fact of one device of an open `source`."""
    dev = source.readers[index]
    with dev.lock:
        info = dev.info
        ident = {"index": index, "name": info.name, "uuid": info.uuid,
                 "pci_bus_id": info.pci_bus_id}
        if dev.lost or dev.handle is None or dev.pending:
            return DeviceHealth(**ident, lost=dev.lost, error="GPU is lost" if dev.lost
                                else (dev.error or "not opened"))
        health = _read_health(dev, ident)
        if health.lost:
            dev.q.lost = True
        return health


def _read_health(dev: DeviceReader, ident: dict[str, Any]) -> DeviceHealth:
    h, info = dev.handle, dev.info
    # A query of its own: the doctor reports what this device lacks and what failed,
    # call by call, without the per-tick reader's memory of earlier answers.
    q = NvmlQuery()
    unsupported: set[str] = set()
    errors: list[tuple[str, str]] = []

    def get(name: str, fn: Any, *args: Any) -> Any:
        got = q(fn, *args, key=name)
        if got is None:
            if name in q.unsupported:
                unsupported.add(name)
            elif not q.lost and q.last_error is not None:
                errors.append((name, q.last_error_text or str(q.last_error)))
        return got

    def both(name: str, *calls: tuple[Any, ...]) -> tuple[Any, ...] | None:
        """Several calls that make one fact: None unless all answer."""
        got = []
        for fn, *args in calls:
            v = get(name, fn, *args)
            if v is None:
                return None
            got.append(v)
        return tuple(got)

    clock = pynvml.nvmlDeviceGetApplicationsClock
    dclock = pynvml.nvmlDeviceGetDefaultApplicationsClock
    sm, mem = pynvml.NVML_CLOCK_SM, pynvml.NVML_CLOCK_MEM
    link = both("pcie_link", (pynvml.nvmlDeviceGetCurrPcieLinkGeneration, h),
                (pynvml.nvmlDeviceGetCurrPcieLinkWidth, h))
    app = both("app_clocks", (clock, h, sm), (clock, h, mem), (dclock, h, sm),
               (dclock, h, mem))
    ecc_mode = get("ecc_mode", pynvml.nvmlDeviceGetEccMode, h)
    mig = get("mig_mode", pynvml.nvmlDeviceGetMigMode, h)
    remap = get("remapped_rows", pynvml.nvmlDeviceGetRemappedRows, h)
    pages = pynvml.nvmlDeviceGetRetiredPages
    retired = both(
        "retired_pages",
        (pages, h, pynvml.NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS),
        (pages, h, pynvml.NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR),
        (pynvml.nvmlDeviceGetRetiredPagesPendingStatus, h))
    ecc = pynvml.nvmlDeviceGetTotalEccErrors
    uncorrected = pynvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED
    persistence = get("persistence_mode", pynvml.nvmlDeviceGetPersistenceMode, h)
    reasons = q.newer_or_older(
        "throttle", (pynvml.nvmlDeviceGetCurrentClocksEventReasons, h),
        (pynvml.nvmlDeviceGetCurrentClocksThrottleReasons, h))
    if reasons is None and "throttle" in q.unsupported:
        unsupported.add("throttle")
    vbios = get("vbios", pynvml.nvmlDeviceGetVbiosVersion, h)
    health = DeviceHealth(
        **ident,
        pcie_gen=link[0] if link else None, pcie_width=link[1] if link else None,
        pcie_gen_max=info.pcie_gen_max, pcie_width_max=info.pcie_width_max,
        persistence_mode=(None if persistence is None
                          else persistence == pynvml.NVML_FEATURE_ENABLED),
        power_limit_w=mw_to_w(get("power_limit", pynvml.nvmlDeviceGetEnforcedPowerLimit, h)),
        power_default_limit_w=mw_to_w(get(
            "power_default_limit", pynvml.nvmlDeviceGetPowerManagementDefaultLimit, h)),
        app_clock_sm_mhz=app[0] if app else None, app_clock_mem_mhz=app[1] if app else None,
        default_app_clock_sm_mhz=app[2] if app else None,
        default_app_clock_mem_mhz=app[3] if app else None,
        ecc_mode=bool(ecc_mode[0]) if ecc_mode else None,
        ecc_mode_pending=bool(ecc_mode[1]) if ecc_mode else None,
        ecc_uncorrected_volatile=get("ecc_errors", ecc, h, uncorrected,
                                     pynvml.NVML_VOLATILE_ECC),
        ecc_uncorrected_aggregate=get("ecc_errors", ecc, h, uncorrected,
                                      pynvml.NVML_AGGREGATE_ECC),
        mig_mode=bool(mig[0]) if mig else None, mig_mode_pending=bool(mig[1]) if mig else None,
        compute_mode=get("compute_mode", pynvml.nvmlDeviceGetComputeMode, h),
        remap_correctable=remap[0] if remap else None,
        remap_uncorrectable=remap[1] if remap else None,
        remap_pending=bool(remap[2]) if remap else None,
        remap_failure=bool(remap[3]) if remap else None,
        retired_pages_sbe=len(retired[0]) if retired else None,
        retired_pages_dbe=len(retired[1]) if retired else None,
        retired_pages_pending=(retired[2] == pynvml.NVML_FEATURE_ENABLED) if retired else None,
        throttle_mask=reasons,
        temp_c=get("temperature", pynvml.nvmlDeviceGetTemperature, h,
                   pynvml.NVML_TEMPERATURE_GPU),
        temp_slowdown_c=info.temp_slowdown_c,
        fan_pct=get("fan", pynvml.nvmlDeviceGetFanSpeed, h),
        vbios_version=text(vbios) if vbios is not None else None,
        unsupported=frozenset(unsupported),
        read_errors=tuple(errors),
    )
    if q.lost:
        return DeviceHealth(**ident, lost=True, error="GPU is lost")
    return health


def p2p_link(source: NvmlSource, a: int, b: int) -> str | None:
    """How GPU `a` reaches GPU `b`: "NVLink", "PCIe P2P", or "through host memory" (no
    peer-to-peer path); None when NVML cannot tell."""
    ha, hb = source.handle(a), source.handle(b)
    if ha is None or hb is None:
        return None
    ok = pynvml.NVML_P2P_STATUS_OK
    q = NvmlQuery()
    status = pynvml.nvmlDeviceGetP2PStatus
    nvlink = q(status, ha, hb, pynvml.NVML_P2P_CAPS_INDEX_NVLINK, key="p2p_nvlink")
    if nvlink == ok:
        return "NVLink"
    # 0 is NVML_P2P_CAPS_INDEX_READ (pynvml spells that constant as a tuple).
    read = q(status, ha, hb, 0, key="p2p_read")
    if nvlink is None or read is None:
        return None
    return "PCIe P2P" if read == ok else "through host memory"
