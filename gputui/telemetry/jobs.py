"""JobSource: the training jobs that report with gputui.track, read each tick.

Each job writes a small fixed-size file in this user's runtime directory (the layout is
in gputui.track). Reading one is open, fstat, a lock test, a pread of ~6 KiB and close:
no descriptor is held between ticks, so thousands of jobs never run the monitor out of
file descriptors. From the ring of each job's last steps (each step's end time and
cumulative samples and tokens) this module computes the job's rates over the last
WINDOW_S seconds of its steps and its median step time.

What is not read: a file owned by another user or in a directory open to others (one
user's job is never shown to another), a slot whose two sequence numbers differ (a torn
write), a file whose job is gone — a live job holds a lock on its file; when the lock
can be taken the file is removed — and a job whose figures are damaged (a step time that
is not a finite, plausible monotonic time, a negative count, counts or times that go
backwards): that job is left out, never the others.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import math
import os
import stat
import statistics
import time
from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import NamedTuple

from gputui import track
from gputui.telemetry.model import GpuProcess, GpuSample, JobReading

WINDOW_S = 5.0  # rates and step time are over this much of a job's latest steps
# Steps kept for the rates are at least this far apart (a job doing a thousand steps a
# second keeps ~200 per window, not 5000): a rate is exact between any two kept steps,
# since their counts are cumulative, so thinning costs nothing but the window's edge.
KEEP_EVERY_S = WINDOW_S / 100
TMP_MAX_AGE_S = 60.0  # an unpublished file older than this was left by a crash
# A step's end is CLOCK_MONOTONIC seconds (since boot): beyond this (~31 years) it is damage.
MAX_MONO_S = 1e9
# A job file that cannot be opened or read for one of these reasons is still there; this
# process is short of descriptors or memory: the job keeps its last reading rather than
# seeming to exit.
TRANSIENT_ERRNOS = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOMEM, errno.EAGAIN})


class StepPoint(NamedTuple):
    step: int
    end_mono: float
    samples: int
    tokens: int


@dataclass
class _JobFile:
    """What has been read of one training job's file (no descriptor is kept)."""

    ino: int
    pid: int = 0
    name: str = ""
    cvd: str | None = None
    points: deque[StepPoint] = field(default_factory=deque)  # thinned, oldest first
    latest: StepPoint | None = None
    last: JobReading | None = None  # the latest reading, for a tick the file cannot be read


def parse_header(data: bytes) -> tuple[int, str, str | None] | None:
    """(pid, name, CUDA_VISIBLE_DEVICES) from a job file, None if it is not one."""
    if len(data) < track.FILE_SIZE:
        return None
    magic, version, pid, _mono, _wall, name, cvd = track.HEADER.unpack_from(data)
    if magic != track.MAGIC or version != track.VERSION:
        return None
    text = name.split(b"\x00", 1)[0].decode("utf-8", "replace")
    devices = None if cvd[:1] == track.CVD_UNSET else cvd.split(b"\x00", 1)[0].decode(
        "utf-8", "replace")
    return pid, text, devices


def parse_steps(data: bytes) -> list[StepPoint]:
    """The ring's whole slots, oldest step first; torn or empty slots are skipped.
    (Plain tuples in StepPoint's order: this runs for every job on every tick.)"""
    out = [(step, end, samples, tokens) for i, (seq, step, end, samples, tokens, seq2)
           in enumerate(track.SLOT.iter_unpack(data[track.HEADER_SIZE:track.FILE_SIZE]))
           if seq == seq2 == step and step and step % track.RING_SLOTS == i]
    out.sort()
    return out  # type: ignore[return-value]


def plausible(steps: Sequence[StepPoint]) -> bool:
    """True when a job's steps (oldest first) could have been written by gputui.track:
    end times finite monotonic seconds in [0, MAX_MONO_S], counts not negative, and
    neither going backwards from one step to the next. Anything else is a damaged or
    forged file; its job is left out (a NaN would otherwise reach every rate). A plain
    loop: ~5 µs for a full ring, the cheapest way measured."""
    prev_end, prev_samples, prev_tokens = 0.0, 0, 0
    for _step, end, samples, tokens in steps:
        # `not (a <= x <= b)` is also true for NaN.
        if not (prev_end <= end <= MAX_MONO_S) or samples < prev_samples or tokens < prev_tokens:
            return False
        prev_end, prev_samples, prev_tokens = end, samples, tokens
    return True


def step_time(steps: Sequence[StepPoint], window_s: float = WINDOW_S) -> float | None:
    """Median time of the steps in the window: each gap between two steps, per step."""
    if len(steps) < 2:
        return None
    since = steps[-1][1] - window_s
    durations = []
    for i in range(len(steps) - 1, 0, -1):
        b, a = steps[i], steps[i - 1]
        if b[1] < since:
            break
        if b[0] > a[0]:
            durations.append((b[1] - a[1]) / (b[0] - a[0]))
    return statistics.median(durations) if durations else None


def rates(points: Sequence[StepPoint], now_mono: float, window_s: float = WINDOW_S,
          step_s: float | None = None) -> tuple[float | None, float | None, float | None]:
    """(samples/s, tokens/s, median step time) over the last `window_s` of the steps
    (`step_s`: the median step time when already known, from the job's ring).

    Measured between step ends, so the monitor's own tick does not jitter them. A job
    that has not finished a step for much longer than its steps take (a hung GPU, a
    stalled input pipeline) is measured up to now: its rate falls towards 0."""
    if step_s is None:
        step_s = step_time(points, window_s)
    if len(points) < 2:
        return None, None, step_s
    last = points[-1]
    ref = last[1]
    if step_s is not None and now_mono - ref > max(3 * step_s, 2.0):
        ref = now_mono  # stalled
    anchor = points[0]
    for i in range(len(points) - 1, -1, -1):
        if points[i][1] <= ref - window_s:
            anchor = points[i]
            break
    span = ref - anchor[1]
    if span <= 0:
        return None, None, step_s
    samples = (last[2] - anchor[2]) / span if last[2] else None
    tokens = (last[3] - anchor[3]) / span if last[3] else None
    return samples, tokens, step_s


def visible_gpus(cvd: str, gpus: Sequence[GpuSample]) -> tuple[int, ...]:
    """The NVML indices a CUDA_VISIBLE_DEVICES value names: indices, or GPU-/MIG- UUIDs
    (a unique prefix is enough, as for CUDA). CUDA stops at the first entry it cannot
    match, and so does this. Indices are taken as NVML's (PCI bus order, which CUDA
    follows with CUDA_DEVICE_ORDER=PCI_BUS_ID and on machines with one GPU model)."""
    out: list[int] = []
    for raw in cvd.split(","):
        tok = raw.strip()
        if tok.isdigit():
            found = [g.index for g in gpus if g.index == int(tok)]
        elif tok.startswith("GPU-"):
            found = [g.index for g in gpus if g.info.uuid.startswith(tok)]
        elif tok.startswith("MIG-"):
            found = [g.index for g in gpus
                     if any(m.uuid.startswith(tok) for m in g.mig_devices)]
        else:
            found = []
        if len(found) != 1:
            break
        if found[0] not in out:
            out.append(found[0])
    return tuple(out)


def job_gpus(pid: int, cvd: str | None, gpus: Sequence[GpuSample],
             on_gpu: dict[int, set[int]]) -> tuple[int, ...]:
    """Where a job runs: the GPUs whose NVML process list has its PID, else those its
    CUDA_VISIBLE_DEVICES names (before its CUDA context exists, or in another PID
    namespace), else none known."""
    seen = on_gpu.get(pid)
    if seen:
        return tuple(sorted(seen))
    if cvd is not None:
        return visible_gpus(cvd, gpus)
    return ()


class JobSource:
    """Reads this user's job files; call `read` from one thread (the sampler's)."""

    def __init__(self, directory: str | None = None, *, uid: int | None = None,
                 window_s: float = WINDOW_S) -> None:
        if directory is None:
            try:
                directory = track.jobs_dir()
            except Exception:  # platformdirs found no safe runtime dir: no jobs to show
                directory = ""
        self.directory = directory
        self.uid = os.geteuid() if uid is None else uid
        self.window_s = window_s
        self._files: dict[str, _JobFile] = {}

    def close(self) -> None:
        self._files.clear()  # nothing is held open between reads

    def read(self, gpus: Sequence[GpuSample] = (), processes: Iterable[GpuProcess] = (),
             now_mono: float | None = None) -> tuple[JobReading, ...]:
        now = time.monotonic() if now_mono is None else now_mono
        wall = time.time()
        on_gpu: dict[int, set[int]] = {}
        for p in processes:
            on_gpu.setdefault(p.pid, set()).add(p.gpu_index)
        out = []
        for name, path in self._scan():
            reading = self._read_one(name, path, gpus, on_gpu, now, wall)
            if reading is not None:
                out.append(reading)
        out.sort(key=lambda j: j.pid)
        return tuple(out)

    # --- one directory, one file ---------------------------------------------------------

    def _owned(self, st: os.stat_result) -> bool:
        return st.st_uid == self.uid

    def _dir_ok(self) -> bool:
        if not self.directory:
            return False
        try:
            st = os.lstat(self.directory)
        except OSError:
            return False
        return stat.S_ISDIR(st.st_mode) and self._owned(st) and not st.st_mode & 0o077

    def _scan(self) -> list[tuple[str, str]]:
        """(name, path) of the job files to read this tick; what is known of the others
        is forgotten. When the directory cannot be listed for want of descriptors or
        memory, the jobs already known are read again (none seems to exit)."""
        if not self._dir_ok():
            self._files.clear()
            return []
        found: list[tuple[str, str]] = []
        try:
            with os.scandir(self.directory) as it:
                for e in it:
                    if e.name.endswith(track.JOB_SUFFIX):
                        # d_type, no system call: a FIFO or a symlink is never opened.
                        if e.is_file(follow_symlinks=False):
                            found.append((e.name, e.path))
                    elif e.name.endswith(track.TMP_SUFFIX):
                        self._clean_tmp(e)
        except OSError as exc:
            if exc.errno in TRANSIENT_ERRNOS:
                return [(n, os.path.join(self.directory, n)) for n in self._files]
            found = []
        listed = {name for name, _path in found}
        for name in [n for n in self._files if n not in listed]:
            del self._files[name]
        return found

    def _load(self, path: str) -> tuple[int, bytes] | int:
        """(inode, contents) of a live job's file, read through a descriptor closed
        before returning; else an errno: ENOENT when there is no job here (not a
        regular file of this user's, or its job is gone: the file is then removed),
        or what opening or reading it failed with."""
        try:
            fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK)
        except OSError as exc:
            return exc.errno or errno.EIO
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode) or not self._owned(st):
                return errno.ENOENT
            if self._gone(fd):
                self._remove(path, st.st_ino)
                return errno.ENOENT
            return st.st_ino, os.pread(fd, track.FILE_SIZE, 0)
        except OSError as exc:
            return exc.errno or errno.EIO
        finally:
            os.close(fd)  # also releases the lock _gone took

    @staticmethod
    def _gone(fd: int) -> bool:
        """True when no process holds the job's lock: the job has exited."""
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return False
        return True

    @staticmethod
    def _remove(path: str, ino: int) -> None:
        # Remove only the file we checked (not a new job's file renamed over it since).
        with contextlib.suppress(OSError):
            if os.stat(path, follow_symlinks=False).st_ino == ino:
                os.unlink(path)

    def _clean_tmp(self, e: os.DirEntry[str]) -> None:
        try:
            st = e.stat(follow_symlinks=False)
            if not stat.S_ISREG(st.st_mode) or not self._owned(st):
                return
            if time.time() - st.st_mtime < TMP_MAX_AGE_S:
                return  # a job publishing its file right now
            fd = os.open(e.path, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK)
        except OSError:
            return
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            os.unlink(e.path)
        except OSError:
            pass
        finally:
            os.close(fd)

    def _read_one(self, name: str, path: str, gpus: Sequence[GpuSample],
                  on_gpu: dict[int, set[int]], now: float, wall: float) -> JobReading | None:
        loaded = self._load(path)
        f = self._files.get(name)
        if isinstance(loaded, int):
            if loaded in TRANSIENT_ERRNOS and f is not None:
                return f.last
            self._files.pop(name, None)
            return None
        ino, data = loaded
        if f is None or f.ino != ino:  # new, or replaced (a new job, same PID)
            f = self._files[name] = _JobFile(ino=ino)
        header = parse_header(data)
        ring = parse_steps(data)
        if header is None or not plausible(ring):
            f.last = None
            return None
        f.pid, f.name, f.cvd = header
        try:
            f.last = self._reading(f, ring, gpus, on_gpu, now, wall)
        except (ValueError, ArithmeticError):  # a figure no check above foresaw
            f.last = None
        return f.last

    def _reading(self, f: _JobFile, ring: list[StepPoint], gpus: Sequence[GpuSample],
                 on_gpu: dict[int, set[int]], now: float, wall: float) -> JobReading | None:
        """The job's reading from its ring of steps (and the points kept from earlier
        ticks); None when a rate comes out not finite."""
        seen = f.latest[0] if f.latest is not None else 0
        for p in ring:
            if p[0] > seen and (not f.points or p[1] >= f.points[-1][1] + KEEP_EVERY_S):
                f.points.append(p)
        if ring and ring[-1][0] > seen:
            f.latest = ring[-1]
        while len(f.points) > 2 and f.points[1][1] <= now - 2 * self.window_s:
            f.points.popleft()  # the oldest kept is the anchor of the longest window
        points = list(f.points)
        if f.latest is not None and (not points or points[-1] is not f.latest):
            points.append(f.latest)
        samples, tokens, step_s = rates(points, now, self.window_s,
                                        step_time(ring, self.window_s))
        if not all(v is None or math.isfinite(v) for v in (samples, tokens, step_s)):
            return None
        step, end, done, tokens_done = f.latest or (0, None, 0, 0)
        updated = None if end is None else datetime.fromtimestamp(wall - (now - end), UTC)
        return JobReading(
            pid=f.pid, name=f.name, gpus=job_gpus(f.pid, f.cvd, gpus, on_gpu),
            step=step, samples=done, tokens=tokens_done, samples_per_s=samples,
            tokens_per_s=tokens, step_time_s=step_s, updated=updated,
            cuda_visible_devices=f.cvd)
