"""The performance stage for real: probes in the benchmark worker on the CPU with tiny
sizes, against the fake NVML. A probe that crashes or hangs fails its checks with the
reason and the doctor goes on."""

from __future__ import annotations

import threading

import pytest

from gputui.doctor.model import Stage, Status
from gputui.doctor.perf import perf_checks
from gputui.doctor.probes import ProbePlan, probe_gpu
from gputui.doctor.run import Options, StageProgress, run_doctor
from tests.fakenvml.harness import FakeNvml

pytestmark = pytest.mark.torch

TINY = {"matmul": {"size": 64}, "membw": {"array_bytes": 1 << 20}}


def cpu_plan(**kw: object) -> ProbePlan:
    base: dict[str, object] = dict(device="cpu", duration_s=None, steps=2, warmup=1,
                                   params=TINY, timeout_s=120.0, grace_s=1.0)
    base.update(kw)
    return ProbePlan(**base)  # type: ignore[arg-type]


def test_full_run_probes_each_gpu_and_reads_the_gpu_under_load(fake_nvml: FakeNvml) -> None:
    pytest.importorskip("torch")
    # From second 5 of the scenario: power brake + SW power cap, 86 °C of 90.
    fake_nvml.use({"device_count": 1, "gpu.0.pcie_gen": 3, "gpu.0.pcie_gen_max": 4,
                   "gpu.0.throttle_from_s": 5, "gpu.0.during.throttle_reasons": 0x84,
                   "gpu.0.during.temp_c": 86})
    stages: list[Stage] = []

    def on_stage(p: StageProgress) -> None:
        if p.stage is Stage.PERFORMANCE and Stage.PERFORMANCE not in stages:
            fake_nvml.set_time(5.0)  # the probes start: the load's effects show
        stages.append(p.stage)

    report = run_doctor(Options(quick=False, probes=cpu_plan()), on_stage=on_stage)
    by = {(c.gpu, c.id): c for c in report.checks}
    assert by[(0, "throttle_idle")].status is Status.PASS  # read before the load
    # Read while the probes ran, the generation below max now fails.
    gen = by[(0, "pcie_gen")]
    assert gen.status is Status.FAIL and "under load" in (gen.detail or "")
    load = by[(0, "throttle_load")]
    assert load.status is Status.FAIL
    assert load.value == "sw_power_cap, hw_power_brake_slowdown"
    heat = by[(0, "temp_headroom_load")]
    assert (heat.status, heat.value) == (Status.WARN, 4)
    for cid in ("perf_matmul_bf16", "perf_membw"):
        c = by[(0, cid)]
        assert c.stage is Stage.PERFORMANCE and c.status is Status.PASS
        assert isinstance(c.value, float) and c.value > 0
    assert by[(0, "perf_matmul_bf16")].unit == "TFLOP/s"
    # The throttling seen while the probe ran is shown with it.
    assert ("throttled while it ran: HW power brake slowdown, SW power cap"
            in (by[(0, "perf_matmul_bf16")].detail or ""))
    assert by[(0, "perf_membw")].unit == "GB/s"
    # The CPU has no tf32 or host↔device copies: no such checks rather than made-up ones.
    assert (0, "perf_matmul_tf32") not in by and (0, "perf_h2d") not in by
    assert report.exit_code(False) == 1


def test_a_crashing_probe_fails_its_checks_and_the_next_probe_runs(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GPUTUI_BENCH_TEST_HOOKS", "1")
    figures = probe_gpu(0, "GPU-x", cpu_plan(test_hook="crash"), threading.Event())
    assert [f.probe for f in figures] == ["matmul_bf16", "membw"]  # both benchmarks ran
    checks = perf_checks(figures)
    assert [c.status for c in checks] == [Status.FAIL, Status.FAIL]
    assert "simulated crash" in (checks[0].detail or "")


def test_a_hung_probe_is_stopped_at_its_timeout_and_fails(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GPUTUI_BENCH_TEST_HOOKS", "1")
    plan = cpu_plan(test_hook="hang", timeout_s=8.0, benchmarks=("matmul",))
    (fig,) = probe_gpu(0, "GPU-x", plan, threading.Event())
    assert fig.value is None and "(timeout)" in (fig.error or "")


def test_interconnect_probes_refuse_a_cpu_cleanly_and_fail_their_checks() -> None:
    from gputui.doctor.probes import probe_interconnect

    figures = probe_interconnect([(0, "GPU-a"), (1, "GPU-b")], cpu_plan(), threading.Event(),
                                 lambda a, b: "PCIe P2P")
    checks = perf_checks(figures)
    assert [(c.id, c.status) for c in checks] == [
        ("perf_p2p_0_1", Status.FAIL), ("perf_p2p_1_0", Status.FAIL),
        ("perf_allreduce", Status.FAIL)]
    assert "p2p needs two or more CUDA GPUs (this run sees 0) (invalid)" in checks[0].detail
    assert "over PCIe P2P" in checks[0].detail
    assert "allreduce needs two or more CUDA GPUs" in checks[2].detail
