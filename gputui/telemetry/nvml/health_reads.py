"""Configuration and health of a device, for `gputui doctor` and benchmark results
(never read per tick), and how two GPUs reach each other."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import pynvml

from gputui.telemetry.health import DeviceHealth
from gputui.telemetry.nvml.common import (
    T,
    _Device,
    _err_text,
    _text,
)
from gputui.telemetry.units import mw_to_w

if TYPE_CHECKING:  # the source imports this module: annotations only
    from gputui.telemetry.nvml.source import NvmlSource


def read_health(source: NvmlSource, index: int) -> DeviceHealth:
    """Every configuration and health fact of one device of an open `source`."""
    with source._lock:
        dev = source._devs[index]
        info = dev.info
        ident = {"index": index, "name": info.name, "uuid": info.uuid,
                 "pci_bus_id": info.pci_bus_id}
        if dev.lost or dev.handle is None or dev.pending:
            return DeviceHealth(**ident, lost=dev.lost,
                                error="GPU is lost" if dev.lost else (dev.error or "not opened"))
        try:
            return _read_health(dev, ident)
        except pynvml.NVMLError_GpuIsLost:
            dev.lost = True
            return DeviceHealth(**ident, lost=True, error="GPU is lost")


def _read_health(dev: _Device, ident: dict[str, Any]) -> DeviceHealth:
    h, info = dev.handle, dev.info
    unsupported: set[str] = set()
    errors: list[tuple[str, str]] = []

    def get(name: str, fn: Callable[[], T]) -> T | None:
        try:
            return fn()
        except (pynvml.NVMLError_NotSupported, pynvml.NVMLError_FunctionNotFound):
            unsupported.add(name)
        except pynvml.NVMLError_GpuIsLost:
            raise
        except pynvml.NVMLError as exc:
            errors.append((name, _err_text(exc)))
        return None

    def reasons() -> int:
        try:
            return pynvml.nvmlDeviceGetCurrentClocksEventReasons(h)
        except pynvml.NVMLError_FunctionNotFound:
            return pynvml.nvmlDeviceGetCurrentClocksThrottleReasons(h)

    def ecc(counter: int) -> int:
        return pynvml.nvmlDeviceGetTotalEccErrors(
            h, pynvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED, counter)

    clock = pynvml.nvmlDeviceGetApplicationsClock
    dclock = pynvml.nvmlDeviceGetDefaultApplicationsClock
    sm, mem = pynvml.NVML_CLOCK_SM, pynvml.NVML_CLOCK_MEM
    link = get("pcie_link", lambda: (pynvml.nvmlDeviceGetCurrPcieLinkGeneration(h),
                                     pynvml.nvmlDeviceGetCurrPcieLinkWidth(h)))
    app = get("app_clocks", lambda: (clock(h, sm), clock(h, mem), dclock(h, sm), dclock(h, mem)))
    ecc_mode = get("ecc_mode", lambda: pynvml.nvmlDeviceGetEccMode(h))
    mig = get("mig_mode", lambda: pynvml.nvmlDeviceGetMigMode(h))
    remap = get("remapped_rows", lambda: pynvml.nvmlDeviceGetRemappedRows(h))
    retired = get("retired_pages", lambda: (
        len(pynvml.nvmlDeviceGetRetiredPages(
            h, pynvml.NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS)),
        len(pynvml.nvmlDeviceGetRetiredPages(
            h, pynvml.NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR)),
        pynvml.nvmlDeviceGetRetiredPagesPendingStatus(h) == pynvml.NVML_FEATURE_ENABLED))
    return DeviceHealth(
        **ident,
        pcie_gen=link[0] if link else None, pcie_width=link[1] if link else None,
        pcie_gen_max=info.pcie_gen_max, pcie_width_max=info.pcie_width_max,
        persistence_mode=get("persistence_mode", lambda: pynvml.nvmlDeviceGetPersistenceMode(
            h) == pynvml.NVML_FEATURE_ENABLED),
        power_limit_w=mw_to_w(get("power_limit",
                                  lambda: pynvml.nvmlDeviceGetEnforcedPowerLimit(h))),
        power_default_limit_w=mw_to_w(get(
            "power_default_limit", lambda: pynvml.nvmlDeviceGetPowerManagementDefaultLimit(h))),
        app_clock_sm_mhz=app[0] if app else None, app_clock_mem_mhz=app[1] if app else None,
        default_app_clock_sm_mhz=app[2] if app else None,
        default_app_clock_mem_mhz=app[3] if app else None,
        ecc_mode=bool(ecc_mode[0]) if ecc_mode else None,
        ecc_mode_pending=bool(ecc_mode[1]) if ecc_mode else None,
        ecc_uncorrected_volatile=get("ecc_errors", lambda: ecc(pynvml.NVML_VOLATILE_ECC)),
        ecc_uncorrected_aggregate=get("ecc_errors", lambda: ecc(pynvml.NVML_AGGREGATE_ECC)),
        mig_mode=bool(mig[0]) if mig else None, mig_mode_pending=bool(mig[1]) if mig else None,
        compute_mode=get("compute_mode", lambda: pynvml.nvmlDeviceGetComputeMode(h)),
        remap_correctable=remap[0] if remap else None,
        remap_uncorrectable=remap[1] if remap else None,
        remap_pending=bool(remap[2]) if remap else None,
        remap_failure=bool(remap[3]) if remap else None,
        retired_pages_sbe=retired[0] if retired else None,
        retired_pages_dbe=retired[1] if retired else None,
        retired_pages_pending=retired[2] if retired else None,
        throttle_mask=get("throttle", reasons),
        temp_c=get("temperature", lambda: pynvml.nvmlDeviceGetTemperature(
            h, pynvml.NVML_TEMPERATURE_GPU)),
        temp_slowdown_c=info.temp_slowdown_c,
        fan_pct=get("fan", lambda: pynvml.nvmlDeviceGetFanSpeed(h)),
        vbios_version=get("vbios", lambda: _text(pynvml.nvmlDeviceGetVbiosVersion(h))),
        unsupported=frozenset(unsupported),
        read_errors=tuple(errors),
    )



def p2p_link(source: NvmlSource, a: int, b: int) -> str | None:
    """How GPU `a` reaches GPU `b`: "NVLink", "PCIe P2P", or "through host memory" (no
    peer-to-peer path); None when NVML cannot tell."""
    with source._lock:
        ha, hb = source._devs[a].handle, source._devs[b].handle
        if ha is None or hb is None:
            return None
        ok = pynvml.NVML_P2P_STATUS_OK
        try:
            if pynvml.nvmlDeviceGetP2PStatus(ha, hb, pynvml.NVML_P2P_CAPS_INDEX_NVLINK) == ok:
                return "NVLink"
            # 0 is NVML_P2P_CAPS_INDEX_READ (pynvml spells that constant as a tuple).
            if pynvml.nvmlDeviceGetP2PStatus(ha, hb, 0) == ok:
                return "PCIe P2P"
        except pynvml.NVMLError:
            return None
        return "through host memory"
