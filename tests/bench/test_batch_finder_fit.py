"""batch-finder: device-resident probes, device vs host out-of-memory, a
stated headroom."""

from __future__ import annotations

import torch

from gputui.bench.worker.kinds.batch_finder import oom_kind, recommended

from .worker_helpers import check_ok, run_worker


def test_device_and_host_out_of_memory_are_told_apart() -> None:
    assert oom_kind(torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate")) \
        == "device"
    assert oom_kind(MemoryError()) == "host"
    assert oom_kind(RuntimeError("[enforce fail at alloc_cpu.cpp:116] . DefaultCPUAllocator: "
                                 "can't allocate memory: you tried to allocate 4 GB")) == "host"
    assert oom_kind(RuntimeError("CUDA error: out of memory")) == "device"
    assert oom_kind(RuntimeError("shape mismatch")) is None


def test_recommended_batch_leaves_the_headroom() -> None:
    fitted = {2: 100, 4: 180, 8: 350, 16: 700}
    assert recommended(fitted, 400) == 8
    assert recommended(fitted, 1000) == 16
    assert recommended(fitted, 50) is None
    assert recommended(fitted, None) == 16


def test_batch_finder_probes_with_device_data_and_states_headroom() -> None:
    doc = check_ok(run_worker({"benchmark": "batch-finder", "device": "cpu",
                               "model": "resnet18", "image_size": 32, "batch_size": 4,
                               "steps": 2, "warmup": 0, "threads": 1}))
    s = doc["settings"]
    assert s["data"] == "device" and s["input_batches"] == 1
    assert s["headroom_frac"] == 0.1 and "≤ 90%" in s["headroom"]
    ex = doc["extra"]
    assert ex["max_batch_fit"] == 4
    # The CPU budget is half the RAM: a tiny resnet18 fits with room to spare.
    assert ex["recommended_batch"] == 4 and ex["host_oom"] is None
