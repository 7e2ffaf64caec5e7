"""Configuration and health checks: pure functions from NVML readings to `Check`s.

Thresholds live here and nowhere else. A reading NVML answers NOT_SUPPORTED for is a
`skip` with that reason; a reading that failed otherwise is a `warn` naming the error
(an admission script should not pass a GPU it could not read).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from gputui.doctor.model import Check, Stage, Status, Value
from gputui.telemetry.health import COMPUTE_MODES, DeviceHealth
from gputui.telemetry.model import SystemInfo
from gputui.telemetry.throttle import (
    CURRENT_LIMIT,
    MEM_THERMAL,
    PLATFORM_POWER,
    PROCHOT,
    RELIABILITY,
    VR_THERMAL,
    reason_keys,
)
from gputui.telemetry.xid import XidEvent

# Idle temperature headroom below the slowdown threshold (°C).
HEADROOM_FAIL_C = 10
HEADROOM_WARN_C = 20
# A fan this fast at idle is fighting heat it should not have.
FAN_IDLE_WARN_PCT = 90
# Temperature headroom under load (°C).
LOAD_HEADROOM_FAIL_C = 3
LOAD_HEADROOM_WARN_C = 10
# NVIDIA's page-retirement limit is 64 pages; past 60, plan the RMA.
RETIRED_PAGES_FAIL = 60

# Clocks-event bits (telemetry/throttle.py names them).
HW_SLOWDOWN, HW_THERMAL, HW_POWER_BRAKE = 0x8, 0x40, 0x80
SW_POWER_CAP, SW_THERMAL, APP_CLOCKS = 0x4, 0x20, 0x2
# Faults whatever the load: NVIDIA's hardware reasons, and AMD's signals from outside the
# die's own limits (PROCHOT asserted, a voltage regulator or the memory too hot).
HW_FAULT = HW_SLOWDOWN | HW_POWER_BRAKE | HW_THERMAL | PROCHOT | VR_THERMAL | MEM_THERMAL
# Limits the firmware holds by design: worth a word at idle, expected at full load.
SW_LIMIT = SW_POWER_CAP | SW_THERMAL | CURRENT_LIMIT | PLATFORM_POWER | RELIABILITY

WHY = {
    "reachable": "a GPU NVML cannot read cannot run work",
    "pcie_width": "fewer lanes than the slot and card support cut host↔GPU bandwidth "
                  "(a badly seated card or riser)",
    "pcie_gen": "a lower PCIe generation halves host↔GPU bandwidth per step down "
                "(it drops at idle to save power, so at idle this only warns)",
    "persistence_mode": "without it the driver tears down between jobs: slow first CUDA "
                        "call, and clock/power settings are lost",
    "power_limit": "a power limit below the default caps clocks: this GPU becomes the "
                   "straggler of every synchronous step",
    "app_clocks": "application or locked clocks that differ from the defaults hold the "
                  "GPU below (or pin it at) a clock nobody chose for this job",
    "ecc_mode": "without ECC, memory errors silently corrupt results; a pending change "
                "applies only after a reset",
    "mig_mode": "with MIG on, a job sees one slice of the GPU, not all of it",
    "compute_mode": "exclusive or prohibited modes refuse a second CUDA context "
                    "(NCCL helpers, monitoring, a second rank)",
    "vbios": "GPUs of one model on different VBIOS versions can differ in clocks and "
             "power behaviour",
    "driver": "the NVML library must match the loaded kernel driver; the CUDA version "
              "bounds which frameworks run",
    "remapped_rows": "a pending remap needs a GPU reset; a remap failure means the memory "
                     "has run out of spare rows (RMA)",
    "retired_pages": "retired pages mark failing memory; pending retirements need a reboot, "
                     "and near 64 the board is due for RMA",
    "ecc_volatile": "uncorrected ECC errors since the driver loaded: a job on this GPU may "
                    "have crashed or computed garbage",
    "ecc_aggregate": "uncorrected ECC errors over the board's life: a history of failing "
                     "memory",
    "throttle_idle": "a GPU that throttles while idle (power brake, HW slowdown, thermal) "
                     "has a power-supply, sensor or cooling fault",
    "temp_headroom": "an idle GPU this close to its slowdown temperature will throttle "
                     "under load",
    "throttle_load": "under load, power brake, HW slowdown and HW thermal slowdown are faults "
                     "(power supply, cooling); SW power cap at full power is expected",
    "temp_headroom_load": "a GPU that reaches its slowdown temperature under load throttles "
                          "and falls behind its siblings",
    "fan": "a fan at full speed while idle points to blocked airflow or a failing fan",
    "xid": "an XID is the driver reporting a GPU fault (memory, bus, engine)",
}

NOT_SUPPORTED = "not supported on this GPU"


def _check(cid: str, gpu: int | None, status: Status, value: Value, expected: Value,
           unit: str | None, stage: Stage, detail: str | None = None) -> Check:
    return Check(id=cid, gpu=gpu, status=status, value=value, expected=expected, unit=unit,
                 why=WHY[cid], detail=detail, stage=stage)


def _unread(h: DeviceHealth, cid: str, read: str, stage: Stage,
            unit: str | None = None) -> Check:
    """The check's reading is missing: skip when unsupported, warn on an error."""
    if read in h.unsupported:
        return _check(cid, h.index, Status.SKIP, None, None, unit, stage, NOT_SUPPORTED)
    err = h.read_error(read)
    return _check(cid, h.index, Status.WARN, None, None, unit, stage,
                  f"NVML could not read it: {err}" if err else "not read")


def unreachable(h: DeviceHealth) -> Check:
    return _check("reachable", h.index, Status.FAIL, h.error or "GPU is lost", "readable",
                  None, Stage.CONFIG, h.error)


# --- configuration -------------------------------------------------------------------------


def config_checks(h: DeviceHealth, *, gen: bool = True) -> list[Check]:
    """Without `gen`, the PCIe generation is left to be read under load (the probes)."""
    link = [pcie_width(h), pcie_gen(h, loaded=False)] if gen else [pcie_width(h)]
    return [*link, persistence(h), power_limit(h), app_clocks(h), ecc_mode(h), mig_mode(h),
            compute_mode(h)]


def pcie_width(h: DeviceHealth) -> Check:
    c = Stage.CONFIG
    if h.pcie_width is None or h.pcie_width_max is None:
        return _unread(h, "pcie_width", "pcie_link", c, "lanes")
    ok = h.pcie_width >= h.pcie_width_max
    return _check("pcie_width", h.index, Status.PASS if ok else Status.FAIL, h.pcie_width,
                  h.pcie_width_max, "lanes", c,
                  None if ok else f"link trained at x{h.pcie_width} of x{h.pcie_width_max}")


def pcie_gen(h: DeviceHealth, *, loaded: bool) -> Check:
    c = Stage.CONFIG
    if h.pcie_gen is None or h.pcie_gen_max is None:
        return _unread(h, "pcie_gen", "pcie_link", c, "gen")
    if h.pcie_gen >= h.pcie_gen_max:
        return _check("pcie_gen", h.index, Status.PASS, h.pcie_gen, h.pcie_gen_max, "gen", c)
    status = Status.FAIL if loaded else Status.WARN
    when = "under load" if loaded else "at idle (read it under load to be sure)"
    return _check("pcie_gen", h.index, status, h.pcie_gen, h.pcie_gen_max, "gen", c,
                  f"gen {h.pcie_gen} of {h.pcie_gen_max} {when}")


def persistence(h: DeviceHealth) -> Check:
    c = Stage.CONFIG
    if h.persistence_mode is None:
        return _unread(h, "persistence_mode", "persistence_mode", c)
    on = h.persistence_mode
    return _check("persistence_mode", h.index, Status.PASS if on else Status.WARN,
                  "enabled" if on else "disabled", "enabled", None, c,
                  None if on else "persistence mode is off")


def power_limit(h: DeviceHealth) -> Check:
    c = Stage.CONFIG
    if h.power_limit_w is None:
        return _unread(h, "power_limit", "power_limit", c, "W")
    if h.power_default_limit_w is None:
        return _unread(h, "power_limit", "power_default_limit", c, "W")
    got, want = h.power_limit_w, h.power_default_limit_w
    if got < want:
        return _check("power_limit", h.index, Status.FAIL, got, want, "W", c,
                      f"enforced limit {got:g} W is below the default {want:g} W")
    if got > want:
        return _check("power_limit", h.index, Status.WARN, got, want, "W", c,
                      f"enforced limit {got:g} W is above the default {want:g} W")
    return _check("power_limit", h.index, Status.PASS, got, want, "W", c)


def app_clocks(h: DeviceHealth) -> Check:
    c = Stage.CONFIG
    locked = h.throttle_mask is not None and bool(h.throttle_mask & APP_CLOCKS)
    have = None not in (h.app_clock_sm_mhz, h.app_clock_mem_mhz,
                        h.default_app_clock_sm_mhz, h.default_app_clock_mem_mhz)
    if not have and not locked:
        if h.throttle_mask is not None and "app_clocks" in h.unsupported:
            # No application clocks on this GPU, and the clocks are not held by a setting.
            return _check("app_clocks", h.index, Status.PASS, "not held", "default", None, c)
        return _unread(h, "app_clocks", "app_clocks", c, "MHz")
    value = (f"SM {h.app_clock_sm_mhz} / mem {h.app_clock_mem_mhz}" if have
             else "held by a clock setting")
    expected = (f"SM {h.default_app_clock_sm_mhz} / mem {h.default_app_clock_mem_mhz}"
                if have else "default")
    changed = have and (h.app_clock_sm_mhz, h.app_clock_mem_mhz) != (
        h.default_app_clock_sm_mhz, h.default_app_clock_mem_mhz)
    if changed or locked:
        why = []
        if changed:
            why.append("application clocks differ from the defaults")
        if locked:
            why.append("NVML reports clocks held by an application-clock or locked-clock "
                       "setting")
        return _check("app_clocks", h.index, Status.WARN, value, expected,
                      "MHz" if have else None, c, "; ".join(why))
    return _check("app_clocks", h.index, Status.PASS, value, expected, "MHz", c)


def ecc_mode(h: DeviceHealth) -> Check:
    c = Stage.CONFIG
    if h.ecc_mode is None:
        return _unread(h, "ecc_mode", "ecc_mode", c)
    cur = "enabled" if h.ecc_mode else "disabled"
    if not h.ecc_mode:
        return _check("ecc_mode", h.index, Status.FAIL, cur, "enabled", None, c,
                      "ECC is off" + (" (on after the next reset)" if h.ecc_mode_pending
                                      else ""))
    if h.ecc_mode_pending is False:
        return _check("ecc_mode", h.index, Status.WARN, cur, "enabled", None, c,
                      "ECC turns off at the next reset")
    return _check("ecc_mode", h.index, Status.PASS, cur, "enabled", None, c)


def mig_mode(h: DeviceHealth) -> Check:
    c = Stage.CONFIG
    if h.mig_mode is None:
        return _unread(h, "mig_mode", "mig_mode", c)
    cur = "enabled" if h.mig_mode else "disabled"
    if h.mig_mode:
        return _check("mig_mode", h.index, Status.WARN, cur, "disabled", None, c,
                      "MIG is on: whole-GPU jobs and probes see one instance")
    if h.mig_mode_pending:
        return _check("mig_mode", h.index, Status.WARN, cur, "disabled", None, c,
                      "MIG turns on at the next reset")
    return _check("mig_mode", h.index, Status.PASS, cur, "disabled", None, c)


def compute_mode(h: DeviceHealth) -> Check:
    c = Stage.CONFIG
    if h.compute_mode is None:
        return _unread(h, "compute_mode", "compute_mode", c)
    name = COMPUTE_MODES.get(h.compute_mode, f"mode {h.compute_mode}")
    status = {0: Status.PASS, 2: Status.FAIL}.get(h.compute_mode, Status.WARN)
    detail = None if status is Status.PASS else f"compute mode is {name}"
    return _check("compute_mode", h.index, status, name, "default", None, c, detail)


def vbios_checks(healths: Sequence[DeviceHealth]) -> list[Check]:
    """Each GPU's VBIOS against the most common one among GPUs of the same model."""
    common: dict[str, str] = {}
    for name in {h.name for h in healths}:
        versions = Counter(h.vbios_version for h in healths
                           if h.name == name and h.vbios_version is not None)
        if versions:
            common[name] = versions.most_common(1)[0][0]
    out = []
    for h in healths:
        if h.vbios_version is None:
            out.append(_unread(h, "vbios", "vbios", Stage.CONFIG))
            continue
        want = common[h.name]
        ok = h.vbios_version == want
        out.append(_check("vbios", h.index, Status.PASS if ok else Status.WARN,
                          h.vbios_version, want, None, Stage.CONFIG,
                          None if ok else f"other {h.name} GPUs here run VBIOS {want}"))
    return out


def driver_check(system: SystemInfo) -> Check:
    c = Stage.CONFIG
    drv, lib, cuda = system.driver_version, system.nvml_version, system.cuda_driver_version
    if drv is None:
        return _check("driver", None, Status.FAIL, None, "readable", None, c,
                      "NVML could not read the driver version")
    value = f"driver {drv}, CUDA {cuda or 'N/A'}"
    # NVML's library version is "<CUDA major>.<driver version>" when they match.
    if lib is not None and not lib.endswith(drv):
        return _check("driver", None, Status.FAIL, value, "NVML library matches the driver",
                      None, c,
                      f"NVML library {lib} does not match the kernel driver {drv}")
    if cuda is None:
        return _check("driver", None, Status.WARN, value, "a CUDA version", None, c,
                      "NVML did not report the driver's CUDA version")
    return _check("driver", None, Status.PASS, value, "NVML library matches the driver", None,
                  c, f"NVML library {lib}" if lib else None)


# --- health ---------------------------------------------------------------------------------


def health_checks(h: DeviceHealth, *, idle_mask: int | None,
                  idle_temp_c: int | None) -> list[Check]:
    """`idle_mask`: every clocks-event bit seen while observing at idle (OR-ed);
    `idle_temp_c`: the hottest idle reading."""
    return [remapped_rows(h), retired_pages(h), ecc_volatile(h), ecc_aggregate(h),
            throttle_idle(h, idle_mask), temp_headroom(h, idle_temp_c), fan(h)]


def remapped_rows(h: DeviceHealth) -> Check:
    s = Stage.HEALTH
    if h.remap_pending is None:
        return _unread(h, "remapped_rows", "remapped_rows", s)
    counts = (f"{h.remap_correctable} correctable, {h.remap_uncorrectable} uncorrectable "
              "rows remapped")
    if h.remap_failure:
        return _check("remapped_rows", h.index, Status.FAIL, "failed", "ok", None, s,
                      f"a row remap failed: RMA the board ({counts})")
    if h.remap_pending:
        return _check("remapped_rows", h.index, Status.FAIL, "pending", "ok", None, s,
                      f"a row remap is pending: reset the GPU ({counts})")
    return _check("remapped_rows", h.index, Status.PASS, "ok", "ok", None, s, counts)


def retired_pages(h: DeviceHealth) -> Check:
    s = Stage.HEALTH
    if h.retired_pages_sbe is None or h.retired_pages_dbe is None:
        return _unread(h, "retired_pages", "retired_pages", s, "pages")
    total = h.retired_pages_sbe + h.retired_pages_dbe
    if h.retired_pages_pending:
        return _check("retired_pages", h.index, Status.FAIL, total, 0, "pages", s,
                      "a page retirement is pending: reboot (or reset the GPU)")
    if total >= RETIRED_PAGES_FAIL:
        return _check("retired_pages", h.index, Status.FAIL, total, 0, "pages", s,
                      f"{total} pages retired, near NVIDIA's limit of 64: RMA")
    if h.retired_pages_dbe:
        return _check("retired_pages", h.index, Status.WARN, total, 0, "pages", s,
                      f"{h.retired_pages_dbe} retired for double-bit errors")
    return _check("retired_pages", h.index, Status.PASS, total, 0, "pages", s)


def ecc_volatile(h: DeviceHealth) -> Check:
    return _ecc(h, "ecc_volatile", h.ecc_uncorrected_volatile, Status.FAIL, "since boot")


def ecc_aggregate(h: DeviceHealth) -> Check:
    return _ecc(h, "ecc_aggregate", h.ecc_uncorrected_aggregate, Status.WARN, "lifetime")


def _ecc(h: DeviceHealth, cid: str, count: int | None, bad: Status, when: str) -> Check:
    s = Stage.HEALTH
    if count is None:
        if h.ecc_mode is False:
            return _check(cid, h.index, Status.SKIP, None, 0, "errors", s,
                          "ECC is off: no counts")
        return _unread(h, cid, "ecc_errors", s, "errors")
    if count:
        return _check(cid, h.index, bad, count, 0, "errors", s,
                      f"{count} uncorrected ECC errors ({when})")
    return _check(cid, h.index, Status.PASS, count, 0, "errors", s)


def throttle_idle(h: DeviceHealth, mask: int | None) -> Check:
    s = Stage.HEALTH
    if mask is None:
        return _unread(h, "throttle_idle", "throttle", s)
    keys = [k for k in reason_keys(mask) if k not in (
        "gpu_idle", "applications_clocks_setting", "display_clock_setting")]
    value = ", ".join(keys) or "none"
    if mask & HW_FAULT:
        return _check("throttle_idle", h.index, Status.FAIL, value, "none", None, s,
                      "hardware throttling at idle")
    if mask & SW_LIMIT:
        return _check("throttle_idle", h.index, Status.WARN, value, "none", None, s,
                      "software throttling at idle")
    return _check("throttle_idle", h.index, Status.PASS, value, "none", None, s)


def throttle_load(h: DeviceHealth, mask: int | None) -> Check:
    """Every clocks-event reason seen while the probes loaded the GPU (OR-ed)."""
    s = Stage.PERFORMANCE
    if mask is None:
        return _unread(h, "throttle_load", "throttle", s)
    keys = [k for k in reason_keys(mask) if k not in (
        "gpu_idle", "applications_clocks_setting", "display_clock_setting")]
    value = ", ".join(keys) or "none"
    if mask & HW_FAULT:
        return _check("throttle_load", h.index, Status.FAIL, value, "no HW throttling", None,
                      s, "hardware throttling under load")
    if mask & SW_THERMAL:
        return _check("throttle_load", h.index, Status.WARN, value, "no HW throttling", None,
                      s, "SW thermal slowdown under load: check cooling")
    return _check("throttle_load", h.index, Status.PASS, value, "no HW throttling", None, s,
                  "SW power cap at full power is expected" if mask & SW_POWER_CAP else None)


def temp_headroom_load(h: DeviceHealth, temp_c: int | None) -> Check:
    """The hottest reading while the probes ran, against the slowdown temperature."""
    s = Stage.PERFORMANCE
    if temp_c is None or h.temp_slowdown_c is None:
        return _check("temp_headroom_load", h.index, Status.SKIP, None, None, "°C", s,
                      "no temperature or slowdown threshold from NVML")
    room = h.temp_slowdown_c - temp_c
    detail = f"{temp_c} °C under load, slowdown at {h.temp_slowdown_c} °C"
    status = (Status.FAIL if room < LOAD_HEADROOM_FAIL_C else
              Status.WARN if room < LOAD_HEADROOM_WARN_C else Status.PASS)
    return _check("temp_headroom_load", h.index, status, room, f"≥ {LOAD_HEADROOM_WARN_C}",
                  "°C", s, detail)


def temp_headroom(h: DeviceHealth, temp_c: int | None) -> Check:
    s = Stage.HEALTH
    if temp_c is None:
        return _unread(h, "temp_headroom", "temperature", s, "°C")
    if h.temp_slowdown_c is None:
        return _check("temp_headroom", h.index, Status.SKIP, None, None, "°C", s,
                      "NVML gives no slowdown temperature for this GPU")
    room = h.temp_slowdown_c - temp_c
    want = f"≥ {HEADROOM_WARN_C}"
    detail = f"{temp_c} °C idle, slowdown at {h.temp_slowdown_c} °C"
    if room < HEADROOM_FAIL_C:
        return _check("temp_headroom", h.index, Status.FAIL, room, want, "°C", s, detail)
    if room < HEADROOM_WARN_C:
        return _check("temp_headroom", h.index, Status.WARN, room, want, "°C", s, detail)
    return _check("temp_headroom", h.index, Status.PASS, room, want, "°C", s, detail)


def fan(h: DeviceHealth) -> Check:
    s = Stage.HEALTH
    if h.fan_pct is None:
        if "fan" in h.unsupported:
            return _check("fan", h.index, Status.SKIP, None, None, "%", s,
                          "no fan reported (passively cooled: the chassis fans cool it)")
        return _unread(h, "fan", "fan", s, "%")
    want = f"< {FAN_IDLE_WARN_PCT}"
    if h.fan_pct >= FAN_IDLE_WARN_PCT:
        return _check("fan", h.index, Status.WARN, h.fan_pct, want, "%", s,
                      f"fan at {h.fan_pct} % while idle")
    return _check("fan", h.index, Status.PASS, h.fan_pct, want, "%", s)


def xid_checks(gpus: Sequence[int], events: Sequence[XidEvent], unsupported: set[int],
               watched_s: float, error: str | None = None) -> list[Check]:
    out = []
    for gpu in gpus:
        mine = [e for e in events if e.gpu == gpu]
        if mine:
            text = "; ".join(f"XID {e.xid} ({e.meaning})" for e in mine)
            out.append(_check("xid", gpu, Status.FAIL, ", ".join(str(e.xid) for e in mine),
                              "none", None, Stage.EVENTS, text))
        elif gpu in unsupported:
            out.append(_check("xid", gpu, Status.SKIP, None, "none", None, Stage.EVENTS,
                              "this GPU cannot report XID events (NVML)"))
        elif error:
            out.append(_check("xid", gpu, Status.WARN, "none seen", "none", None,
                              Stage.EVENTS, error))
        else:
            out.append(_check("xid", gpu, Status.PASS, "none", "none", None, Stage.EVENTS,
                              f"watched for {watched_s:.1f} s"))
    return out

