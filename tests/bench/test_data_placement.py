"""Where synthetic batches live, and a training step free of host syncs.
CPU here; the CUDA paths (side-stream copies, fused GradScaler) run on a GPU
when one is present."""

from __future__ import annotations

import pytest
import torch

from gputui.bench import run_spec
from gputui.bench.request import RunRequest
from gputui.bench.worker.workloads import (
    DEVICE_POOL,
    HOST_POOL,
    DeviceFeed,
    HostFeed,
    TrainStep,
    make_workload,
    sync_note,
)
from gputui.errors import UsageError

from .worker_helpers import TINY_CNN, check_ok, run_worker

CPU = torch.device("cpu")
HAS_CUDA = torch.cuda.is_available()


def spec(**kw: object) -> RunRequest:
    base = {"benchmark": "cnn-train", "device": "cpu", "image_size": 32, "batch_size": 2}
    return RunRequest.from_dict({**base, **kw}).resolved("cpu")


def test_device_data_is_made_where_the_model_runs_in_its_dtype() -> None:
    wl = make_workload(spec(precision="bf16"), CPU, 2)
    assert isinstance(wl.feed, DeviceFeed) and len(wl.batches) == DEVICE_POOL
    x, y = wl.feed(0)
    assert x.device == CPU and x.dtype == torch.bfloat16  # no fp32 copy for autocast to halve
    assert y.dtype == torch.int64
    assert wl.settings["data"] == "device" and wl.settings["input_dtype"] == "bfloat16"
    assert wl.settings["h2d_copy"].startswith("none")
    fp32 = make_workload(spec(), CPU, 2)
    assert fp32.feed is not None and fp32.feed(1)[0].dtype == torch.float32


def test_host_data_goes_through_the_host_feed() -> None:
    wl = make_workload(spec(data="host"), CPU, 2)
    assert isinstance(wl.feed, HostFeed) and len(wl.batches) == HOST_POOL
    assert wl.settings["data"] == "host"
    # Every step gets the next pool batch, in order, as the timed loop asks for them.
    for i in range(2 * HOST_POOL):
        assert wl.feed(i)[0] is wl.batches[i % HOST_POOL][0]


def test_data_setting_is_validated() -> None:
    assert run_spec.validate_spec({"benchmark": "cnn-train"})["data"] == "device"
    with pytest.raises(UsageError, match="bad data placement"):
        run_spec.validate_spec({"benchmark": "cnn-train", "data": "disk"})
    with pytest.raises(UsageError, match="--data host applies"):
        run_spec.validate_spec({"benchmark": "matmul", "data": "host"})


@pytest.mark.parametrize("data", ["device", "host"])
def test_worker_records_and_honours_data(data: str) -> None:
    run = run_worker({"benchmark": "cnn-train", **TINY_CNN, "data": data,
                      "precision": "bf16"})
    doc = check_ok(run)
    s = doc["settings"]
    assert s["data"] == data
    assert s["input_dtype"] == "bfloat16"
    assert s["input_batches"] == (HOST_POOL if data == "host" else DEVICE_POOL)
    assert s["optimizer"].startswith("SGD(")
    assert doc["steps"] == 3


def test_fused_optimizer_keeps_grad_scaler_on_the_device() -> None:
    # GradScaler.step syncs (found_inf.item()) unless the optimizer takes the inf check
    # itself; the fused SGD does, so an fp16 step never waits for the host.
    wl = make_workload(spec(), CPU, 2)
    step = TrainStep(wl, CPU, "fp32")
    assert getattr(step.opt, "_step_supports_amp_scaling", False)
    assert "fused=True" in step.settings["optimizer"]
    assert "sync" not in step.settings
    foreach = torch.optim.SGD(wl.model.parameters(), lr=0.1)
    scaler = torch.amp.GradScaler("cpu")
    note = sync_note(foreach, scaler)
    assert note is not None and ".item()" in note
    assert sync_note(step.opt, scaler) is None
    assert sync_note(foreach, None) is None


@pytest.mark.skipif(not HAS_CUDA, reason="needs a CUDA GPU")
@pytest.mark.parametrize(("data", "precision"), [("device", "fp16"), ("host", "fp16"),
                                                 ("host", "bf16")])
def test_cuda_train_steps_never_sync_the_host(data: str, precision: str) -> None:
    dev = torch.device("cuda", 0)
    s = RunRequest.from_dict(
        {"benchmark": "cnn-train", "device": "cuda", "image_size": 32, "batch_size": 8,
         "data": data, "precision": precision}).resolved("cuda")
    wl = make_workload(s, dev, 8)
    step = TrainStep(wl, dev, precision)
    step(0)  # the first step creates cuBLAS/cuDNN handles and the scaler's state
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        for i in range(1, 6):
            step(i)  # a .item() or a pageable copy here raises
    finally:
        torch.cuda.set_sync_debug_mode("default")
    torch.cuda.synchronize()
    if data == "host":
        assert all(x.is_pinned() for x, _ in wl.batches)
        assert isinstance(wl.feed, HostFeed) and wl.feed.stream is not None
