"""How two GPUs of one machine reach each other: NVLink links, the PCIe path, P2P.

Plain data (no pynvml): `gputui.telemetry.nvml.gpu_links` reads it, a DDP benchmark result
records it (`config.topology`, bench.ddp_topology). The PCIe levels are NVML's
`nvmlGpuTopologyLevel_t`, named as `nvidia-smi topo -m` abbreviates them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

# NVML topology level → (words, nvidia-smi topo's code). "same board": both GPUs on one
# card (a dual-GPU board); PIX: one PCIe switch; PXB: several switches, no host bridge;
# PHB: a PCIe host bridge (the CPU); NODE: host bridges within one NUMA node; SYS:
# across NUMA nodes (the CPUs' interconnect, e.g. UPI/xGMI).
PCIE_LEVELS: dict[int, tuple[str, str]] = {
    0: ("same board", "INT"),
    10: ("single switch", "PIX"),
    20: ("multiple switches", "PXB"),
    30: ("host bridge", "PHB"),
    40: ("NUMA node", "NODE"),
    50: ("system", "SYS"),
}
PCIE_CODES: dict[str, str] = dict(PCIE_LEVELS.values())


@dataclass(frozen=True)
class GpuLink:
    """GPU `a` and GPU `b` (NVML indices); None where NVML could not tell."""

    a: int
    b: int
    # Active NVLink links between them: direct links, or, through NVSwitch, the fewer of
    # the two GPUs' active switch links (what `nvidia-smi topo -m` shows as NV#). 0: none.
    nvlink_links: int | None
    nvswitch: bool | None  # the NVLink path goes through NVSwitch
    pcie_common_ancestor: str | None  # PCIE_LEVELS words
    # nvmlDeviceGetP2PStatus: "NVLink", "PCIe P2P" or "through host memory".
    p2p: str | None

    @property
    def link(self) -> str | None:
        """"NVLink" when any NVLink link joins them (or NVML says P2P goes over NVLink),
        else "PCIe"; None when NVML said nothing at all."""
        if (self.nvlink_links or 0) > 0 or self.p2p == "NVLink":
            return "NVLink"
        if self.pcie_common_ancestor is None and self.nvlink_links is None and self.p2p is None:
            return None
        return "PCIe"

    def to_dict(self) -> dict[str, Any]:
        return {"gpus": [self.a, self.b], "link": self.link,
                "nvlink_links": self.nvlink_links, "nvswitch": self.nvswitch,
                "pcie_common_ancestor": self.pcie_common_ancestor, "p2p": self.p2p}


def pcie_words(level: int | None) -> str | None:
    if level is None:
        return None
    known = PCIE_LEVELS.get(level)
    return known[0] if known is not None else f"level {level}"


def norm_bus_id(bus_id: str) -> tuple[int, ...] | None:
    """"00000000:3B:00.0", "0000:3b:00.0" or "3B:00.0" → (domain, bus, device, function):
    NVML pads the domain differently in its legacy and current bus id strings."""
    try:
        head, fn = bus_id.strip().rsplit(".", 1)
        parts = head.split(":")
        if len(parts) == 2:
            parts = ["0", *parts]
        if len(parts) != 3:
            return None
        return (*(int(p, 16) for p in parts), int(fn, 16))
    except ValueError:
        return None
