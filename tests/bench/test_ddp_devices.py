"""DDP: ranks on the GPUs --device names, energy summed over ranks, and a
coordinating worker that holds no CUDA context."""

from __future__ import annotations

import os

import pytest
import torch

from gputui.bench.request import RunRequest
from gputui.bench.worker.cancel import CancelFlag
from gputui.bench.worker.context import Ctx
from gputui.bench.worker.distributed import _fill, run_ddp
from gputui.errors import UsageError

from .worker_helpers import TINY_CNN, check_ok, run_worker

HAS_CUDA = torch.cuda.is_available()


def ctx_for(spec: dict, device: torch.device) -> Ctx:
    full = RunRequest.from_dict({"benchmark": "cnn-train", **spec}).resolved(device.type)
    return Ctx(request=full, device=device, env={}, emit=lambda ev: None, cancel=CancelFlag())


PAYLOAD = {"steps": 10, "samples": 400, "wall_s": 4.0, "step_ms": [400.0] * 10,
           "window_rates": [100.0] * 8, "stopped_early": False, "phases_ms": None,
           "peak_memory_bytes": 1, "shapes": {}, "threads": 1, "interop_threads": 1,
           "per_rank_rates": [50.0, 50.0], "per_rank_samples": [200, 200]}


def test_energy_is_summed_over_ranks() -> None:
    ctx = ctx_for({"device": "cpu"}, torch.device("cpu"))
    _fill(ctx, {**PAYLOAD, "per_rank_joules": [1200.0, 1000.0],
                "per_rank_window_s": [4.0, 4.1]}, 2, "nccl", 1, first=2)
    res = ctx.result
    assert res.energy_j_per_sample == pytest.approx(2200.0 / 400)
    assert res.avg_power_w == pytest.approx(2200.0 / 4.1)
    assert res.settings["rank_devices"] == ["cuda:2", "cuda:3"]


def test_no_energy_when_a_rank_could_not_read_it() -> None:
    ctx = ctx_for({"device": "cpu"}, torch.device("cpu"))
    _fill(ctx, {**PAYLOAD, "per_rank_joules": [1200.0, None],
                "per_rank_window_s": [4.0, 4.0]}, 2, "gloo", 1)
    assert ctx.result.energy_j_per_sample is None and ctx.result.avg_power_w is None
    short = ctx_for({"device": "cpu"}, torch.device("cpu"))
    _fill(short, {**PAYLOAD, "per_rank_joules": [10.0, 10.0],
                  "per_rank_window_s": [0.5, 0.5]}, 2, "nccl", 1)
    assert short.result.energy_j_per_sample is None  # too short a window to trust


def test_cpu_ddp_records_rank_devices() -> None:
    doc = check_ok(run_worker({"benchmark": "cnn-train", **TINY_CNN, "nproc": 2,
                               "steps": 2}))
    assert doc["settings"]["rank_devices"] == ["cpu", "cpu"]
    assert doc["energy_j_per_sample"] is None


@pytest.mark.skipif(not HAS_CUDA, reason="needs a CUDA GPU")
def test_ranks_beyond_the_visible_gpus_are_refused() -> None:
    n = torch.cuda.device_count()
    ctx = ctx_for({"device": f"cuda:{n - 1}", "nproc": 2}, torch.device("cuda", n - 1))
    with pytest.raises(UsageError, match=f"from cuda:{n - 1}"):
        run_ddp(ctx)


@pytest.mark.skipif(not HAS_CUDA, reason="needs a CUDA GPU")
def test_ddp_worker_resolves_its_device_without_a_cuda_context() -> None:
    import subprocess
    import sys

    # A fresh interpreter: this one may already hold a context from other tests.
    code = (
        "import os, sys, torch, pynvml\n"
        "from gputui.bench.request import RunRequest\n"
        "from gputui.bench.worker.environment import resolve_device\n"
        "n = int(sys.argv[1])\n"
        "d = resolve_device(RunRequest('cnn-train', device='cuda:0', nproc=n, "
        "precision='bf16'))\n"
        "torch.cuda.get_device_properties(d)\n"
        "pynvml.nvmlInit()\n"
        "h = pynvml.nvmlDeviceGetHandleByIndex(0)\n"
        "pids = [p.pid for p in pynvml.nvmlDeviceGetComputeRunningProcesses(h)]\n"
        "print('HOLDS' if os.getpid() in pids else 'FREE')\n")
    def run(nproc: int) -> str:
        out = subprocess.run([sys.executable, "-c", code, str(nproc)], capture_output=True,
                             text=True, timeout=120, env={**os.environ})
        return out.stdout.strip() + out.stderr[-2000:]

    assert run(2).startswith("FREE")
    assert run(1).startswith("HOLDS")  # the check sees a context where there is one
