"""Job files written by hand, in gputui.track's layout: many live jobs held by one process
(a flock per file, as each job holds its own), or a file with chosen (damaged) values.

Also run as a script by tests and benchmarks/many_jobs.py: hold N live job files in
`<runtime>/gputui/jobs/` until stdin closes.
    python tests/telemetry/job_files.py RUNTIME N
"""

from __future__ import annotations

import fcntl
import os
import resource
import sys
from collections.abc import Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from gputui import track

FIRST_PID = 4_000_000  # above any real PID: these jobs are only files


def job_bytes(pid: int, name: str, steps: Sequence[tuple[int, float, int, int]]) -> bytes:
    """A whole job file: its header and one ring slot per (step, end_mono, samples,
    tokens), each value written as given (a NaN or a negative count included)."""
    data = bytearray(track.FILE_SIZE)
    track.HEADER.pack_into(data, 0, track.MAGIC, track.VERSION, pid, 0.0, 0.0,
                           name.encode(), track.CVD_UNSET)
    for step, end, samples, tokens in steps:
        track.SLOT.pack_into(data, track.HEADER_SIZE + (step % track.RING_SLOTS)
                             * track.SLOT.size, step, step, end, samples, tokens, step)
    return bytes(data)


def healthy_steps(last_end: float, n: int = 20, step_s: float = 0.1,
                  batch: int = 32) -> list[tuple[int, float, int, int]]:
    """n steps of `batch` samples, `step_s` apart, the last ending at `last_end`."""
    return [(k, last_end - (n - k) * step_s, k * batch, 0) for k in range(1, n + 1)]


def hold_job(directory: Path, pid: int, data: bytes) -> int:
    """Write `<pid>.job` and hold its lock as a live job does; returns the fd to close
    (the job's exit)."""
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    fd = os.open(directory / f"{pid}{track.JOB_SUFFIX}",
                 os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
    os.write(fd, data)
    fcntl.flock(fd, fcntl.LOCK_SH)
    return fd


def hold_many(directory: Path, n: int, last_end: float, steps: int = 20) -> list[int]:
    """n live healthy jobs (PIDs FIRST_PID...) of `steps` steps each, the lock of each
    held by this process: the file-descriptor limit is raised to its hard limit first."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and soft < n + 64:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    ring = healthy_steps(last_end, steps)
    return [hold_job(directory, FIRST_PID + i, job_bytes(FIRST_PID + i, f"job-{i}", ring))
            for i in range(n)]


def main() -> int:
    import time

    runtime, n = Path(sys.argv[1]), int(sys.argv[2])
    fds = hold_many(runtime / "gputui" / "jobs", n, time.monotonic())
    print(len(fds), flush=True)
    sys.stdin.read()  # until the caller closes stdin
    return 0


if __name__ == "__main__":
    sys.exit(main())
