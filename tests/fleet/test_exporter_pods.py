"""Pods and energy on /metrics: dcgm-exporter's pod, namespace and container labels on
the series of a GPU one pod has to itself (and on no other GPU's), a series per GPU
process with its pod, and gputui_job_energy_joules_total per job and GPU; hostile pod
names stay one valid label value each."""

from __future__ import annotations

import time

from prometheus_client.registry import CollectorRegistry

from gputui.fleet.exporter import SnapshotCollector, ThrottleAccounting
from gputui.fleet.exposition import render
from gputui.telemetry.model import GpuProcess, JobReading, Snapshot
from tests.factories import device, gpu, snapshot
from tests.fleet.conftest import parse_page, value


def serve(snap: Snapshot) -> str:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(SnapshotCollector(lambda: snap, ThrottleAccounting(lambda s: "node"),
                                        nvml_error=None, interval=1.0, hostname="node"))
    return render(registry.collect()).decode()


def in_pod(pid: int, gpu_index: int, pod: str, *, container: str = "trainer",
           energy_j: float = 500.0) -> GpuProcess:
    return GpuProcess(gpu_index, pid, 2**30, user="alice", pod=pod, namespace="ml",
                      pod_uid=f"uid-{pod}", container=container, container_id="c" * 64,
                      power_w=120.0, energy_j=energy_j, energy_method="exclusive",
                      energy_estimate=False)


def test_a_gpu_one_pod_has_to_itself_carries_its_labels() -> None:
    procs = (in_pod(1, 0, "llama-0"), in_pod(2, 0, "llama-0"),
             in_pod(3, 1, "a"), in_pod(4, 1, "b"),  # GPU 1: two pods
             GpuProcess(2, 5, 2**20, user="root"))  # GPU 2: a host process
    page = parse_page(serve(snapshot(0, [gpu(0), gpu(1), gpu(2)], processes=procs,
                                     mono=time.monotonic())))
    assert value(page, "DCGM_FI_DEV_POWER_USAGE", gpu="0", pod="llama-0", namespace="ml",
                 container="trainer") == 250.0
    for g in ("1", "2"):
        labels = next(dict(ls) for (n, ls), _v in page.items()
                      if n == "DCGM_FI_DEV_POWER_USAGE" and ("gpu", g) in ls)
        assert "pod" not in labels and "namespace" not in labels
    # Each process: its share and its pod; a host process's pod labels are empty.
    assert value(page, "gputui_process_energy_joules_total", pid="3", pod="a",
                 namespace="ml", container="trainer", gpu="1") == 500.0
    assert value(page, "gputui_process_power_watts", pid="4", pod="b") == 120.0
    assert value(page, "gputui_process_gpu_memory_bytes", pid="5", pod="", user="root") == 2**20


def test_one_pod_in_two_containers_labels_the_pod_without_a_container() -> None:
    procs = (in_pod(1, 0, "p"), in_pod(2, 0, "p", container="sidecar"))
    page = parse_page(serve(snapshot(0, [gpu(0)], processes=procs, mono=time.monotonic())))
    labels = next(dict(ls) for (n, ls), _v in page.items() if n == "DCGM_FI_DEV_GPU_TEMP")
    assert (labels["pod"], labels["namespace"]) == ("p", "ml") and "container" not in labels


def test_job_energy_per_gpu_is_a_counter() -> None:
    job = JobReading(pid=100, name="gpt", gpus=(0, 1), step=10, samples=0, tokens=0,
                     samples_per_s=None, tokens_per_s=None, step_time_s=0.1, updated=None,
                     energy_j=1500.0, energy_by_gpu=((0, 1000.0), (1, 500.0)))
    text = serve(snapshot(0, [gpu(0), gpu(1)], jobs=(job,), mono=time.monotonic()))
    assert "# TYPE gputui_job_energy_joules_total counter" in text
    page = parse_page(text)
    assert value(page, "gputui_job_energy_joules_total", pid="100", job="gpt", gpu="0") == 1000.0
    assert value(page, "gputui_job_energy_joules_total", pid="100", gpu="1") == 500.0


def test_hostile_pod_names_stay_one_label_value() -> None:
    evil = 'x"} 1\nDCGM_FI_DEV_GPU_TEMP{gpu="9"} 999\n\x1b[2J'
    page_text = serve(snapshot(0, [gpu(0)], processes=(in_pod(1, 0, evil),),
                               mono=time.monotonic()))
    page = parse_page(page_text)
    assert value(page, "DCGM_FI_DEV_GPU_TEMP", gpu="0", pod=evil) == 60.0
    assert not any(("gpu", "9") in ls for (_n, ls) in page)


def test_an_amd_gpu_one_pod_has_to_itself_carries_its_labels_under_amds_names() -> None:
    amd = [gpu(i, info=device(i, name="AMD Instinct MI300X", vendor="amd",
                              uuid=f"AMD-{i:016x}"), clock_sm_mhz=2100) for i in (0, 1)]
    procs = (in_pod(1, 0, "vllm-0"), GpuProcess(1, 5, 2**20, user="root"))
    page = parse_page(serve(snapshot(0, amd, processes=procs, mono=time.monotonic())))
    assert value(page, "gpu_package_power", gpu="0", pod="vllm-0", namespace="ml",
                 container="trainer") == 250.0
    assert value(page, "gpu_clock", gpu="0", pod="vllm-0", clock_type="system") \
        == 2100.0
    labels = next(dict(ls) for (n, ls), _v in page.items()
                  if n == "gpu_package_power" and ("gpu", "1") in ls)
    assert "pod" not in labels and "namespace" not in labels
