"""Job files under faults, seen by the monitor: a damaged figure in one job's file leaves
out that job only (JobSource, `snapshot --json`, `watch`, the TUI's Jobs box); 1,100 live
jobs under a 256-descriptor limit are all shown and `watch` runs on; running short of
descriptors for a tick loses neither the jobs nor the host's row."""

from __future__ import annotations

import errno
import json
import math
import os
import resource
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from gputui.telemetry import jobs as jobs_module
from gputui.telemetry.host import HostSource
from gputui.telemetry.jobs import JobSource
from gputui.telemetry.model import GpuProcess
from gputui.telemetry.sampler import Sampler
from gputui.ui.app import GputuiApp
from gputui.ui.options import AppOptions
from gputui.ui.widgets.jobs_box import JobsBox
from tests.cli import CliRunner
from tests.fakenvml.harness import FakeNvml, FakeNvmlLib, scenario_path
from tests.telemetry.job_files import healthy_steps, hold_job, job_bytes
from tests.ui.helpers import screen_text

ROOT = Path(__file__).resolve().parents[2]
JOB_FILES = Path(__file__).with_name("job_files.py")
HEALTHY = {101: "healthy-a", 102: "healthy-b"}


def damaged_steps(kind: str, now: float) -> list[tuple[int, float, int, int]]:
    """Healthy steps but for one damaged figure in the latest."""
    steps = healthy_steps(now)
    step, end, samples, tokens = steps[-1]
    steps[-1] = {
        "nan-step-time": (step, math.nan, samples, tokens),
        "inf-step-time": (step, math.inf, samples, tokens),
        "negative-time": (step, -5.0, samples, tokens),
        "huge-time": (step, 1e300, samples, tokens),
        "negative-samples": (step, end, -samples, tokens),
        "samples-backwards": (step, end, samples - 1000, tokens),
        "time-backwards": (step, end - 100.0, samples, tokens),
    }[kind]
    return steps


DAMAGE = ["nan-step-time", "inf-step-time", "negative-time", "huge-time", "negative-samples",
          "samples-backwards", "time-backwards"]


@pytest.fixture
def mixed_jobs(runtime: Path) -> Iterator[Path]:
    """Two healthy live jobs and one live job per kind of damage, in `runtime`."""
    directory = runtime / "gputui" / "jobs"
    now = time.monotonic()
    fds = [hold_job(directory, pid, job_bytes(pid, name, healthy_steps(now)))
           for pid, name in HEALTHY.items()]
    fds += [hold_job(directory, 200 + i, job_bytes(200 + i, kind, damaged_steps(kind, now)))
            for i, kind in enumerate(DAMAGE)]
    try:
        yield directory
    finally:
        for fd in fds:
            os.close(fd)


def test_a_damaged_job_is_left_out_and_the_healthy_ones_shown(mixed_jobs: Path) -> None:
    source = JobSource()
    for _ in range(2):  # and again, with what the first read kept
        got = {j.pid: j for j in source.read()}
        assert {pid: j.name for pid, j in got.items()} == HEALTHY
        for j in got.values():
            assert j.step == 20 and j.samples == 640
            assert j.samples_per_s == pytest.approx(320.0)
            assert j.step_time_s == pytest.approx(0.1)


def test_snapshot_and_watch_show_the_healthy_jobs_without_a_traceback(
        mixed_jobs: Path, fake_nvml: FakeNvml, cli: CliRunner) -> None:
    fake_nvml.use("two_gpus", frozen_time=None)
    out = cli("snapshot", "--json")
    assert out.returncode == 0 and out.stderr == ""
    assert {j["pid"]: j["name"] for j in json.loads(out.stdout)["jobs"]} == HEALTHY
    watch = cli("watch", "--count", "2", "--interval", "0.1", "--format", "jsonl")
    assert watch.returncode == 0 and watch.stderr == ""
    assert len(watch.stdout.splitlines()) == 4  # 2 ticks × 2 GPUs


async def test_the_jobs_box_keeps_the_healthy_jobs(mixed_jobs: Path) -> None:
    sampler = Sampler(interval=1.0, nvml=None)
    app = GputuiApp(AppOptions(), sampler=sampler)
    async with app.run_test(size=(160, 48)) as pilot:
        for _ in range(2):
            sampler.ingest(sampler.read())
        await pilot.pause()
        assert app.query_one(JobsBox).display
        text = screen_text(app)
        for pid, name in HEALTHY.items():
            row = next(line for line in text.splitlines() if name in line)
            assert str(pid) in row and "320" in row
        assert not any(kind in text for kind in DAMAGE)
    sampler.close()


# --- file descriptors -----------------------------------------------------------------------


def _limit_descriptors() -> None:
    resource.setrlimit(resource.RLIMIT_NOFILE, (256, 256))


@pytest.fixture
def many_jobs(runtime: Path) -> Iterator[int]:
    """1,100 live jobs, their locks held by a helper process (its own descriptor limit
    raised), so this one's is untouched."""
    n = 1100
    _soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < n + 64:
        pytest.skip(f"the hard descriptor limit ({hard}) is below the {n} jobs to hold")
    holder = subprocess.Popen([sys.executable, str(JOB_FILES), str(runtime), str(n)],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert holder.stdout is not None and holder.stdin is not None
    try:
        assert holder.stdout.readline().strip() == str(n)
        yield n
    finally:
        holder.stdin.close()
        holder.wait(timeout=30)


def start_limited(args: list[str], env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "gputui", *args], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=_limit_descriptors)


def test_more_jobs_than_descriptors_are_all_shown_and_watch_runs_on(
        many_jobs: int, runtime: Path, fake_nvml_lib: FakeNvmlLib) -> None:
    env = fake_nvml_lib.env(scenario_path("two_gpus"))
    env.update(XDG_RUNTIME_DIR=str(runtime), PYTHONPATH=str(ROOT))
    # Both at once: two processes on two cores.
    watch = start_limited(["watch", "--count", "2", "--interval", "0.1", "--format",
                           "jsonl"], env)
    snap = start_limited(["snapshot", "--json"], env)
    watch_out, watch_err = watch.communicate(timeout=120)
    snap_out, snap_err = snap.communicate(timeout=120)
    assert watch.returncode == 0, watch_err
    assert watch_err == "" and len(watch_out.splitlines()) == 4  # 2 ticks × 2 GPUs
    assert snap.returncode == 0, snap_err
    jobs = json.loads(snap_out)["jobs"]
    assert len(jobs) == many_jobs and len({j["pid"] for j in jobs}) == many_jobs


def test_a_tick_short_of_descriptors_keeps_the_jobs(
        mixed_jobs: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    source = JobSource()
    before = source.read()
    assert {j.pid for j in before} == set(HEALTHY)

    def no_descriptors(*_args: object, **_kw: object) -> int:
        raise OSError(errno.EMFILE, "Too many open files")

    # Neither the directory nor a file can be opened: the jobs keep their last reading
    # (an absent job would read as one that exited).
    monkeypatch.setattr(jobs_module.os, "open", no_descriptors)
    monkeypatch.setattr(jobs_module.os, "scandir", no_descriptors)
    assert source.read() == before
    monkeypatch.undo()
    assert {j.pid for j in source.read()} == set(HEALTHY)


def test_watch_goes_on_when_the_host_figures_cannot_be_read(
        fake_nvml: FakeNvml, cli: CliRunner, monkeypatch: pytest.MonkeyPatch) -> None:
    fake_nvml.use("two_gpus", frozen_time=None)
    real = psutil.virtual_memory
    calls = [0]

    def memory_once_out_of_descriptors() -> object:
        calls[0] += 1
        if calls[0] == 2:  # the second tick
            raise OSError(errno.EMFILE, "Too many open files", "/proc/meminfo")
        return real()

    monkeypatch.setattr(psutil, "virtual_memory", memory_once_out_of_descriptors)
    out = cli("watch", "--count", "3", "--interval", "0.1", "--format", "jsonl")
    assert out.returncode == 0 and out.stderr == ""
    rows = [json.loads(line) for line in out.stdout.splitlines()]
    memory = [r["host_mem_used_bytes"] for r in rows if r["gpu"] == 0]
    assert calls[0] == 3 and len(memory) == 3
    assert memory[0] > 0 and memory[1] is None and memory[2] > 0


def test_a_gpu_process_proc_cannot_describe_keeps_nvmls_facts(
        monkeypatch: pytest.MonkeyPatch) -> None:
    host = HostSource()
    me = GpuProcess(gpu_index=0, pid=os.getpid(), gpu_mem_bytes=2**30)

    def no_descriptors(_pid: int) -> psutil.Process:
        raise OSError(errno.EMFILE, "Too many open files")

    monkeypatch.setattr(psutil, "Process", no_descriptors)
    assert host.describe((me,)) == (me,)
    monkeypatch.undo()
    (described,) = host.describe((me,))  # and the next tick describes it
    assert described.pid == me.pid and described.command and described.rss_bytes


def test_the_many_jobs_benchmark_reports_its_figures() -> None:
    """benchmarks/many_jobs.py runs (5,000 jobs' figures are measured there, not here)."""
    out = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "many_jobs.py"), "--jobs",
                          "30", "--ticks", "2", "--watch-ticks", "0", "--json"],
                         capture_output=True, text=True, timeout=120, check=True)
    report = json.loads(out.stdout)
    assert report["jobs"] == 30 and report["read"]["descriptors_held"] == 0
    assert report["read"]["cpu_ms_median"] > 0
