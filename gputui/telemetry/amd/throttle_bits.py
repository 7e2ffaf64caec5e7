"""amdgpu's throttle status in gputui's throttle vocabulary (gputui.telemetry.throttle).

Two sources, by layout:
- `indep_throttle_status` (gpu_metrics v1.3: MI200, RDNA2/3): the ASIC-independent
  SMU_THROTTLER_* bits of drivers/gpu/drm/amd/pm/swsmu/inc/amdgpu_smu.h.
- MI300's residency accumulators (v1.6 and later), which count the firmware cycles each
  throttler was active: a throttler whose count grew since the last reading was active
  in between (what amd-smi's violation status reports). MI300 reports no status word.

Power limits become NVML's "SW power cap" and the GPU's own temperature limits its "SW
thermal slowdown" — the firmware lowering the clock target to hold a limit, as NVIDIA's
SW reasons mean — so episodes and alerts read the same as on NVIDIA. What NVML has no bit
for (current limits, memory and VR temperature, PROCHOT, PPM, FIT) gets gputui's
AMD-only reasons.
"""

from __future__ import annotations

from gputui.telemetry import throttle as t
from gputui.telemetry.amd.gpu_metrics import Residency

# SMU_THROTTLER_*_BIT → gputui's bit.
_INDEP: tuple[tuple[range | tuple[int, ...], int], ...] = (
    (range(0, 8), 0x4),  # PPT0..3, SPL, FPPT, SPPT, SPPT_APU: SW power cap
    (range(16, 24), t.CURRENT_LIMIT),  # TDC_GFX/SOC/MEM/VDD/CVIP, EDC_CPU/GFX, APCC
    # TEMP_GPU, TEMP_CORE, TEMP_EDGE, TEMP_HOTSPOT, TEMP_SOC, TEMP_LIQUID0/1
    ((32, 33, 35, 36, 37, 42, 43), 0x20),
    ((34,), t.MEM_THERMAL),  # TEMP_MEM
    ((38, 39, 40, 41, 44, 45), t.VR_THERMAL),  # TEMP_VR_GFX/SOC/MEM0/MEM1, VRHOT0/1
    ((46, 47), t.PROCHOT),  # PROCHOT_CPU, PROCHOT_GFX
    ((56,), t.PLATFORM_POWER),  # PPM
    ((57,), t.RELIABILITY),  # FIT
)


def from_indep(status: int) -> int:
    """gputui's mask for an `indep_throttle_status` word (reserved bits dropped)."""
    mask = 0
    for bits, ours in _INDEP:
        if any(status >> b & 1 for b in bits):
            mask |= ours
    return mask


def from_residency(prev: Residency, cur: Residency) -> int | None:
    """gputui's mask for the throttlers active between two readings; None when the
    firmware has not counted since (the same table again) or its counters restarted."""
    if cur.cycles <= prev.cycles:
        return None
    mask = 0
    for field, ours in (("ppt", 0x4), ("socket_thermal", 0x20), ("hbm_thermal", t.MEM_THERMAL),
                        ("vr_thermal", t.VR_THERMAL), ("prochot", t.PROCHOT)):
        a, b = getattr(prev, field), getattr(cur, field)
        if a is None or b is None:
            continue
        if b < a:
            return None
        if b > a:
            mask |= ours
    return mask
