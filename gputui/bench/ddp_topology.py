"""The GPU-to-GPU topology of a DDP run (`config.topology`), parent side.

Each rank reports its GPU's UUID (torch's `get_device_properties(i).uuid`: CUDA's index i
is not NVML's, see bench.throttle_watch), the worker keeps them in
`settings.rank_gpu_uuids` (one per global rank, None on a CPU), and the runner maps them
to NVML devices here and reads how every pair of this machine's GPUs is connected.
UUIDs of other machines' ranks are not in this machine's NVML: they stay unmapped.

None for single-GPU and CPU runs, and when NVML is not there. Torch- and pynvml-free.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from gputui.telemetry.topology import PCIE_CODES, GpuLink

if TYPE_CHECKING:
    from gputui.telemetry.nvml import NvmlSource

SOURCE = ("NVML, read by the runner at the end of the run: NVLink links between the GPUs "
          "(direct, or through NVSwitch), the PCIe common ancestor, P2P status")


def rank_indices(uuids: Sequence[str | None],
                 index_of_uuid: Callable[[str], int | None]) -> list[int | None]:
    """Each rank's NVML index (None: a CPU rank, or a GPU not on this machine)."""
    return [index_of_uuid(u) if u else None for u in uuids]


def topology(uuids: Sequence[str | None] | None,
             index_of_uuid: Callable[[str], int | None],
             links_of: Callable[[list[int]], list[GpuLink]]) -> dict[str, Any] | None:
    """`config.topology`: every rank's GPU and every pair of distinct GPUs of this
    machine; None unless at least two ranks ran on GPUs."""
    if not uuids or sum(1 for u in uuids if u) < 2:
        return None
    indices = rank_indices(uuids, index_of_uuid)
    gpus = sorted({i for i in indices if i is not None})
    ranks_of = {g: [r for r, i in enumerate(indices) if i == g] for g in gpus}
    pairs = []
    for link in (links_of(gpus) if len(gpus) >= 2 else []):
        d = link.to_dict()
        d["ranks"] = [ranks_of[link.a], ranks_of[link.b]]
        pairs.append(d)
    return {
        "gpus": [{"rank": r, "uuid": u, "nvml_index": i}
                 for r, (u, i) in enumerate(zip(uuids, indices, strict=True))],
        "pairs": pairs,
        "source": SOURCE,
    }


def read_topology(source: NvmlSource | None, uuids: Any) -> dict[str, Any] | None:
    """`topology` through an open NVML source; None without one (a run never fails for
    this)."""
    if source is None or not isinstance(uuids, list | tuple):
        return None
    clean = [u if isinstance(u, str) and u else None for u in uuids]
    try:
        from gputui.telemetry.nvml.gpu_links import gpu_links

        return topology(clean, source.index_of_uuid, lambda gs: gpu_links(source, gs))
    except Exception:
        return None


def pair_words(pair: Mapping[str, Any]) -> str:
    """"GPU 0–1: NVLink ×4, PCIe single switch (PIX), P2P over NVLink"."""
    gpus = pair.get("gpus") or ["?", "?"]
    parts = []
    n = pair.get("nvlink_links")
    if pair.get("link") == "NVLink":
        via = " via NVSwitch" if pair.get("nvswitch") else ""
        parts.append(f"NVLink ×{n}{via}" if n else "NVLink")
    anc = pair.get("pcie_common_ancestor")
    if anc is not None:
        code = PCIE_CODES.get(str(anc))
        parts.append(f"PCIe {anc}" + (f" ({code})" if code else ""))
    elif pair.get("link") != "NVLink":
        parts.append("PCIe, path unknown")
    p2p = pair.get("p2p")
    if p2p is not None:
        parts.append("P2P " + ("over NVLink" if p2p == "NVLink" else
                               "over PCIe" if p2p == "PCIe P2P" else "none (through host memory)"))
    return f"GPU {gpus[0]}–{gpus[1]}: " + ", ".join(parts)


def topology_words(topo: Mapping[str, Any] | None) -> str | None:
    """One line for the summary and the TUI result view from `config.topology`; None when
    there is none."""
    if topo is None:
        return None
    pairs = [p for p in topo.get("pairs") or [] if isinstance(p, Mapping)]
    gpus = [g for g in topo.get("gpus") or [] if isinstance(g, Mapping)]
    unmapped = sum(1 for g in gpus if g.get("uuid") and g.get("nvml_index") is None)
    text = "; ".join(pair_words(p) for p in pairs)
    if not pairs:
        text = "no two ranks on distinct GPUs of this machine"
    if unmapped:
        text += f" ({unmapped} rank(s) on GPUs NVML here does not list)"
    return text
