"""What a result records: warm-up kept out of time-to-target, the
GPU's clocks over the timed window, and numerics flags only where they apply."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest
import torch

from gputui.bench.clock_window import WindowSampler, summarize
from gputui.bench.worker.energy import EnergyReading, RunMeter
from gputui.bench.worker.workloads import configure_precision

from .worker_helpers import check_ok, run_worker

CPU = torch.device("cpu")


def test_train_to_accuracy_warms_up_on_a_copy() -> None:
    base = {"benchmark": "train-to-accuracy", "device": "cpu", "seed": 3, "steps": 20,
            "batch_size": 16, "threads": 1, "params": {"eval_every": 10}}
    cold = check_ok(run_worker({**base, "warmup": 0}))
    warm_run = run_worker({**base, "warmup": 3})
    warm = check_ok(warm_run)
    assert [e["step"] for e in warm_run.of("warmup")] == [1, 2, 3]
    # The warm-up trained a throwaway copy on its own images: the measured run is the
    # same step for step.
    assert warm["extra"]["curve"] == cold["extra"]["curve"]
    assert warm["steps"] == cold["steps"] == 20
    ex = warm["extra"]
    assert ex["setup_time_s"] > 0
    assert "throwaway copy" in warm["settings"]["warmup"]
    # Time to target (when reached) is training time only.
    assert ex["time_to_target_s"] in (None, ex["train_time_s"])


def test_cpu_runs_record_no_cuda_numerics_flags() -> None:
    s = configure_precision(CPU, "fp32")
    for key in ("tf32_matmul", "tf32_cudnn", "cudnn_benchmark",
                "allow_fp16_reduced_precision_reduction",
                "allow_bf16_reduced_precision_reduction"):
        assert key in s and s[key] is None, key


@pytest.fixture
def restore_flags() -> Iterator[None]:
    mm = torch.backends.cuda.matmul
    saved = (mm.allow_tf32, torch.backends.cudnn.allow_tf32, torch.backends.cudnn.benchmark,
             mm.allow_fp16_reduced_precision_reduction)
    yield
    (mm.allow_tf32, torch.backends.cudnn.allow_tf32, torch.backends.cudnn.benchmark,
     mm.allow_fp16_reduced_precision_reduction) = saved


@pytest.mark.usefixtures("restore_flags")
def test_cuda_runs_record_reduced_precision_reduction() -> None:
    cuda = torch.device("cuda", 0)  # flags only: nothing runs on it
    torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction = False
    s = configure_precision(cuda, "fp16")
    assert s["allow_fp16_reduced_precision_reduction"] is False
    assert s["tf32_cudnn"] is False and s["cudnn_benchmark"] is True
    torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction = True
    assert configure_precision(cuda, "fp16")["allow_fp16_reduced_precision_reduction"] is True


def test_worker_cpu_result_has_null_tf32() -> None:
    doc = check_ok(run_worker({"benchmark": "cnn-infer", "device": "cpu", "model": "resnet18",
                               "image_size": 32, "batch_size": 2, "steps": 2, "warmup": 1,
                               "threads": 1}))
    assert doc["settings"]["tf32_cudnn"] is None and doc["settings"]["tf32_matmul"] is None


READINGS = [
    {"clock_sm_mhz": 1980, "clock_mem_mhz": 2619, "power_w": 500.0, "temp_c": 60,
     "power_limit_w": 700.0, "throttle_mask": 0},
    {"clock_sm_mhz": 1755, "clock_mem_mhz": 2619, "power_w": 700.0, "temp_c": 66,
     "power_limit_w": 700.0, "throttle_mask": 0x4},
    {"clock_sm_mhz": 1620, "clock_mem_mhz": None, "power_w": 690.0, "temp_c": 71,
     "power_limit_w": 700.0, "throttle_mask": 0x4},
]


def test_window_summary_of_scripted_readings() -> None:
    w = summarize(READINGS, 1.5)
    assert w.samples == 3 and w.window_s == 1.5
    assert w.clock_sm_mhz_mean == pytest.approx((1980 + 1755 + 1620) / 3)
    assert w.clock_sm_mhz_min == 1620
    assert w.clock_mem_mhz_mean == 2619  # the missing reading is left out, not a zero
    assert w.power_w_mean == pytest.approx(630.0) and w.power_w_max == 700.0
    assert w.temp_c_max == 71 and w.throttle_mask == 0x4 and w.power_limit_w == 700.0
    empty = summarize([], 0.1)
    assert empty.clock_sm_mhz_mean is None and empty.throttle_mask is None


class Scripted:
    def __init__(self, readings: list[dict[str, Any]]) -> None:
        self.readings = list(readings)
        self.calls = 0
        self.done = threading.Event()

    def clocks_now(self) -> dict[str, Any] | None:
        self.calls += 1
        if self.readings:
            r = self.readings.pop(0)
            if not self.readings:
                self.done.set()
            return r
        return None


def test_sampler_reads_during_the_window_only() -> None:
    src = Scripted(READINGS)
    sampler = WindowSampler(src, every_s=0.01)
    sampler.start()
    assert src.done.wait(5.0)
    win = sampler.stop()
    assert win is not None and win.samples == 3 and win.clock_sm_mhz_min == 1620
    calls = src.calls
    assert WindowSampler(None).stop() is None  # no NVML (CPU): no window
    assert src.calls == calls  # stopped: no more reads


class NoEnergy:
    def start(self) -> None:
        pass

    def stop(self, samples: int) -> EnergyReading:
        return EnergyReading()


def test_run_meter_adds_the_window_to_the_energy_reading() -> None:
    src = Scripted(READINGS[:1])
    meter = RunMeter(NoEnergy(), WindowSampler(src, every_s=10.0))  # type: ignore[arg-type]
    meter.start()
    reading = meter.stop(10)
    # Shorter than one period: one reading at the end stands for the window.
    assert reading.window is not None and reading.window.samples == 1
    assert reading.window.clock_sm_mhz_mean == 1980
    off = RunMeter(NoEnergy(), WindowSampler(None))  # type: ignore[arg-type]
    off.start()
    assert off.stop(10).window is None


def test_worker_link_reads_clocks_of_its_own_gpu_only(fake_nvml) -> None:
    from gputui.bench.worker.energy import NvmlLink
    from gputui.telemetry.nvml import NvmlSource

    fake_nvml.use({"device_count": 2, "gpu.0.clock_sm_mhz": 1755,
                   "gpu.0.clock_mem_mhz": 2619})
    link = NvmlLink(CPU)  # no CUDA UUID here: attach the source by hand, as for GPU 0
    src = NvmlSource(process_every=1_000_000, slow_every=1_000_000,
                     fields={"energy", "clock_mem"})
    src.open()
    link._src, link._index = src, 0
    try:
        before = fake_nvml.count_for("nvmlDeviceGetClockInfo")
        now = link.clocks_now()
        assert now is not None
        assert now["clock_sm_mhz"] == 1755
        assert now["clock_mem_mhz"] == 2619  # was always null: the link skipped it
        assert now["power_limit_w"] is not None
        # SM and memory clock of one device: two calls, not four.
        assert fake_nvml.count_for("nvmlDeviceGetClockInfo") - before == 2
    finally:
        link.close()


def test_a_rocm_build_of_torch_records_its_hip_version(monkeypatch: pytest.MonkeyPatch) -> None:
    from gputui.bench.worker.environment import collect_env

    assert collect_env(CPU, None)["hip_version"] == torch.version.hip  # None on this build
    monkeypatch.setattr(torch.version, "hip", "6.2.41133-dd7f95766", raising=False)
    monkeypatch.setattr(torch.version, "cuda", None)
    env = collect_env(CPU, None)
    assert (env["hip_version"], env["cuda"]) == ("6.2.41133-dd7f95766", None)
