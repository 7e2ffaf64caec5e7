"""Configuration and health of one GPU, as NVML reports it, and XID events.

Read on demand (by `gputui doctor`), never by the per-tick sampler: these facts change
rarely and some calls (retired pages, remapped rows) are not free. The readings come
from `NvmlSource.read_health` and `XidWatcher` in the telemetry/nvml/ package, the only code
that talks to NVML.
"""

from __future__ import annotations

from dataclasses import dataclass

COMPUTE_MODES = {
    0: "default",
    1: "exclusive thread",
    2: "prohibited",
    3: "exclusive process",
}

# The common XIDs and what they mean (NVIDIA's "XID errors" table, r550+).
XID_MEANINGS: dict[int, str] = {
    13: "graphics engine exception",
    31: "GPU memory page fault",
    32: "invalid or corrupted push buffer stream",
    43: "GPU stopped processing",
    45: "preemptive cleanup after a previous error",
    48: "double-bit ECC error",
    61: "internal micro-controller breakpoint",
    62: "internal micro-controller halt",
    63: "ECC page retirement or row remapping recorded",
    64: "ECC page retirement or row remapping failed",
    68: "video processor exception",
    69: "graphics engine class error",
    74: "NVLink error",
    79: "GPU has fallen off the bus",
    92: "high single-bit ECC error rate",
    94: "contained ECC error",
    95: "uncontained ECC error",
    109: "context switch timeout",
    119: "GSP RPC timeout",
    120: "GSP error",
    121: "C2C link error",
    140: "ECC unrecovered error",
}


def xid_meaning(xid: int) -> str:
    return XID_MEANINGS.get(xid, "see NVIDIA's XID catalog")


@dataclass(frozen=True, slots=True)
class DeviceHealth:
    """What `gputui doctor` checks on one GPU. `None`: not read (see `unsupported`, for
    fields NVML says this GPU does not have, and `read_errors`, for calls that failed)."""

    index: int
    name: str
    uuid: str
    pci_bus_id: str
    lost: bool = False
    error: str | None = None  # the device could not be opened at all
    pcie_gen: int | None = None
    pcie_gen_max: int | None = None
    pcie_width: int | None = None
    pcie_width_max: int | None = None
    persistence_mode: bool | None = None
    power_limit_w: float | None = None  # enforced
    power_default_limit_w: float | None = None
    app_clock_sm_mhz: int | None = None
    app_clock_mem_mhz: int | None = None
    default_app_clock_sm_mhz: int | None = None
    default_app_clock_mem_mhz: int | None = None
    ecc_mode: bool | None = None
    ecc_mode_pending: bool | None = None
    ecc_uncorrected_volatile: int | None = None
    ecc_uncorrected_aggregate: int | None = None
    mig_mode: bool | None = None
    mig_mode_pending: bool | None = None
    compute_mode: int | None = None
    remap_correctable: int | None = None
    remap_uncorrectable: int | None = None
    remap_pending: bool | None = None
    remap_failure: bool | None = None
    retired_pages_sbe: int | None = None
    retired_pages_dbe: int | None = None
    retired_pages_pending: bool | None = None
    throttle_mask: int | None = None
    temp_c: int | None = None
    temp_slowdown_c: int | None = None
    fan_pct: int | None = None
    vbios_version: str | None = None
    # Names of the reads above ("ecc_mode", "remapped_rows", …) that NVML answered
    # NOT_SUPPORTED, and (name, error) for those that failed otherwise.
    unsupported: frozenset[str] = frozenset()
    read_errors: tuple[tuple[str, str], ...] = ()

    def read_error(self, name: str) -> str | None:
        return next((err for n, err in self.read_errors if n == name), None)


@dataclass(frozen=True, slots=True)
class XidEvent:
    """An XID critical error NVML delivered while we were listening."""

    gpu: int
    xid: int
    at_s: float  # time.monotonic() when it arrived
    # "xid", or the ECC events a monitor also listens for: "ecc_single_bit",
    # "ecc_double_bit", and "clock_change" (xid is 0 for those).
    kind: str = "xid"

    @property
    def meaning(self) -> str:
        if self.kind == "ecc_single_bit":
            return "single-bit ECC error (corrected)"
        if self.kind == "ecc_double_bit":
            return "double-bit ECC error (uncorrected)"
        if self.kind == "clock_change":  # worded from the GPU's state by the alert engine
            return "clocks changed"
        return xid_meaning(self.xid)
