"""Training jobs on fake-NVML GPUs that throttle from second N, on a fake clock.

Three fake job processes (tests/telemetry/fake_job.py --driven, reported with
gputui.track) share one fake clock with a 3-GPU fake-NVML scenario and the sampler:

    GPU 0 throttles (HW thermal slowdown) from second N to M; job A runs on it and its
    steps take 2.5× as long over the same seconds;
    GPU 1 throttles over the same seconds; job B runs on it and keeps its pace;
    GPU 2 stays calm; job C runs on it and slows over the same seconds anyway.

The test moves the clock half a second at a time: the jobs report the steps that end by
then, the fake NVML reads that second of the scenario, and the sampler ticks. Expected:
one job_slowdown, for job A on GPU 0, ended after the throttle with the samples it cost;
nothing for GPU 1 or job B; job C only marked slowed. The rates reach `snapshot --json`,
the exporter and the TUI's Jobs box.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from gputui.fleet.exporter import job_metrics
from gputui.telemetry.frame import Frame
from gputui.telemetry.job_alerts import SLOWED_WORDS
from gputui.telemetry.nvml import NvmlSource
from gputui.telemetry.sampler import Sampler
from gputui.ui.app import GputuiApp
from gputui.ui.options import AppOptions
from gputui.ui.widgets.jobs_box import JobsBox
from tests.fakenvml.harness import write_scenario
from tests.ui.helpers import screen_text

ROOT = Path(__file__).resolve().parents[2]
FAKE_JOB = Path(__file__).with_name("fake_job.py")
THROTTLE_FROM_S = 7.0  # the jobs need ~5 s of history before a slowdown can be judged
THROTTLE_UNTIL_S = 12.0
END_S = 17.5  # the rates' 5 s window has left the slow seconds behind by then
TICK_S = 0.5
# Binary fractions: the steps' times add up exactly, so the rates come out exact.
STEP_S, SLOW_STEP_S, BATCH = 0.125, 0.3125, 32


def scenario(pids: dict[str, int]) -> dict[str, object]:
    s: dict[str, object] = {"device_count": 3}
    for i, job in enumerate("ABC"):
        s.update({f"gpu.{i}.name": "NVIDIA A100-SXM4-80GB",
                  f"gpu.{i}.uuid": f"GPU-{i}{i}{i}{i}{i}{i}{i}{i}-0000-0000-0000-000000000000",
                  f"gpu.{i}.pci_bus_id": f"00000000:{0x3B + i:02X}:00.0",
                  f"gpu.{i}.clock_sm_mhz": 1410, f"gpu.{i}.clock_sm_max_mhz": 1410,
                  f"gpu.{i}.temp_c": 70, f"gpu.{i}.temp_slowdown_c": 90,
                  f"gpu.{i}.throttle_reasons": 0,
                  f"gpu.{i}.processes": {pids[job]: 8 * 2**30}})
    for i in (0, 1):
        s.update({f"gpu.{i}.throttle_from_s": THROTTLE_FROM_S,
                  f"gpu.{i}.throttle_until_s": THROTTLE_UNTIL_S,
                  f"gpu.{i}.during.throttle_reasons": 0x40,
                  f"gpu.{i}.during.clock_sm_mhz": 945, f"gpu.{i}.during.temp_c": 91})
    return s


@pytest.fixture
def jobs(runtime: Path) -> Iterator[dict[str, subprocess.Popen[str]]]:
    env = dict(os.environ, XDG_RUNTIME_DIR=str(runtime), PYTHONPATH=str(ROOT))
    slow = ["--slow-step-s", str(SLOW_STEP_S), "--slow-from", str(THROTTLE_FROM_S),
            "--slow-until", str(THROTTLE_UNTIL_S)]
    args = {"A": slow, "B": [], "C": slow}
    procs = {name: subprocess.Popen(
        [sys.executable, str(FAKE_JOB), "--name", f"job-{name}", "--step-s", str(STEP_S),
         "--samples", str(BATCH), "--tokens", str(BATCH * 128), "--driven", *extra],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
        for name, extra in args.items()}
    try:
        yield procs
    finally:
        for p in procs.values():
            p.kill()
            p.wait()


class FakeClock:
    """The one clock of the jobs, the fake NVML and the sampler: `base` (whole seconds of
    time.monotonic(), so that adding binary fractions to it is exact) plus `t` seconds of
    the scenario."""

    def __init__(self, procs: dict[str, subprocess.Popen[str]], fake_nvml: object) -> None:
        self.base = float(math.floor(time.monotonic()))
        self.t = 0.0
        self.procs = procs
        self.fake_nvml = fake_nvml
        for p in procs.values():
            assert p.stdin is not None
            p.stdin.write(f"{self.base!r}\n")
            p.stdin.flush()

    def __call__(self) -> float:
        return self.base + self.t

    def advance_to(self, t: float) -> None:
        """Second `t` of the scenario: the jobs have reported the steps that end by
        then, and the fake NVML reads that second."""
        self.t = t
        for p in self.procs.values():
            assert p.stdin is not None
            p.stdin.write(f"{t!r}\n")
            p.stdin.flush()
        for p in self.procs.values():
            assert p.stdout is not None and p.stdout.readline().strip() == f"at {t!r}"
        self.fake_nvml.set_time(t)  # type: ignore[attr-defined]


async def test_a_throttle_that_slows_a_job_is_charged_to_its_gpu(
        fake_nvml: object, fake_nvml_lib: object, jobs: dict[str, subprocess.Popen[str]],
        runtime: Path, tmp_path: Path) -> None:
    pids = {name: p.pid for name, p in jobs.items()}
    path = write_scenario(tmp_path / "jobs.conf", scenario(pids))
    fake_nvml.use(path, frozen_time=0.0)  # type: ignore[attr-defined]
    clock = FakeClock(jobs, fake_nvml)
    src = NvmlSource(process_every=1)
    src.open_system()
    # Ticks are driven by hand: a generous read deadline keeps a loaded machine from
    # marking a GPU stale.
    sampler = Sampler(interval=TICK_S, nvml=src, alerts=True, clock=clock, read_timeout_s=10.0)
    frames: list[Frame] = []
    sampler.subscribe_frames(frames.append)
    try:
        for k in range(round(END_S / TICK_S) + 1):
            clock.advance_to(k * TICK_S)
            sampler.tick()

        raised = [a for f in frames for a in f.raised if a.kind == "job_slowdown"]
        (alert,) = raised
        assert alert.gpu_index == 0 and alert.values is not None
        assert alert.values["pid"] == pids["A"] and alert.values["gpu"] == 0
        assert alert.values["throughput_change_pct"] <= -15  # type: ignore[operator]
        assert alert.values["reasons"] == ("hw_thermal_slowdown",)
        # The GPU's own throttle alert is there beside it, for both throttled GPUs.
        throttles = {a.gpu_index for f in frames for a in f.raised if a.kind == "throttle"}
        assert throttles == {0, 1}
        # Recovered once the throttle was over: ended, with what it cost.
        (ended,) = frames[-1].job_slowdowns
        assert not ended.active and ended.values is not None
        assert ended.values["duration_s"] > 0  # type: ignore[operator]
        # An estimate from the slowdown's detection to its recovery: some, and no more
        # than the slow steps cost (each second of them: 1/STEP_S - 1/SLOW_STEP_S steps).
        slow_cost = (THROTTLE_UNTIL_S - THROTTLE_FROM_S) * (1 / STEP_S - 1 / SLOW_STEP_S)
        assert 0 < ended.values["samples_lost"] <= slow_cost * BATCH  # type: ignore[operator]
        # Job C slowed on a calm GPU: marked slowed while it lasted, and nothing sent.
        states_c = [s for f in frames for s in f.jobs if s.pid == pids["C"]]
        assert any(s.status == "slowed" and s.words == SLOWED_WORDS for s in states_c)
        assert not any(s.status == "slowdown" for f in frames for s in f.jobs
                       if s.pid != pids["A"])

        last = frames[-1].snapshot
        by_pid = {j.pid: j for j in last.jobs}
        assert set(by_pid) == set(pids.values())
        for name, gpu_index in (("A", 0), ("B", 1), ("C", 2)):
            j = by_pid[pids[name]]
            assert j.name == f"job-{name}" and j.gpus == (gpu_index,)
            # Back at its pace (the window is past the slow seconds): a batch a step.
            assert j.samples_per_s == BATCH / STEP_S and j.step_time_s == STEP_S
            assert j.tokens_per_s == pytest.approx((j.samples_per_s or 0) * 128)
        # The exporter serves the same numbers, one series per job and GPU.
        samples_family = next(f for f in job_metrics(last)
                              if f.name == "gputui_job_samples_per_second")
        served = {(s.labels["pid"], s.labels["gpu"]): s.value for s in samples_family.samples}
        assert served[(str(pids["A"]), "0")] == by_pid[pids["A"]].samples_per_s

    # The TUI shows the jobs with their rates.
        app = GputuiApp(AppOptions(), sampler=sampler)
        async with app.run_test(size=(160, 48)) as pilot:
            sampler.ingest(last)
            await pilot.pause()
            box = app.query_one(JobsBox)
            assert box.display
            text = screen_text(app)
            assert "Jobs" in text and "SAMPLES/S" in text
            for name in "ABC":
                assert str(pids[name]) in text and f"job-{name}" in text
    finally:
        sampler.close()

    # `gputui snapshot --json` in another process reads the jobs too (on the real clock,
    # the jobs' last steps are seconds ahead of it: their rates are as above).
    env = fake_nvml_lib.env(path)  # type: ignore[attr-defined]
    env.update(XDG_RUNTIME_DIR=str(runtime), PYTHONPATH=str(ROOT))
    out = subprocess.run([sys.executable, "-m", "gputui", "snapshot", "--json"],
                         capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    listed = {j["pid"]: j for j in doc["jobs"]}
    assert set(listed) == set(pids.values())
    a = listed[pids["A"]]
    assert a["name"] == "job-A" and a["gpus"] == [0] and a["step"] > 0
    assert a["samples_per_s"] == BATCH / STEP_S and a["step_time_s"] == STEP_S
    assert a["updated"].endswith("Z") and a["tokens_per_s"] > 0
