"""gputui.track (the training loop's side) and JobSource (the monitor's side), through the
real files: what one writes the other reads; dead jobs' files cleaned; another user's
files ignored; a missing, full or read-only runtime dir never stops a job."""

from __future__ import annotations

import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from gputui import track
from gputui.telemetry.jobs import JobSource, StepPoint, job_gpus, parse_steps, rates, visible_gpus
from tests.factories import device, gpu

ROOT = Path(__file__).resolve().parents[1]
FAKE_JOB = ROOT / "tests" / "telemetry" / "fake_job.py"
OTHER_UID = 65534  # nobody


def jobs_dir(runtime: Path) -> Path:
    return runtime / "gputui" / "jobs"


def job_env(runtime: Path) -> dict[str, str]:
    env = dict(os.environ, XDG_RUNTIME_DIR=str(runtime), PYTHONPATH=str(ROOT))
    env.pop("CUDA_VISIBLE_DEVICES", None)
    return env


def start_job(runtime: Path, *args: str, env: dict[str, str] | None = None,
              **popen: object) -> subprocess.Popen[str]:
    proc = subprocess.Popen([sys.executable, str(FAKE_JOB), *args], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env or job_env(runtime), **popen)  # type: ignore[call-overload]
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(f"{time.monotonic()}\n")
    proc.stdin.flush()
    assert proc.stdout.readline().strip() == "stepping"
    return proc


def test_importing_track_loads_nothing_heavy() -> None:
    code = ("import sys; import gputui.track; print(sorted(m for m in ('textual', 'pynvml', "
            "'torch', 'rich', 'platformdirs', 'psutil') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=dict(os.environ, PYTHONPATH=str(ROOT)), check=True)
    assert out.stdout.strip() == "[]"


def test_what_a_job_reports_the_monitor_reads(runtime: Path) -> None:
    t = track.Tracker()
    t.start(name="resnet50")
    for _ in range(10):
        t.step(samples=32, tokens=4096)
    try:
        (job,) = JobSource().read()
        assert job.pid == os.getpid() and job.name == "resnet50"
        assert (job.step, job.samples, job.tokens) == (10, 320, 40960)
        assert job.samples_per_s is not None and job.samples_per_s > 0
        # One step's samples and tokens are in the same proportion as reported.
        assert job.tokens_per_s == pytest.approx(job.samples_per_s * 128)
        assert job.gpus == () and job.cuda_visible_devices is None
        d = jobs_dir(runtime)
        assert os.stat(d).st_mode & 0o777 == 0o700
        assert [p.name for p in d.iterdir()] == [f"{os.getpid()}.job"]
        # Renamed while running: the monitor shows the new name.
        t.start(name="resnet50-ft")
        assert JobSource().read()[0].name == "resnet50-ft"
    finally:
        t.close()
    assert list(jobs_dir(runtime).iterdir()) == []  # a clean exit removes its file


def test_the_file_never_grows_and_bad_arguments_never_raise(runtime: Path) -> None:
    t = track.Tracker()
    t.step(samples=1)
    path = jobs_dir(runtime) / f"{os.getpid()}.job"
    size = path.stat().st_size
    for i in range(3 * track.RING_SLOTS):
        t.step(samples=1, tokens=i)
    t.step(samples="many")  # type: ignore[arg-type]
    t.step(samples=None)  # type: ignore[arg-type]
    t.step(samples=-5)
    t.step(samples=2**70)  # more than the file holds
    t.start(name=object())  # type: ignore[arg-type]
    try:
        assert path.stat().st_size == size == track.FILE_SIZE
        (job,) = JobSource().read()
        assert job.step == 1 + 3 * track.RING_SLOTS and job.samples == job.step
    finally:
        t.close()


def test_a_torn_slot_is_skipped() -> None:
    data = bytearray(track.FILE_SIZE)
    for n in (1, 2, 3):
        track.SLOT.pack_into(data, track.HEADER_SIZE + n * track.SLOT.size, n, n, float(n),
                             n * 10, 0, n)
    # Step 4 half written: its closing sequence number is still the old one.
    track.SLOT.pack_into(data, track.HEADER_SIZE + 4 * track.SLOT.size, 4, 4, 4.0, 40, 0, 0)
    assert [p[0] for p in parse_steps(bytes(data))] == [1, 2, 3]


def test_rates_over_the_window_and_a_stalled_job_falls_to_zero() -> None:
    points = [StepPoint(n, 100.0 + 0.5 * n, 64 * n, 0) for n in range(1, 41)]
    samples, tokens, step_time = rates(points, now_mono=points[-1].end_mono + 0.1)
    assert samples == pytest.approx(128.0) and tokens is None
    assert step_time == pytest.approx(0.5)
    # No step for a minute: measured up to now, nothing done in the window.
    samples, _, _ = rates(points, now_mono=points[-1].end_mono + 60)
    assert samples == 0.0


def test_gpus_from_nvml_processes_else_cuda_visible_devices() -> None:
    gpus = [gpu(0), gpu(1), gpu(2)]
    assert visible_gpus("2,0", gpus) == (2, 0)
    assert visible_gpus(device(1).uuid[:12], gpus) == (1,)
    assert visible_gpus("1,bogus,2", gpus) == (1,)  # CUDA stops at the first bad entry
    assert visible_gpus("", gpus) == ()
    assert job_gpus(7, "1", gpus, {7: {2}}) == (2,)  # NVML saw it: that wins
    assert job_gpus(7, "1", gpus, {}) == (1,)
    assert job_gpus(7, None, gpus, {}) == ()


def test_cuda_visible_devices_travel_with_the_job(runtime: Path) -> None:
    env = dict(job_env(runtime), CUDA_VISIBLE_DEVICES="1")
    proc = start_job(runtime, env=env)
    try:
        (job,) = JobSource().read([gpu(0), gpu(1)])
        assert job.pid == proc.pid and job.cuda_visible_devices == "1" and job.gpus == (1,)
    finally:
        proc.kill()
        proc.wait()


def test_a_dead_jobs_file_is_ignored_and_removed(runtime: Path) -> None:
    proc = start_job(runtime, "--name", "doomed")
    source = JobSource()
    assert [j.pid for j in source.read()] == [proc.pid]
    proc.send_signal(signal.SIGKILL)  # no atexit: the file stays behind
    proc.wait()
    path = jobs_dir(runtime) / f"{proc.pid}.job"
    assert path.exists()
    assert source.read() == ()
    assert not path.exists()
    # A monitor started after the job died cleans up the same way.
    proc = start_job(runtime)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert JobSource().read() == () and list(jobs_dir(runtime).iterdir()) == []


def test_a_file_owned_by_another_user_is_ignored(runtime: Path) -> None:
    t = track.Tracker()
    t.step(samples=8)
    try:
        # Seen from another user's monitor, this job's file is not there.
        assert JobSource(uid=os.geteuid() + 1).read() == ()
        assert len(JobSource().read()) == 1
    finally:
        t.close()


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a file to another user needs root")
def test_another_users_file_in_my_directory_is_not_read(runtime: Path) -> None:
    t = track.Tracker()
    t.step(samples=8)
    try:
        path = jobs_dir(runtime) / f"{os.getpid()}.job"
        os.chown(path, OTHER_UID, OTHER_UID)
        assert JobSource().read() == ()
        assert path.exists()  # not ours to remove
    finally:
        t.close()


def run_job_to_the_end(runtime: Path, *, env: dict[str, str] | None = None,
                       prefix: list[str] | None = None,
                       **popen: object) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, str(FAKE_JOB), "--step-s", "0.01", "--steps", "20"]
    return subprocess.run([*(prefix or []), *argv],
                          input=f"{time.monotonic()}\n", capture_output=True, text=True,
                          env=env or job_env(runtime), timeout=60,
                          **popen)  # type: ignore[call-overload]


# Root writes through any permission bits: its job runs without that power.
WITHOUT_ROOTS_OVERRIDE = ["setpriv", "--bounding-set", "-dac_override,-dac_read_search"]


@pytest.mark.skipif(os.geteuid() == 0 and shutil.which("setpriv") is None,
                    reason="as root, a read-only directory needs setpriv to drop DAC override")
def test_a_read_only_runtime_dir_does_not_stop_the_job(runtime: Path) -> None:
    place = runtime / "gputui"  # where the jobs/ directory would go
    place.mkdir(mode=0o500)
    prefix = WITHOUT_ROOTS_OVERRIDE if os.geteuid() == 0 else []
    done = run_job_to_the_end(runtime, prefix=prefix)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "stepping" and done.stderr == ""
    assert list(place.iterdir()) == []


def test_a_runtime_dir_that_cannot_be_made_does_not_stop_the_job(runtime: Path) -> None:
    (runtime / "gputui").write_text("")  # a file where the directory would go
    done = run_job_to_the_end(runtime)
    assert done.returncode == 0 and done.stdout.strip() == "stepping" and done.stderr == ""
    assert JobSource().read() == ()


def _tiny_file_limit() -> None:
    resource.setrlimit(resource.RLIMIT_FSIZE, (1024, 1024))


def test_a_full_runtime_dir_does_not_stop_the_job(runtime: Path) -> None:
    # A file system that refuses to grow a file past 1 KiB: the job's file cannot be
    # written whole (EFBIG, as ENOSPC on a full tmpfs), so the job reports nothing.
    done = run_job_to_the_end(runtime, preexec_fn=_tiny_file_limit)
    assert done.returncode == 0 and done.stderr == ""
    assert list(jobs_dir(runtime).iterdir()) == []


def test_track_costs_are_in_the_benchmark() -> None:
    """benchmarks/track_cost.py runs and reports its figure as JSON (the < 2 µs claim is
    measured there, not asserted here)."""
    out = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "track_cost.py"),
                          "--calls", "20000", "--repeats", "1", "--json"],
                         capture_output=True, text=True, timeout=120, check=True,
                         env=dict(os.environ, PYTHONPATH=str(ROOT)))
    report = json.loads(out.stdout)
    assert report["calls"] == 20000 and report["mean_us"] > 0
    assert set(report["cases"]) == {"reporting", "no_runtime_dir", "threads_8"}


FORKING_JOB = """
import os, sys
from gputui import track
track.start(name="parent")
for _ in range(3):
    track.step(samples=4)
ready, go = os.pipe(), os.pipe()
pid = os.fork()
if pid == 0:  # a forked worker (a DataLoader's, say) that reports too
    for _ in range(5):
        track.step(samples=1)
    os.write(ready[1], b"x")
    os.read(go[0], 1)
    sys.exit(0)  # atexit: removes the child's own file only
os.read(ready[0], 1)
print(pid, flush=True)
sys.stdin.readline()
os.write(go[1], b"x")
os.waitpid(pid, 0)
print("parent still reporting", flush=True)
sys.stdin.readline()
"""


def test_a_forked_child_reports_in_its_own_file(runtime: Path) -> None:
    proc = subprocess.Popen([sys.executable, "-c", FORKING_JOB], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True, env=job_env(runtime))
    assert proc.stdin is not None and proc.stdout is not None
    try:
        child = int(proc.stdout.readline())
        jobs = {j.pid: j for j in JobSource().read()}
        assert (jobs[proc.pid].name, jobs[proc.pid].step, jobs[proc.pid].samples) == (
            "parent", 3, 12)
        assert (jobs[child].step, jobs[child].samples) == (5, 5)
        proc.stdin.write("\n")  # the child exits, then the parent goes on
        proc.stdin.flush()
        assert proc.stdout.readline().strip() == "parent still reporting"
        assert [j.pid for j in JobSource().read()] == [proc.pid]
    finally:
        proc.kill()
        proc.wait()


@pytest.mark.parametrize("fork", ["os.fork()", "ctypes.CDLL(None).fork()"],
                         ids=["os.fork", "C fork"])
def test_a_forked_child_never_writes_into_its_parents_file(runtime: Path, fork: str) -> None:
    """A child of C code's fork() runs no Python fork handler: it is known by its PID."""
    code = FORKING_JOB.replace("import os, sys", "import ctypes, os, sys").replace(
        "os.fork()", fork)
    proc = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True, env=job_env(runtime))
    assert proc.stdin is not None and proc.stdout is not None
    try:
        child = int(proc.stdout.readline())
        jobs = {j.pid: j for j in JobSource().read()}
        assert (jobs[proc.pid].step, jobs[proc.pid].samples) == (3, 12)
        assert (jobs[child].step, jobs[child].samples) == (5, 5)
        proc.stdin.write("\n")  # the child exits (its atexit runs), then the parent goes on
        proc.stdin.flush()
        assert proc.stdout.readline().strip() == "parent still reporting"
        (job,) = JobSource().read()
        assert (job.pid, job.step, job.samples) == (proc.pid, 3, 12)
    finally:
        proc.kill()
        proc.wait()


def test_steps_from_eight_threads_are_each_counted_once(runtime: Path) -> None:
    t = track.Tracker()
    t.start(name="threads")
    threads, half = 8, 1500
    total = threads * 2 * half
    go, paused, resume = (threading.Barrier(threads + 1) for _ in range(3))

    def report() -> None:
        go.wait()
        for _ in range(half):
            t.step(samples=2, tokens=3)
        paused.wait()  # halfway: the test reads a still file
        resume.wait()
        for _ in range(half):
            t.step(samples=2, tokens=3)

    workers = [threading.Thread(target=report) for _ in range(threads)]
    for w in workers:
        w.start()
    path = jobs_dir(runtime) / f"{os.getpid()}.job"
    try:
        go.wait()
        paused.wait()
        source = JobSource()
        (job,) = source.read()
        assert (job.step, job.samples, job.tokens) == (total // 2, total, 3 * total // 2)
        resume.wait()
        seen = [job.step]
        while any(w.is_alive() for w in workers):
            ring = parse_steps(path.read_bytes())  # the file as a fresh monitor sees it
            assert ring[-1][0] >= seen[-1]  # (step, end, samples, tokens)
            seen.append(ring[-1][0])
        for w in workers:
            w.join()
        (job,) = source.read()
        assert (job.step, job.samples, job.tokens) == (total, 2 * total, 3 * total)
        # Each slot in step order: the ring's end times rise with its steps.
        ends = [p[1] for p in parse_steps(path.read_bytes())]
        assert len(ends) == track.RING_SLOTS and ends == sorted(ends)
    finally:
        t.close()


def test_a_job_whose_file_is_truncated_then_removed_runs_to_its_end(runtime: Path) -> None:
    proc = subprocess.Popen([sys.executable, str(FAKE_JOB), "--driven", "--step-s", "0.125"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=job_env(runtime))
    assert proc.stdin is not None and proc.stdout is not None

    def steps_until(t: float) -> None:
        proc.stdin.write(f"{t!r}\n")  # type: ignore[union-attr]
        proc.stdin.flush()  # type: ignore[union-attr]
        assert proc.stdout.readline().strip() == f"at {t!r}"  # type: ignore[union-attr]

    try:
        proc.stdin.write(f"{time.monotonic()}\n")
        steps_until(1.0)
        path = jobs_dir(runtime) / f"{proc.pid}.job"
        assert [j.step for j in JobSource().read()] == [8]
        os.truncate(path, 0)
        steps_until(2.0)  # a shared memory map died here of SIGBUS
        assert JobSource().read() == ()  # no longer a job file: not shown, not fatal
        path.unlink()
        steps_until(3.0)
        proc.stdin.close()
        assert proc.wait(timeout=30) == 0
        assert proc.stderr is not None and proc.stderr.read() == ""
        assert list(jobs_dir(runtime).iterdir()) == []
    finally:
        proc.kill()
        proc.wait()


@pytest.mark.timeout(10)  # a lock that waits for itself would hang here
def test_a_step_from_a_signal_handler_inside_a_step_never_hangs(runtime: Path) -> None:
    """A signal handler that runs while its thread is inside a step (here: in the clock,
    which is read under the reporting lock) reports too, and both return."""
    armed, seen_by_handler = [False], []

    def clock() -> float:
        if armed[0]:
            armed[0] = False
            signal.raise_signal(signal.SIGUSR1)  # its handler runs here, mid-step
        return time.monotonic()

    def handler(*_: object) -> None:
        seen_by_handler.append(t.step_no)
        t.step(samples=1)

    t = track.Tracker(clock=clock)
    t.start(name="signalled")  # the file is made (the clock read once)
    old = signal.signal(signal.SIGUSR1, handler)
    try:
        armed[0] = True
        t.step(samples=1)
        t.step(samples=1)
        (job,) = JobSource().read()
        # The handler ran inside step 1 (not yet counted); its step shares that number.
        assert seen_by_handler == [0] and (job.step, job.samples) == (2, 2)
    finally:
        signal.signal(signal.SIGUSR1, old)
        t.close()
