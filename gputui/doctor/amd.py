"""The doctor's checks for AMD GPUs, read from amdgpu's kernel files (telemetry/amd).

The checks that apply to them, with the NVIDIA checks' own rules and thresholds
(`doctor.checks`): the PCIe link below its maximum, throttling at idle, the temperature
margin to the slowdown threshold, uncorrected RAS (ECC) errors, the fan at idle; plus the
VRAM held at idle. NVML's configuration (persistence, application clocks, MIG, compute
mode, VBIOS) and its event stream (XIDs) have no AMD counterpart here; the performance
probes run on NVIDIA GPUs (the worker's device numbering is CUDA's).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence

from gputui.doctor import checks
from gputui.doctor.model import Check, Stage, Status
from gputui.telemetry.health import DeviceHealth
from gputui.telemetry.model import GpuSample, SystemInfo
from gputui.telemetry.source import GpuSource

# Reads NVML has and amdgpu's files do not: those checks are skipped as "not supported".
NOT_ON_AMD = frozenset({"persistence_mode", "app_clocks", "ecc_mode", "mig_mode",
                        "compute_mode", "remapped_rows", "retired_pages", "fan"})
# VRAM held on an idle GPU: another process's allocation a job here will not get.
VRAM_IDLE_WARN_PCT = 10.0
WHY_VRAM = "VRAM held while the GPU is idle is memory a job here will not get"
WHY_DRIVER = "the amdgpu kernel driver's version bounds which ROCm releases run"


def health_of(s: GpuSample) -> DeviceHealth:
    """A sample as the doctor's record (what amdgpu's files give; None elsewhere)."""
    info = s.info
    return DeviceHealth(
        index=s.index, name=info.name, uuid=info.uuid, pci_bus_id=info.pci_bus_id,
        lost=s.lost, error=s.error if s.lost or s.error else None,
        pcie_gen=s.pcie_gen, pcie_gen_max=info.pcie_gen_max, pcie_width=s.pcie_width,
        pcie_width_max=info.pcie_width_max, power_limit_w=s.power_limit_w,
        ecc_uncorrected_volatile=s.ecc_uncorrected, throttle_mask=s.throttle_mask,
        temp_c=s.temp_c, temp_slowdown_c=info.temp_slowdown_c, fan_pct=s.fan_pct,
        # A consumer card has no RAS counters: no ECC, nothing to count.
        unsupported=(NOT_ON_AMD - ({"fan"} if s.fan_pct is not None else set()))
        | ({"ecc_errors"} if s.ecc_uncorrected is None else set()))


def driver_check(system: SystemInfo) -> Check:
    version = system.amd_driver_version
    return Check("amd_driver", None, Status.PASS if version else Status.WARN,
                 f"amdgpu {version}" if version else None, "readable", None, WHY_DRIVER,
                 None if version else "neither amdgpu's nor the kernel's version is readable",
                 Stage.CONFIG)


def vram_idle(s: GpuSample) -> Check:
    total = s.mem_total_bytes or s.info.mem_total_bytes
    if s.mem_used_bytes is None or not total:
        return Check("vram_idle", s.index, Status.WARN, None, None, "%", WHY_VRAM,
                     "amdgpu did not give VRAM use", Stage.HEALTH)
    pct = round(100.0 * s.mem_used_bytes / total, 1)
    detail = f"{s.mem_used_bytes / 2**30:.1f} GiB of {total / 2**30:.0f} GiB in use at idle"
    status = Status.WARN if pct > VRAM_IDLE_WARN_PCT else Status.PASS
    return Check("vram_idle", s.index, status, pct, f"≤ {VRAM_IDLE_WARN_PCT:g}", "%", WHY_VRAM,
                 detail, Stage.HEALTH)


def amd_checks(source: GpuSource, gpus: Sequence[int], base: int,
               cancel: threading.Event, emit: Callable[[Check], None]) -> list[int]:
    """Every check of the AMD GPUs numbered `gpus` (`base` + the source's own index), in
    the order the NVIDIA ones run; returns the GPUs that could be read."""
    emit(driver_check(source.system))
    reachable: list[int] = []
    for index in gpus:
        if cancel.is_set():
            break
        local = index - base
        source.open_device(local)
        # Two readings: MI300's throttle reasons are its residency counters' growth
        # between them, and the first has nothing to compare with.
        source.read_device(local, slow=True, processes=False)
        sample, _ = source.read_device(local, slow=True, processes=False)
        h = health_of(sample)
        if h.error is not None:
            emit(checks.unreachable(h))
            continue
        reachable.append(index)
        for c in (checks.pcie_width(h), checks.pcie_gen(h, loaded=False)):
            emit(c)
        for c in (checks.ecc_volatile(h), checks.throttle_idle(h, h.throttle_mask),
                  checks.temp_headroom(h, h.temp_c), checks.fan(h), vram_idle(sample)):
            emit(c)
    return reachable
