"""XID critical errors and the ECC and clock events NVML delivers while a monitor, the
doctor or a benchmark listens (`XidWatcher` in the telemetry/nvml/ package), and what
each XID means."""

from __future__ import annotations

from dataclasses import dataclass

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
