"""The configuration that changes the number, recorded once per run (`config`)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest

from gputui.bench.config import GPU_KEYS, TORCH_KEYS
from gputui.bench.request import make_request
from gputui.bench.runner import BenchRun

from .test_cli_bench import TINY, Gputui, needs_torch

FAKE = Path(__file__).with_name("fake_worker.py")
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("GPUTUI_DATA_DIR", str(tmp_path))
    return tmp_path


def test_gpu_config_of_a_cuda_run_is_read_by_the_runner(fake_nvml: Any) -> None:
    fake_nvml.use({
        "device_count": 1, "gpu.0.name": "NVIDIA H100 80GB HBM3",
        "gpu.0.uuid": "GPU-d0c70000-0000-0000-0000-000000000000",
        "gpu.0.pci_bus_id": "00000000:18:00.0",
        "gpu.0.pcie_gen": 4, "gpu.0.pcie_width": 8, "gpu.0.pcie_gen_max": 5,
        "gpu.0.pcie_width_max": 16, "gpu.0.power_limit_mw": 500000,
        "gpu.0.clock_sm_mhz": 1500, "gpu.0.clock_sm_max_mhz": 1980,
        "gpu.0.clock_mem_max_mhz": 2619,
    })
    env = {**os.environ, "FAKE_WORKER_MODE": "cuda_timed", "PYTHONPATH": str(REPO)}
    result = BenchRun(make_request("cnn-train", device="cuda"), env=env,
                      worker_cmd=[sys.executable, str(FAKE)]).run()
    assert result.config.gpu is not None
    gpu = result.config.gpu.to_json()
    assert set(gpu) == set(GPU_KEYS)  # every key, None where the fake has no value
    assert gpu["gpu_index"] == 0
    assert gpu["power_limit_enforced_w"] == 500.0
    # A link trained down (gen 4 x8 in a gen 5 x16 slot) is exactly what to record.
    assert (gpu["pcie_gen"], gpu["pcie_width"]) == (4, 8)
    assert (gpu["pcie_gen_max"], gpu["pcie_width_max"]) == (5, 16)
    # No NVML getter for locked clocks: the max clocks are what a lock is judged against.
    assert (gpu["clock_sm_max_mhz"], gpu["clock_mem_max_mhz"]) == (1980, 2619)
    assert json.loads(json.dumps(result.to_dict()))["config"]["gpu"] == gpu


def test_a_cpu_run_records_every_key_null_where_it_has_none() -> None:
    env = {**os.environ, "FAKE_WORKER_MODE": "ok", "PYTHONPATH": str(REPO)}
    result = BenchRun(make_request("cnn-train", device="cpu"), env=env,
                      worker_cmd=[sys.executable, str(FAKE)]).run()
    assert result.config.gpu is not None
    assert result.config.gpu.to_json() == dict.fromkeys(GPU_KEYS)


@needs_torch
def test_worker_records_torch_switches_and_memory_peaks(gputui: Gputui) -> None:
    proc = gputui("bench", "run", "cnn-train", *TINY, "--steps", "2", "--json")
    assert proc.returncode == 0, proc.stderr
    cfg = json.loads(proc.stdout)["config"]
    assert set(cfg["torch"]) == set(TORCH_KEYS)
    assert set(cfg["gpu"]) == set(GPU_KEYS) and all(v is None for v in cfg["gpu"].values())
    tc = cfg["torch"]
    # On a CPU, cuDNN/cuBLAS switches and CUDA memory peaks do not apply: null, not false.
    for key in ("cudnn_benchmark", "cudnn_deterministic", "tf32_matmul", "tf32_cudnn",
                "allow_fp16_reduced_precision_reduction", "max_memory_reserved_bytes",
                "max_memory_allocated_bytes", "nccl_version", "distributed_backend"):
        assert tc[key] is None, key
    assert tc["deterministic_algorithms"] is False
    assert tc["float32_matmul_precision"] == "highest"
