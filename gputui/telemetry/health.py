"""Configuration and health of one GPU, as NVML reports it.

Read on demand (by `gputui doctor`), never by the per-tick sampler: these facts change
rarely and some calls (retired pages, remapped rows) are not free. The readings come
from `read_health` in the telemetry/nvml/ package, the only code that talks to NVML.
XID events, which the monitor listens for too, are in `telemetry/xid.py`.
"""

from __future__ import annotations

from dataclasses import dataclass

COMPUTE_MODES = {
    0: "default",
    1: "exclusive thread",
    2: "prohibited",
    3: "exclusive process",
}

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
