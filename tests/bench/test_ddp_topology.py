"""The GPU-to-GPU topology of a DDP run (`config.topology`): each rank's GPU
by UUID → its NVML device → how every pair is connected (NVLink links or the PCIe path,
P2P), read with the fake NVML; shown in the summary."""

from __future__ import annotations

import json
from typing import Any

from gputui.bench.config import RunConfig, config_words
from gputui.bench.ddp_topology import read_topology, topology, topology_words
from gputui.bench.result import Result
from gputui.telemetry.topology import GpuLink, norm_bus_id

U = [f"GPU-7{i}000000-0000-0000-0000-000000000000" for i in range(4)]


def _open() -> Any:
    from gputui.telemetry.nvml import NvmlSource

    src = NvmlSource()
    src.open()
    return src


# --------------------------------------------------------------------------- pure mapping


def test_rank_uuids_map_to_nvml_indices_and_every_pair_once() -> None:
    # CUDA_VISIBLE_DEVICES=3,1,5: rank 0 on NVML GPU 3, rank 1 on GPU 1, rank 2 on a GPU
    # NVML here does not list (another machine), rank 3 shares GPU 1 with rank 1.
    nvml = {"GPU-a": 3, "GPU-b": 1}
    asked: list[list[int]] = []

    def links_of(gpus: list[int]) -> list[GpuLink]:
        asked.append(gpus)
        return [GpuLink(1, 3, 2, False, "single switch", "NVLink")]

    topo = topology(["GPU-a", "GPU-b", "GPU-elsewhere", "GPU-b"], nvml.get, links_of)
    assert asked == [[1, 3]]  # distinct GPUs, in NVML order
    assert topo is not None
    assert topo["gpus"] == [
        {"rank": 0, "uuid": "GPU-a", "nvml_index": 3},
        {"rank": 1, "uuid": "GPU-b", "nvml_index": 1},
        {"rank": 2, "uuid": "GPU-elsewhere", "nvml_index": None},
        {"rank": 3, "uuid": "GPU-b", "nvml_index": 1},
    ]
    assert topo["pairs"] == [{
        "gpus": [1, 3], "ranks": [[1, 3], [0]], "link": "NVLink", "nvlink_links": 2,
        "nvswitch": False, "pcie_common_ancestor": "single switch", "p2p": "NVLink"}]


def test_single_gpu_and_cpu_ranks_have_no_topology() -> None:
    def never(_: list[int]) -> list[GpuLink]:
        raise AssertionError("no pair to read")

    assert topology(None, {}.get, never) is None
    assert topology([], {}.get, never) is None
    assert topology([None, None], {}.get, never) is None  # gloo on the CPU
    assert topology(["GPU-a"], {"GPU-a": 0}.get, never) is None  # one GPU
    # Two ranks on one GPU: listed, no pair.
    both = topology(["GPU-a", "GPU-a"], {"GPU-a": 0}.get, never)
    assert both is not None and both["pairs"] == []
    assert topology_words(both) == "no two ranks on distinct GPUs of this machine"


def test_bus_ids_compare_across_nvml_spellings() -> None:
    assert norm_bus_id("00000000:3B:00.0") == norm_bus_id("0000:3b:00.0") == (0, 0x3B, 0, 0)
    assert norm_bus_id("3B:00.1") == (0, 0x3B, 0, 1)
    assert norm_bus_id("garbage") is None


def test_link_is_nvlink_pcie_or_unknown() -> None:
    assert GpuLink(0, 1, 4, False, "single switch", "NVLink").link == "NVLink"
    assert GpuLink(0, 1, 0, False, "system", "PCIe P2P").link == "PCIe"
    assert GpuLink(0, 1, None, None, None, None).link is None


# --------------------------------------------------------------------------- NVML (fake)


def test_fake_nvml_pairs_of_four_gpus(fake_nvml: Any) -> None:
    from gputui.telemetry.nvml.gpu_links import gpu_links

    fake_nvml.use("topology")
    src = _open()
    try:
        links = gpu_links(src, [0, 1, 2, 3])
    finally:
        src.close()
    assert links == [
        GpuLink(0, 1, 3, False, "single switch", "NVLink"),  # link 3 is down: NV3
        GpuLink(0, 2, 0, False, "host bridge", "PCIe P2P"),
        GpuLink(0, 3, 0, False, "system", "PCIe P2P"),
        GpuLink(1, 2, 0, False, "host bridge", "PCIe P2P"),
        GpuLink(1, 3, 0, False, "system", "PCIe P2P"),
        GpuLink(2, 3, 0, False, "NUMA node", "PCIe P2P"),
    ]


def test_fake_nvml_nvswitch_and_missing_reads(fake_nvml: Any) -> None:
    from gputui.telemetry.nvml.gpu_links import gpu_links

    # An HGX-like pair: every link goes to an NVSwitch (NV# = the fewer active links);
    # no topology rows: the PCIe path is unknown (None), never guessed.
    fake_nvml.use({
        "device_count": 3,
        "gpu.0.nvlink": 1, "gpu.0.nvlink_links": 6,
        "gpu.0.nvlink_remote": "switch,switch,switch,switch,switch,switch",
        "gpu.1.nvlink": 1, "gpu.1.nvlink_links": 6, "gpu.1.nvlink_down_mask": 0x3,
        "gpu.1.nvlink_remote": "switch,switch,switch,switch,switch,switch",
        "gpu.2.p2p": 0,
    })
    src = _open()
    try:
        links = gpu_links(src, [0, 1, 2])
    finally:
        src.close()
    assert links == [
        GpuLink(0, 1, 4, True, None, "NVLink"),
        GpuLink(0, 2, 0, False, None, "through host memory"),
        GpuLink(1, 2, 0, False, None, "through host memory"),
    ]


def test_runner_side_read_maps_uuids_in_cuda_order(fake_nvml: Any) -> None:
    fake_nvml.use("topology")
    src = _open()
    try:
        # CUDA_VISIBLE_DEVICES=3,0: rank 0 runs on NVML GPU 3, rank 1 on GPU 0.
        topo = read_topology(src, [U[3], U[0]])
    finally:
        src.close()
    assert topo is not None
    assert [(g["rank"], g["nvml_index"]) for g in topo["gpus"]] == [(0, 3), (1, 0)]
    assert topo["pairs"] == [{
        "gpus": [0, 3], "ranks": [[1], [0]], "link": "PCIe", "nvlink_links": 0,
        "nvswitch": False, "pcie_common_ancestor": "system", "p2p": "PCIe P2P"}]
    assert read_topology(None, [U[0], U[1]]) is None  # no NVML: no topology
    assert read_topology(src, None) is None  # a run without rank UUIDs


def test_topology_in_the_summary_and_the_saved_json(fake_nvml: Any) -> None:
    fake_nvml.use("topology")
    src = _open()
    try:
        topo = read_topology(src, [U[0], U[1], U[2]])
    finally:
        src.close()
    result = Result(id="x", benchmark="cnn-train", config=RunConfig(topology=topo))
    again = Result.from_dict(json.loads(json.dumps(result.to_dict())))
    assert again.config.topology == topo
    assert dict(config_words(again.config))["GPU topology"] == (
        "GPU 0–1: NVLink ×3, PCIe single switch (PIX), P2P over NVLink; "
        "GPU 0–2: PCIe host bridge (PHB), P2P over PCIe; "
        "GPU 1–2: PCIe host bridge (PHB), P2P over PCIe")
    # A CPU or single-GPU run: null, and no line.
    assert "GPU topology" not in dict(config_words(RunConfig(topology=None)))
