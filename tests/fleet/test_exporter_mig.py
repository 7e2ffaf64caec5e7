"""MIG in the exporter and the fleet: `gputui export` serves each MIG GPU
instance's framebuffer and profiling ratios with dcgm-exporter's GPU_I_PROFILE / GPU_I_ID
labels beside the GPU's own series, and the fleet reads such pages without mistaking an
instance's figures for its GPU's."""

from __future__ import annotations

import signal
import time

from prometheus_client.registry import CollectorRegistry

from gputui.fleet.exporter import SnapshotCollector, ThrottleAccounting
from gputui.fleet.exposition import render
from gputui.fleet.scrape import parse_metrics
from gputui.telemetry.mig import MigDevice
from gputui.telemetry.model import Snapshot
from tests.factories import gpu, snapshot
from tests.fleet.conftest import ExporterFactory, http_get, parse_page, wait_for

MIB = 1024 * 1024
GPU0 = {"gpu": "0", "UUID": "GPU-aaaaaaaa-0000-0000-0000-0000000000a0",
        "device": "nvidia0", "modelName": "NVIDIA H100 80GB HBM3", "hostname": "node-m",
        "pci_bus_id": "00000000:18:00.0", "DCGM_FI_DRIVER_VERSION": "550.54.15"}


def _mig_value(series: dict, name: str, gi: str) -> float | None:
    hits = [v for (n, ls), v in series.items()
            if n == name and ("GPU_I_ID", gi) in ls]
    assert len(hits) <= 1, (name, gi)
    return hits[0] if hits else None


def _page_with_mig_prof(url: str) -> str:
    def page() -> str | None:
        text = http_get(url)
        return text if 'DCGM_FI_PROF_SM_ACTIVE{' in text and "GPU_I_ID" in text else None

    return wait_for(page, 10, "MIG profiling series on the page")


def test_exporter_serves_mig_instances_with_dcgm_labels(start_exporter: ExporterFactory) -> None:
    exp = start_exporter("mig", hostname="node-m", interval=0.2)
    s = parse_page(_page_with_mig_prof(exp.url))
    # The exact label set of an instance's series: its GPU's, plus profile and GI id.
    (labels,) = [dict(ls) for (n, ls), _ in s.items()
                 if n == "DCGM_FI_DEV_FB_USED" and ("GPU_I_ID", "2") in ls]
    assert labels == {**GPU0, "GPU_I_PROFILE": "3g.40gb", "GPU_I_ID": "2"}
    # mig.conf in DCGM's units: MiB, ratios 0..1.
    assert _mig_value(s, "DCGM_FI_DEV_FB_USED", "2") == 10240
    assert _mig_value(s, "DCGM_FI_DEV_FB_TOTAL", "2") == 42144366592 // MIB
    assert _mig_value(s, "DCGM_FI_DEV_FB_FREE", "2") == (42144366592 - 10 * 1024 * MIB) // MIB
    assert _mig_value(s, "DCGM_FI_PROF_SM_ACTIVE", "2") == 0.875
    assert _mig_value(s, "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "2") == 0.625
    assert _mig_value(s, "DCGM_FI_PROF_GR_ENGINE_ACTIVE", "2") == 0.99
    assert _mig_value(s, "DCGM_FI_PROF_SM_ACTIVE", "3") == 0.125
    assert _mig_value(s, "DCGM_FI_DEV_FB_USED", "3") == 1024
    assert _mig_value(s, "DCGM_FI_DEV_FB_USED", "9") == 0
    # Not available is absent, never 0: no DRAM ratio for GI 3, no GPM at all for GI 9.
    assert _mig_value(s, "DCGM_FI_PROF_DRAM_ACTIVE", "3") is None
    assert _mig_value(s, "DCGM_FI_PROF_SM_ACTIVE", "9") is None
    # GPU-wide fields stay on the GPU's own series only.
    assert not any(n == "DCGM_FI_DEV_GPU_TEMP" and ("GPU_I_ID", "2") in ls for n, ls in s)
    gpu_wide = [v for (n, ls), v in s.items()
                if n == "DCGM_FI_DEV_FB_USED" and set(GPU0.items()) <= set(ls)
                and not any(k == "GPU_I_ID" for k, _ in ls)]
    assert gpu_wide == [10240]  # the whole H100 (the fake's default 10 GiB)
    # The A100 has MIG off: no instance series under it.
    assert not any(("gpu", "1") in ls and any(k == "GPU_I_ID" for k, _ in ls) for _, ls in s)
    assert exp.stop(signal.SIGTERM) == 0


def test_fleet_keeps_the_gpu_figures_of_a_gputui_mig_page(
        start_exporter: ExporterFactory) -> None:
    exp = start_exporter("mig", hostname="node-m", interval=0.2)
    reading = parse_metrics(_page_with_mig_prof(exp.url))
    h100, a100 = reading.gpus
    # The GPU-wide figures (10 GiB of 80 GiB; SM active: the fake's default 30 % for the
    # whole GPU), not the first instance's (10 GiB of 40 GiB, 87.5 %).
    assert (h100.mem_used_bytes, h100.mem_total_bytes) == (10 * 1024 * MIB, 80 * 1024 * MIB)
    assert h100.sm_active_pct == 30.0
    assert a100.mem_total_bytes == 80 * 1024 * MIB
    exp.stop(signal.SIGTERM)


# dcgm-exporter on a MIG GPU: framebuffer series per GPU instance only.
DCGM_MIG_PAGE = """\
# TYPE DCGM_FI_DEV_FB_USED gauge
DCGM_FI_DEV_FB_USED{gpu="0",UUID="GPU-1",pci_bus_id="00000000:18:00.0",device="nvidia0",\
modelName="NVIDIA A100-SXM4-80GB",GPU_I_PROFILE="3g.40gb",GPU_I_ID="1",hostname="dgx1"} 2048
DCGM_FI_DEV_FB_USED{gpu="0",UUID="GPU-1",pci_bus_id="00000000:18:00.0",device="nvidia0",\
modelName="NVIDIA A100-SXM4-80GB",GPU_I_PROFILE="4g.40gb",GPU_I_ID="2",hostname="dgx1"} 1024
# TYPE DCGM_FI_DEV_FB_FREE gauge
DCGM_FI_DEV_FB_FREE{gpu="0",UUID="GPU-1",pci_bus_id="00000000:18:00.0",device="nvidia0",\
modelName="NVIDIA A100-SXM4-80GB",GPU_I_PROFILE="3g.40gb",GPU_I_ID="1",hostname="dgx1"} 38000
DCGM_FI_DEV_FB_FREE{gpu="0",UUID="GPU-1",pci_bus_id="00000000:18:00.0",device="nvidia0",\
modelName="NVIDIA A100-SXM4-80GB",GPU_I_PROFILE="4g.40gb",GPU_I_ID="2",hostname="dgx1"} 39000
# TYPE DCGM_FI_PROF_SM_ACTIVE gauge
DCGM_FI_PROF_SM_ACTIVE{gpu="0",UUID="GPU-1",pci_bus_id="00000000:18:00.0",device="nvidia0",\
modelName="NVIDIA A100-SXM4-80GB",GPU_I_PROFILE="3g.40gb",GPU_I_ID="1",hostname="dgx1"} 0.5
"""


def test_fleet_adds_up_the_instances_of_a_dcgm_exporter_mig_page() -> None:
    (g,) = parse_metrics(DCGM_MIG_PAGE).gpus
    # One GPU, not one per instance; its memory is the instances' together.
    assert (g.gpu, g.model) == ("0", "NVIDIA A100-SXM4-80GB")
    assert g.mem_used_bytes == 3072 * MIB
    assert g.mem_total_bytes == (3072 + 77000) * MIB
    # An instance's activity is not the GPU's.
    assert g.sm_active_pct is None


def _serve(snap: Snapshot) -> str:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(SnapshotCollector(lambda: snap, ThrottleAccounting(lambda s: "node-s"),
                                        nvml_error=None, interval=1.0, hostname="node-s"))
    return render(registry.collect()).decode()


def test_a_stale_gpu_serves_no_mig_instance_either() -> None:
    inst = MigDevice(index=0, uuid="MIG-a", name="x MIG 1g.10gb", profile="1g.10gb",
                     gpu_instance_id=7, compute_instance_id=0, mem_used_bytes=MIB,
                     mem_total_bytes=10 * 1024 * MIB, sm_active_pct=50.0)
    snap = snapshot(0, [gpu(0, stale=True, stale_s=7.5, mig_devices=(inst,)),
                        gpu(1, mig_devices=(inst,))], mono=time.monotonic())
    s = parse_page(_serve(snap))
    # Only GPU 1's instance is current: a stale GPU's instances are left out with it.
    assert {dict(ls)["gpu"] for (n, ls) in s if ("GPU_I_ID", "7") in ls} == {"1"}
    assert _mig_value(s, "DCGM_FI_PROF_SM_ACTIVE", "7") == 0.5
    assert _mig_value(s, "DCGM_FI_DEV_FB_FREE", "7") == 10 * 1024 - 1
