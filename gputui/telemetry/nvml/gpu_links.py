"""How GPUs of an open NvmlSource reach each other (`GpuLink`s), for the GPU-to-GPU
topology of a DDP benchmark. Read once per run, never per tick."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pynvml

from gputui.telemetry.nvml.errors import text
from gputui.telemetry.nvml.health_reads import p2p_link
from gputui.telemetry.nvml.query import NvmlQuery
from gputui.telemetry.nvml.source import NvmlSource
from gputui.telemetry.topology import GpuLink, norm_bus_id, pcie_words

SWITCH = "switch"


def _links(handle: Any) -> list[tuple[int, ...] | str | None] | None:
    """Each active NVLink link's far end: a GPU's bus id (normalised), SWITCH, or None
    (unknown); None when the GPU has no NVLink."""
    q = NvmlQuery()
    out: list[tuple[int, ...] | str | None] = []
    for link in range(pynvml.NVML_NVLINK_MAX_LINKS):
        active = q(pynvml.nvmlDeviceGetNvLinkState, handle, link, key=f"state/{link}")
        if active is None:
            if f"state/{link}" in q.unsupported:
                return None if link == 0 else out
            if q.last_error == pynvml.NVML_ERROR_INVALID_ARGUMENT:
                break  # past this GPU's last link
            out.append(None)
            continue
        if active != pynvml.NVML_FEATURE_ENABLED:
            continue
        # Older drivers have no remote type: their far ends are GPUs (or an IBM NPU).
        kind = q(pynvml.nvmlDeviceGetNvLinkRemoteDeviceType, handle, link, key="remote_type")
        if kind == pynvml.NVML_NVLINK_DEVICE_TYPE_SWITCH:
            out.append(SWITCH)
            continue
        pci = q(pynvml.nvmlDeviceGetNvLinkRemotePciInfo, handle, link, key=f"remote/{link}")
        out.append(None if pci is None else norm_bus_id(text(pci.busId)))
    return out


def gpu_links(source: NvmlSource, indices: Sequence[int]) -> list[GpuLink]:
    """Every pair of `indices` (in order, a < b by position): how they are connected.
    A GPU that is lost or not opened gives pairs with every field None."""
    surveys: dict[int, list[Any] | None] = {}
    bus: dict[int, tuple[int, ...] | None] = {}
    handles = {i: source.handle(i) for i in indices if 0 <= i < source.count}
    for i, h in handles.items():
        bus[i] = norm_bus_id(source.devices[i].pci_bus_id)
        surveys[i] = _links(h) if h is not None else None
    out = []
    for pos, a in enumerate(indices):
        for b in indices[pos + 1:]:
            out.append(_pair(source, a, b, handles, surveys, bus))
    return out


def _pair(source: NvmlSource, a: int, b: int, handles: dict[int, Any],
          surveys: dict[int, list[Any] | None], bus: dict[int, tuple[int, ...] | None],
          ) -> GpuLink:
    ha, hb = handles.get(a), handles.get(b)
    if ha is None or hb is None:
        return GpuLink(a, b, None, None, None, None)
    level = NvmlQuery()(pynvml.nvmlDeviceGetTopologyCommonAncestor, ha, hb)
    p2p = p2p_link(source, a, b)
    la, lb = surveys.get(a), surveys.get(b)
    count: int | None
    nvswitch: bool | None
    if la is None and lb is None:
        count, nvswitch = 0, False  # neither GPU has NVLink
    elif la is None or lb is None:
        count, nvswitch = 0, False
    else:
        direct = sum(1 for far in la if far is not None and far == bus.get(b))
        via_a, via_b = la.count(SWITCH), lb.count(SWITCH)
        if direct:
            count, nvswitch = direct, False
        elif via_a and via_b and p2p == "NVLink":
            count, nvswitch = min(via_a, via_b), True
        else:
            count, nvswitch = 0, False
    return GpuLink(a, b, count, nvswitch, pcie_words(level), p2p)
