"""The measuring pieces in-process: timed loop, energy, % of peak, precision, memory.

No thresholds on durations: steps, samples and counts are exact; times are only ordered.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pytest
import torch

from gputui.bench import events, peaks, run_spec
from gputui.bench import stats as stats_mod
from gputui.bench.request import RunRequest
from gputui.bench.result import ResultBuilder
from gputui.bench.stats import percentile
from gputui.bench.worker import measure
from gputui.bench.worker.cancel import CancelFlag
from gputui.bench.worker.context import Ctx
from gputui.bench.worker.energy import MIN_ENERGY_WINDOW_S, EnergyMeter, EnergyReading
from gputui.bench.worker.memory import PeakRss
from gputui.bench.worker.timing import latency_loop, timed_loop
from gputui.bench.worker.workloads import configure_precision, make_workload, synthetic_images
from gputui.errors import UsageError

CPU = torch.device("cpu")


def make_ctx(spec: dict[str, Any], device: torch.device = CPU,
             env: dict[str, Any] | None = None) -> tuple[Ctx, list[events.Event]]:
    emitted: list[events.Event] = []
    full = RunRequest.from_dict({"device": device.type, **spec}).resolved(device.type)
    ctx = Ctx(request=full, device=device, env=env or {}, emit=emitted.append,
              cancel=CancelFlag())
    return ctx, emitted


# --------------------------------------------------------------------------- timing


def test_timed_loop_counts_steps_and_samples_exactly() -> None:
    calls: list[int] = []

    def step(i: int) -> None:
        calls.append(i)
        time.sleep(0.002)

    progress: list[events.Progress] = []
    stats = timed_loop(step, device=CPU, samples_per_step=3, steps=7, duration_s=None,
                       unit="x/s", emit=progress.append, make_progress=events.Progress,
                       window_target_s=0.005)
    assert calls == list(range(7))
    assert stats.steps == 7 and stats.samples == 21
    assert len(stats.step_ms) == 7 and all(ms > 0 for ms in stats.step_ms)
    assert sum(p.samples for p in progress) == 21
    assert progress[-1].total_samples == 21  # the loop's total so far
    assert progress[-1].step == 7 and len(progress) == len(stats.window_rates)
    # The step times tile the timed loop: their sum cannot exceed its wall time.
    assert sum(stats.step_ms) <= stats.wall_s * 1000.0
    tp = measure.loop_throughput(stats, "x/s")
    assert tp.value == 21 / stats.wall_s  # total samples ÷ timed-loop wall time
    assert tp.mean == tp.value and tp.windows == len(stats.window_rates)
    assert tp.p10 <= tp.median <= tp.p90
    s = stats_mod.spread(stats.step_ms)
    assert s is not None and s.n == 7 and s.few  # 7 values: marked as too few
    assert s.p50 <= s.p90 <= s.p99 <= max(stats.step_ms)
    assert s.to_dict(with_median=True)["median"] == s.p50


def test_warmup_is_excluded_from_counts() -> None:
    ctx, emitted = make_ctx({"benchmark": "cnn-train", "steps": 5, "warmup": 3})
    calls: list[int] = []

    def step(i: int) -> None:
        calls.append(i)
        time.sleep(0.001)

    measure.do_warmup(ctx, step, ctx.request.warmup)
    stats = measure.measure(ctx, step, 4, "images/s")
    assert calls == [0, 1, 2, 0, 1, 2, 3, 4]  # 3 warm-up calls, then 5 timed
    assert stats.steps == 5 and stats.samples == 20 and len(stats.step_ms) == 5
    kinds = [e.kind for e in emitted]
    assert kinds[:3] == ["warmup"] * 3 and "warmup" not in kinds[3:]
    assert sum(e.samples for e in emitted if isinstance(e, events.Progress)) == 20
    res = ResultBuilder(id="x", benchmark="cnn-train")
    measure.fill_loop(res, stats, "images/s")
    assert res.steps == 5 and res.samples == 20 and res.status == "ok"


def test_duration_bound_and_latency_loop() -> None:
    stats = timed_loop(lambda i: time.sleep(0.001), device=CPU, samples_per_step=2,
                       steps=None, duration_s=0.02, unit="x/s")
    assert stats.steps >= 1 and stats.samples == 2 * stats.steps
    assert len(stats.step_ms) == stats.steps
    lat = latency_loop(lambda i: time.sleep(0.001), device=CPU, steps=6, duration_s=None,
                       emit=None, make_progress=None, unit="x/s")
    assert len(lat.step_ms) == 6 and not lat.stopped_early
    assert sum(lat.step_ms) <= lat.wall_s * 1000.0 and lat.samples == 6


def test_percentile_arithmetic() -> None:
    assert percentile([], 50) is None
    assert percentile([5.0], 99) == 5.0
    assert percentile([4.0, 1.0, 3.0, 2.0], 50) == 2.5
    assert percentile([1.0, 2.0, 3.0, 4.0, 5.0], 90) == pytest.approx(4.6)
    assert percentile([1.0, 2.0, 3.0, 4.0, 5.0], 0) == 1.0


# --------------------------------------------------------------------------- energy


class FakeLink:
    def __init__(self, readings: list[int | None]) -> None:
        self.readings = list(readings)

    def energy_mj(self) -> int | None:
        return self.readings.pop(0)


class FakeClock:
    def __init__(self, times: list[float]) -> None:
        self.times = list(times)

    def __call__(self) -> float:
        return self.times.pop(0)


def test_energy_meter_mj_to_joules_exactly() -> None:
    meter = EnergyMeter(FakeLink([1_000, 41_000]), clock=FakeClock([10.0, 18.0]))
    meter.start()
    out = meter.stop(samples=200)
    assert out.energy_j_per_sample == 0.2  # 40 J / 200 samples
    assert out.avg_power_w == 5.0  # 40 J / 8 s
    assert out.note is not None
    assert out.note.joules == 40.0 and out.note.window_s == 8.0
    assert out.note.note is None


def test_energy_needs_a_window_of_several_seconds() -> None:
    short = MIN_ENERGY_WINDOW_S / 2
    meter = EnergyMeter(FakeLink([0, 5_000]), clock=FakeClock([0.0, short]))
    meter.start()
    out = meter.stop(samples=100)
    assert out.energy_j_per_sample is None and out.avg_power_w is None
    assert out.note is not None and out.note.note is not None
    assert out.note.joules == 5.0 and "shorter than" in out.note.note
    res = ResultBuilder(id="x", benchmark="cnn-train")
    measure.record_energy(res, out)
    energy = res.extra.energy
    assert res.energy_j_per_sample is None and energy is not None
    assert energy.note is not None and "shorter" in energy.note
    # Counter going backwards (reset, wrap) or unreadable: no figure either.
    for readings in ([5_000, 1_000], [None, 1_000], [0, None]):
        m = EnergyMeter(FakeLink(readings), clock=FakeClock([0.0, 10.0]))
        m.start()
        assert m.stop(10).energy_j_per_sample is None
    # No NVML (CPU): nothing, and no extra.energy.
    off = EnergyMeter(None)
    off.start()
    assert off.stop(10) == EnergyReading(energy_j_per_sample=None, avg_power_w=None, note=None)


# --------------------------------------------------------------------------- peaks


@pytest.mark.parametrize(("name", "key"), [
    ("NVIDIA A10", "A10"),
    ("NVIDIA A10G", "A10G"),
    ("NVIDIA A30", "A30"),
    ("NVIDIA A100-SXM4-80GB", "A100 SXM4 80GB"),
    ("NVIDIA A100-PCIE-40GB", "A100 PCIe 40GB"),
    ("Tesla T4", "T4"),
    ("Tesla V100-SXM2-16GB", "V100 SXM2"),
    ("NVIDIA L4", "L4"),
    ("NVIDIA L40S", "L40S"),
    ("NVIDIA GeForce RTX 4090", "RTX 4090"),
    ("NVIDIA RTX A6000", "RTX A6000"),
    ("NVIDIA RTX A1000", None),
    ("NVIDIA RTX A1000 6GB Laptop GPU", None),
    ("NVIDIA RTX A3000 Laptop GPU", None),
    ("NVIDIA RTX A3000 12GB", None),
    ("NVIDIA GeForce RTX 4090 Laptop GPU", None),
    ("NVIDIA A100X", None),
    ("AMD EPYC 7B13", None),
])
def test_known_peak_matches_whole_model_names(name: str, key: str | None) -> None:
    row = peaks.match(name).row
    assert (row.name if row else None) == key


def test_pct_of_peak_and_peak_sources() -> None:
    assert peaks.pct_of_peak(50.0, 200.0) == 25.0
    assert peaks.pct_of_peak(None, 200.0) is None
    assert peaks.pct_of_peak(50.0, None) is None
    assert peaks.pct_of_peak(50.0, 0.0) is None
    cuda = torch.device("cuda", 0)  # a device object only: nothing runs on it
    ctx, _ = make_ctx({"benchmark": "matmul"}, env={"device_name": "NVIDIA A30"})
    ctx.device = cuda
    row, source = measure.peak_row(ctx)
    assert source == "table" and row is not None and row.tflops("fp16") == 165.0
    assert peaks.pct_of_peak(82.5, row.tflops("fp16")) == 50.0
    ctx.env = {"device_name": "NVIDIA Mystery", "compute_capability": "8.0", "sm_count": 108,
               "nvml": {"clock_sm_max_mhz": 1410}}
    row, source = measure.peak_row(ctx)
    assert source == "estimated" and row is not None and round(row.tflops("fp16")) == 312
    assert row.mem_bw_gbps is None  # bandwidth is never estimated
    cpu_ctx, _ = make_ctx({"benchmark": "matmul"})
    assert measure.peak_row(cpu_ctx) == (None, None)


# --------------------------------------------------------------------------- precision


@pytest.fixture
def restore_backend_flags() -> Iterator[None]:
    saved = (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32,
             torch.backends.cudnn.benchmark)
    yield
    (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32,
     torch.backends.cudnn.benchmark) = saved


@pytest.mark.usefixtures("restore_backend_flags")
def test_configure_precision_tf32_switches() -> None:
    cuda = torch.device("cuda", 0)  # only backend flags are set: no GPU needed
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True  # cuDNN's own default
    s = configure_precision(cuda, "fp32")
    assert torch.backends.cuda.matmul.allow_tf32 is False
    assert torch.backends.cudnn.allow_tf32 is False
    assert s["tf32_matmul"] is False and s["tf32_cudnn"] is False
    assert s["cudnn_benchmark"] is True and s["amp_dtype"] is None
    s = configure_precision(cuda, "tf32")
    assert torch.backends.cuda.matmul.allow_tf32 is True
    assert torch.backends.cudnn.allow_tf32 is True
    assert s["tf32_matmul"] is True and s["tf32_cudnn"] is True
    s = configure_precision(cuda, "fp16")
    assert s["amp_dtype"] == "float16" and s["grad_scaler"] is True
    assert s["tf32_matmul"] is False
    s = configure_precision(CPU, "bf16")
    assert s["amp_dtype"] == "bfloat16" and s["grad_scaler"] is False


# --------------------------------------------------------------------------- memory format


def test_channels_last_tensors_really_are_channels_last() -> None:
    spec = RunRequest.from_dict(
        {"benchmark": "cnn-train", "device": "cpu", "image_size": 32, "batch_size": 2,
         "channels_last": True}).resolved("cpu")
    wl = make_workload(spec, CPU, 2)
    cl = torch.channels_last
    for x, _ in wl.batches:
        assert x.is_contiguous(memory_format=cl) and not x.is_contiguous()
    assert wl.model.conv1.weight.is_contiguous(memory_format=cl)
    gen = torch.Generator().manual_seed(0)
    x = synthetic_images(3, 16, CPU, gen, channels_last=True)
    assert x.shape == (3, 3, 16, 16) and x.is_contiguous(memory_format=cl)
    assert not x.is_contiguous()
    assert synthetic_images(3, 16, CPU, gen, channels_last=False).is_contiguous()
    plain = make_workload(replace(spec, channels_last=False), CPU, 2)
    assert plain.batches[0][0].is_contiguous()


# --------------------------------------------------------------------------- host memory


def test_peak_rss_is_per_interval_not_per_process() -> None:
    tracker = PeakRss()
    tracker.reset()
    base = tracker.peak()
    blob = b"\x01" * (256 << 20)  # touched: every page is resident
    big = tracker.peak()
    del blob
    tracker.reset()
    after = tracker.peak()
    assert big - base >= 200 << 20
    # ru_maxrss (process lifetime) would still say `big` here.
    assert after <= big - (150 << 20), (tracker.method, base, big, after)
    assert tracker.method in ("vmhwm", "sampled")


# --------------------------------------------------------------------------- spec rules


def test_latency_mode_is_batch_one() -> None:
    with pytest.raises(UsageError) as exc:
        run_spec.validate_spec({"benchmark": "cnn-infer", "mode": "latency", "batch_size": 4})
    assert str(exc.value) == "latency mode is single-stream: batch size 1"
    ok = run_spec.validate_spec({"benchmark": "rnn-infer", "mode": "latency", "batch_size": 1})
    assert ok["batch_size"] == 1


def test_params_override_defaults_and_are_checked() -> None:
    spec = run_spec.validate_spec({"benchmark": "train-to-accuracy",
                                  "params": {"target_accuracy": 0.5}})
    resolved = run_spec.resolve_spec(spec, "cpu")
    assert resolved["params"]["target_accuracy"] == 0.5
    assert resolved["params"]["classes"] == 4  # the rest keeps its defaults
    for bad in ({"nope": 1}, {"batch_size": 2}, {"classes": "4"}, {"classes": -1}):
        with pytest.raises(UsageError):
            run_spec.validate_spec({"benchmark": "train-to-accuracy", "params": bad})
