"""Energy per process, per GPU and per job (gputui.telemetry.energy), on the sampler's side:
over the fake NVML (two processes at known SM shares and a known power, a GPU to one
process, a tracked job's J/step against the fake's own energy counter) and over hand-made
readings (a process that starts and one that ends mid-run, no per-process samples, no
energy counter, a stale tick, a GPU's idle draw learned, a reused pid)."""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path

import pytest

from gputui.telemetry.energy import EnergyAccounts, ended_line, shares
from gputui.telemetry.jobs import JobSource
from gputui.telemetry.model import GpuProcess, GpuSample, JobReading
from gputui.telemetry.nvml import ALL_FIELDS, NvmlSource
from gputui.telemetry.sampler import Sampler
from tests.factories import device, gpu
from tests.fakenvml.harness import FakeNvml
from tests.telemetry.job_files import hold_job, job_bytes

POWER_W = 300.0
IDLE_W = 50.0
A, B, SOLO = 4_100_001, 4_100_002, 4_100_003  # fake pids: NVML's, not this host's
STEP_S, BATCH = 0.125, 32


def scenario() -> dict[str, object]:
    return {"device_count": 2,
            "gpu.0.power_mw": POWER_W * 1000, "gpu.1.power_mw": POWER_W * 1000,
            "gpu.0.processes": {A: 2**30, B: 2**30}, "gpu.1.processes": {SOLO: 2**30},
            "gpu.0.process_util": f"{A}:60:10:0:0,{B}:20:5:0:0"}


class Clock:
    """The sampler's monotonic clock and the fake NVML's time, moved together."""

    def __init__(self, fake_nvml: FakeNvml, base: float = 5000.0) -> None:
        self.fake_nvml, self.base, self.t = fake_nvml, base, 0.0

    def __call__(self) -> float:
        return self.base + self.t

    def to(self, t: float) -> None:
        self.t = t
        self.fake_nvml.set_time(t)


def test_shares_by_sm_then_equally_then_exclusive() -> None:
    def procs(*sm: int | None) -> list[GpuProcess]:
        return [GpuProcess(0, i + 1, None, sm_util_pct=v) for i, v in enumerate(sm)]

    assert shares(procs(60, 20)) == ([0.75, 0.25], "sm_share")
    assert shares(procs(60, None)) == ([1.0, 0.0], "sm_share")  # no sample: ran nothing
    assert shares(procs(None, None, None)) == ([1 / 3] * 3, "equal_split")
    assert shares(procs(0, 0)) == ([0.5, 0.5], "equal_split")
    assert shares(procs(None)) == ([1.0], "exclusive")


def test_fake_gpus_two_processes_by_sm_share_and_one_gpu_to_itself(
        fake_nvml: FakeNvml, tmp_path: Path) -> None:
    fake_nvml.use(scenario(), frozen_time=0.0)
    clock = Clock(fake_nvml)
    src = NvmlSource(process_every=1, fields=ALL_FIELDS)
    src.open_system()
    # The tracked job is the process on GPU 1: steps of STEP_S with BATCH samples.
    jobs_dir = tmp_path / "jobs"
    fd = hold_job(jobs_dir, SOLO, job_bytes(SOLO, "solo", []))
    sampler = Sampler(interval=1.0, source=src, clock=clock, idle_w=IDLE_W,
                      jobs=JobSource(str(jobs_dir)), read_timeout_s=10.0)
    snaps = []
    try:
        for t in range(0, 11):
            clock.to(float(t))
            n = round(t / STEP_S)
            steps = [(k, clock.base + k * STEP_S, k * BATCH, 0) for k in range(max(1, n - 100),
                                                                               n + 1)]
            os.pwrite(fd, job_bytes(SOLO, "solo", steps), 0)
            snaps.append(sampler.tick())
    finally:
        sampler.close()
        os.close(fd)
    last = snaps[-1]
    g0, g1 = last.gpu_energy
    # The GPU's own figures: its counter's 10 s at 300 W, the idle part at 50 W.
    assert g0.energy_seen_j == pytest.approx(10 * POWER_W, rel=1e-6)
    assert g0.energy_idle_j == pytest.approx(10 * IDLE_W, rel=1e-6)
    assert g0.idle_power_w == IDLE_W
    procs = {p.pid: p for p in last.processes}
    a, b, solo = procs[A], procs[B], procs[SOLO]
    active = 10 * (POWER_W - IDLE_W)
    # SM 60 % and 20 %: the active energy 3 : 1; the two add up to it exactly, and
    # with the idle part (the GPU's own) to what the GPU used.
    assert a.energy_j == pytest.approx(active * 0.75, rel=1e-6)
    assert b.energy_j == pytest.approx(active * 0.25, rel=1e-6)
    assert (a.energy_j or 0) + (b.energy_j or 0) == pytest.approx(active, rel=1e-9)
    assert (a.energy_j or 0) + (b.energy_j or 0) + (g0.energy_unattributed_j or 0) == \
        pytest.approx(g0.energy_seen_j, rel=1e-9)
    assert a.power_w == pytest.approx((POWER_W - IDLE_W) * 0.75, rel=1e-6)
    assert (a.energy_method, a.energy_estimate) == ("sm_share", True)
    # GPU 1 is the job's alone: every joule, idle included, and not an estimate.
    assert solo.energy_j == pytest.approx(g1.energy_seen_j, rel=1e-9)
    assert solo.power_w == pytest.approx(POWER_W, rel=1e-6)
    assert (solo.energy_method, solo.energy_estimate) == ("exclusive", False)
    assert g1.energy_unattributed_j == 0
    # The job's J/step against the fake's own counter: the counter's joules over the
    # last 5 s, divided by the steps done in them.
    (job,) = last.jobs
    counter_j = (last.gpus[1].energy_j or 0) - (snaps[-6].gpus[1].energy_j or 0)
    assert job.energy_per_step_j == pytest.approx(counter_j / (5 / STEP_S), rel=1e-3)
    assert job.energy_per_step_j == pytest.approx(POWER_W * STEP_S, rel=1e-3)
    assert job.energy_per_sample_j == pytest.approx(POWER_W / (BATCH / STEP_S), rel=1e-3)
    assert job.energy_per_token_j is None  # the job reports no tokens
    assert job.energy_j == pytest.approx(solo.energy_j, rel=1e-9)
    assert job.energy_estimate is False and job.energy_by_gpu == ((1, job.energy_j),)


def test_power_is_integrated_where_the_counter_is_not_read(fake_nvml: FakeNvml) -> None:
    """The monitor's field profile reads no energy counter: power, integrated."""
    fake_nvml.use(scenario(), frozen_time=0.0)
    clock = Clock(fake_nvml)
    src = NvmlSource(process_every=1, fields={"process_util"})
    src.open_system()
    sampler = Sampler(interval=1.0, source=src, clock=clock, read_timeout_s=10.0)
    try:
        for t in range(0, 5):
            clock.to(float(t))
            snap = sampler.tick()
    finally:
        sampler.close()
    g1 = snap.gpu_energy[1]
    assert snap.gpus[1].energy_j is None and g1.energy_seen_j == pytest.approx(4 * POWER_W)
    # No idle figure configured and no tick without a compute process: nothing idle.
    assert g1.idle_power_w is None and g1.energy_idle_j == 0


def proc(gpu_index: int, pid: int, sm: int | None = None, **kw: object) -> GpuProcess:
    return GpuProcess(gpu_index, pid, 2**30, sm_util_pct=sm, **kw)  # type: ignore[arg-type]


def run(acc: EnergyAccounts, ticks: list[tuple[list[GpuSample], list[GpuProcess]]],
        jobs: list[JobReading] | None = None) -> list:
    out = []
    for t, (gpus, procs) in enumerate(ticks):
        out.append(acc.update(gpus, procs, jobs or [], 100.0 + t))
    return out


def test_a_process_that_starts_and_one_that_ends_mid_run() -> None:
    """Counter at 200 W, idle 40 W. 0–3 s: A alone (exclusive); 3–6 s: A and B at equal
    SM; 6–9 s: B alone. Every GPU joule lands somewhere, and the ended process's share
    stays in the GPU's total."""
    acc = EnergyAccounts(idle_w=40.0)

    def g(t: int) -> GpuSample:
        return gpu(0, power_w=200.0, energy_j=1000.0 + 200.0 * t)

    a, b = proc(0, 1, 50), proc(0, 2, 50)
    ticks = ([(g(t), [a]) for t in range(0, 4)] + [(g(t), [a, b]) for t in range(4, 7)]
             + [(g(t), [b]) for t in range(7, 10)])
    out = run(acc, [([gg], ps) for gg, ps in ticks])
    a_end = {p.pid: p for p in out[6].processes}[1]
    assert a_end.energy_j == pytest.approx(3 * 200 + 3 * 160 / 2)  # alone, then shared
    assert (a_end.energy_method, a_end.energy_estimate) == ("sm_share", True)
    (b_end,) = out[-1].processes
    assert b_end.energy_j == pytest.approx(3 * 160 / 2 + 3 * 200)
    assert (b_end.energy_method, b_end.energy_estimate) == ("exclusive", True)
    g_end = out[-1].gpu_energy[0]
    assert g_end.energy_seen_j == pytest.approx(9 * 200)
    assert g_end.energy_unattributed_j == pytest.approx(3 * 40)  # idle while shared
    assert (a_end.energy_j or 0) + (b_end.energy_j or 0) + g_end.energy_unattributed_j == \
        pytest.approx(g_end.energy_seen_j)


def test_no_per_process_samples_split_equally_and_idle_is_learned() -> None:
    """Without an idle figure, the lowest draw seen while no compute process ran is the
    GPU's idle; without per-process samples, the active part is split equally."""
    acc = EnergyAccounts()
    idle = [([gpu(0, power_w=60.0, energy_j=None)], [proc(0, 9, kind="graphics")])] * 2
    busy = [([gpu(0, power_w=240.0, energy_j=None)], [proc(0, 1), proc(0, 2)])] * 3
    out = run(acc, idle + busy)
    g = out[-1].gpu_energy[0]
    assert g.idle_power_w == 60.0
    p1, p2 = out[-1].processes
    assert p1.energy_method == "equal_split" and p1.energy_j == pytest.approx(p2.energy_j)
    # Two busy seconds at 240 W (trapezoid: the first busy second 150 W on average).
    assert (p1.energy_j or 0) * 2 == pytest.approx((150 - 60) + (240 - 60) * 2)
    assert g.energy_seen_j == pytest.approx(60 + 150 + 240 * 2)


def test_a_stale_or_lost_gpu_shares_out_nothing_and_comes_back() -> None:
    acc = EnergyAccounts(idle_w=0.0)
    p = proc(0, 1)
    out = run(acc, [([gpu(0, energy_j=0.0)], [p]), ([gpu(0, energy_j=100.0)], [p]),
                    ([gpu(0, energy_j=100.0, stale=True)], [p]),
                    ([gpu(0, energy_j=None, power_w=None, lost=True)], [p]),
                    ([gpu(0, energy_j=500.0)], [p]), ([gpu(0, energy_j=600.0)], [p])])
    assert [o.processes[0].energy_j for o in out] == [0.0, 100.0, 100.0, 100.0, 100.0, 200.0]
    assert out[-1].gpu_energy[0].energy_seen_j == 200.0  # the lost seconds are nobody's


def test_a_reused_pid_starts_from_zero_and_a_graphics_neighbour_makes_an_estimate() -> None:
    acc = EnergyAccounts(idle_w=0.0)
    old = proc(0, 7, started=1.0)
    new = proc(0, 7, started=2.0)
    xorg = proc(0, 3, kind="graphics")
    out = run(acc, [([gpu(0, energy_j=0.0)], [old]), ([gpu(0, energy_j=50.0)], [old]),
                    ([gpu(0, energy_j=80.0)], [new, xorg])])
    (p, x) = out[-1].processes
    assert p.energy_j == 30.0 and (p.energy_method, p.energy_estimate) == ("exclusive", True)
    assert x.energy_j is None  # graphics processes get no share


def test_a_job_gets_its_process_energy_and_an_end_of_run_line() -> None:
    acc = EnergyAccounts(idle_w=0.0)
    p = proc(0, 42)

    def job(step: int) -> JobReading:
        return JobReading(pid=42, name="gpt2\x1b[2J", gpus=(0,), step=step, samples=step * 8,
                          tokens=step * 8192, samples_per_s=80.0, tokens_per_s=81920.0,
                          step_time_s=0.1, updated=None)

    outs = [acc.update([gpu(0, energy_j=100.0 * t)], [p], [job(10 * t)], 100.0 + t)
            for t in range(8)]
    j = outs[-1].jobs[0]
    assert (j.energy_j, j.power_w) == (700.0, 100.0)
    assert (j.energy_per_step_j, j.energy_per_sample_j) == (pytest.approx(10.0), 1.25)
    assert j.energy_per_token_j == pytest.approx(100.0 / 81920)
    done = acc.update([gpu(0, energy_j=800.0)], [], [], 108.0)
    (ended,) = done.jobs_ended
    assert ended.energy_j == 700.0
    line = ended_line(ended)
    assert line == ("job gpt2\x1b[2J (PID 42) ended at step 70: 700.0J, 10 J/step, "
                    "1.25 J/sample, 1.22 mJ/token (exact)")


def test_a_job_no_gpu_energy_reached_says_so() -> None:
    acc = EnergyAccounts()
    j = JobReading(pid=5, name="cpu-only", gpus=(), step=3, samples=0, tokens=0,
                   samples_per_s=None, tokens_per_s=None, step_time_s=None, updated=None)
    out = acc.update([gpu(0)], [], [j], 1.0)
    assert out.jobs[0].energy_j is None
    (ended,) = acc.update([gpu(0)], [], [], 2.0).jobs_ended
    assert ended_line(ended).endswith("ended at step 3: energy N/A (no GPU process seen)")


def test_a_gpu_replaced_under_the_same_index_starts_again() -> None:
    acc = EnergyAccounts(idle_w=0.0)
    run(acc, [([gpu(0, energy_j=0.0)], [proc(0, 1)]), ([gpu(0, energy_j=10.0)], [proc(0, 1)])])
    other = gpu(0, info=replace(device(0), uuid="GPU-other"), energy_j=5.0)
    out = acc.update([other], [proc(0, 1)], [], 200.0)
    assert out.gpu_energy[0].energy_seen_j == 0.0 and out.processes[0].energy_j == 0.0


def test_fake_gpu_a_process_starting_and_one_ending_mid_run(fake_nvml: FakeNvml) -> None:
    """Over the fake NVML: A alone, then A and B at SM 60 / 20, then B alone. The
    driver's process list changes at seconds 4 and 7 (the scenario reloaded then; its
    energy counter runs on), and each tick's energy since the last goes to the processes
    listed at that tick: A alone for the seconds up to 3, shared for 4 to 6, B alone for
    7 to 10."""
    def phase(procs: dict[int, int], util: str) -> dict[str, object]:
        return {"device_count": 1, "gpu.0.power_mw": POWER_W * 1000,
                "gpu.0.processes": procs, "gpu.0.process_util": util}

    fake_nvml.use(phase({A: 2**30}, f"{A}:60:0:0:0"), frozen_time=0.0)
    clock = Clock(fake_nvml)
    src = NvmlSource(process_every=1, fields=ALL_FIELDS)
    src.open_system()
    sampler = Sampler(interval=1.0, source=src, clock=clock, idle_w=IDLE_W, read_timeout_s=10.0)
    seen: dict[int, float] = {}
    try:
        for t in range(0, 11):
            if t == 4:
                fake_nvml.use(phase({A: 2**30, B: 2**30}, f"{A}:60:0:0:0,{B}:20:0:0:0"),
                              frozen_time=4.0)
            if t == 7:
                fake_nvml.use(phase({B: 2**30}, f"{B}:20:0:0:0"), frozen_time=7.0)
            clock.to(float(t))
            snap = sampler.tick()
            seen.update({p.pid: p.energy_j or 0.0 for p in snap.processes})
    finally:
        sampler.close()
    active = POWER_W - IDLE_W
    assert seen[A] == pytest.approx(3 * POWER_W + 3 * active * 0.75, rel=1e-6)
    assert seen[B] == pytest.approx(3 * active * 0.25 + 4 * POWER_W, rel=1e-6)
    (g,) = snap.gpu_energy
    assert g.energy_seen_j == pytest.approx(10 * POWER_W, rel=1e-6)
    # Every joule somewhere: A's (ended), B's, and the idle part while they shared.
    assert seen[A] + seen[B] + g.energy_unattributed_j == pytest.approx(g.energy_seen_j)
    assert g.energy_unattributed_j == pytest.approx(3 * IDLE_W, rel=1e-6)
