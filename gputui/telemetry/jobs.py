"""JobSource: the training jobs that report with gputui.track, read each tick.

Each job writes a small fixed-size file in this user's runtime directory (the layout is
in gputui.track). Reading one is a pread of ~5 KiB: the ring of its last steps, each
step's end time and cumulative samples and tokens. From those this module computes the
job's rates over the last WINDOW_S seconds of its steps and its median step time.

What is not read: a file owned by another user or in a directory open to others (one
user's job is never shown to another), a slot whose two sequence numbers differ (a torn
write), a file whose job is gone — a live job holds a lock on its file; when the lock
can be taken the file is removed.
"""

from __future__ import annotations

import contextlib
import fcntl
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


class StepPoint(NamedTuple):
    step: int
    end_mono: float
    samples: int
    tokens: int


@dataclass
class _JobFile:
    """One training job's file, open, and what has been read of it."""

    fd: int
    ino: int
    pid: int = 0
    name: str = ""
    cvd: str | None = None
    points: deque[StepPoint] = field(default_factory=deque)  # thinned, oldest first
    latest: StepPoint | None = None


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
        for f in self._files.values():
            with contextlib.suppress(OSError):
                os.close(f.fd)
        self._files.clear()

    def read(self, gpus: Sequence[GpuSample] = (), processes: Iterable[GpuProcess] = (),
             now_mono: float | None = None) -> tuple[JobReading, ...]:
        now = time.monotonic() if now_mono is None else now_mono
        wall = time.time()
        on_gpu: dict[int, set[int]] = {}
        for p in processes:
            on_gpu.setdefault(p.pid, set()).add(p.gpu_index)
        out = []
        for name in self._scan():
            f = self._files[name]
            reading = self._read_one(name, f, gpus, on_gpu, now, wall)
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

    def _scan(self) -> list[str]:
        """Names of the live job files now open; the others are closed (and removed)."""
        entries: dict[str, os.DirEntry[str]] = {}
        if self._dir_ok():
            try:
                with os.scandir(self.directory) as it:
                    for e in it:
                        if e.name.endswith(track.JOB_SUFFIX):
                            entries[e.name] = e
                        elif e.name.endswith(track.TMP_SUFFIX):
                            self._clean_tmp(e)
            except OSError:
                entries = {}
        for name in list(self._files):
            if name not in entries:
                self._drop(name)
        live = []
        for name, entry in entries.items():
            try:
                st = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            if not stat.S_ISREG(st.st_mode) or not self._owned(st):
                self._drop(name)
                continue
            f = self._files.get(name)
            if f is not None and f.ino != st.st_ino:  # replaced (a new job, same PID)
                self._drop(name)
                f = None
            if f is None:
                f = self._open(entry.path, st)
                if f is None:
                    continue
                self._files[name] = f
            if self._gone(f):
                self._remove(entry.path, f)
                self._drop(name)
                continue
            live.append(name)
        return live

    def _open(self, path: str, st: os.stat_result) -> _JobFile | None:
        try:
            fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW)
        except OSError:
            return None
        try:
            fst = os.fstat(fd)
        except OSError:
            os.close(fd)
            return None
        if fst.st_ino != st.st_ino or not self._owned(fst):
            os.close(fd)
            return None
        return _JobFile(fd=fd, ino=fst.st_ino)

    @staticmethod
    def _gone(f: _JobFile) -> bool:
        """True when no process holds the job's lock: the job has exited."""
        try:
            fcntl.flock(f.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return False
        return True

    @staticmethod
    def _remove(path: str, f: _JobFile) -> None:
        # Remove only the file we checked (not a new job's file renamed over it since).
        with contextlib.suppress(OSError):
            if os.stat(path, follow_symlinks=False).st_ino == f.ino:
                os.unlink(path)

    def _clean_tmp(self, e: os.DirEntry[str]) -> None:
        try:
            st = e.stat(follow_symlinks=False)
            if not stat.S_ISREG(st.st_mode) or not self._owned(st):
                return
            if time.time() - st.st_mtime < TMP_MAX_AGE_S:
                return  # a job publishing its file right now
            fd = os.open(e.path, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW)
        except OSError:
            return
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            os.unlink(e.path)
        except OSError:
            pass
        finally:
            os.close(fd)

    def _drop(self, name: str) -> None:
        f = self._files.pop(name, None)
        if f is not None:
            with contextlib.suppress(OSError):
                os.close(f.fd)

    def _read_one(self, name: str, f: _JobFile, gpus: Sequence[GpuSample],
                  on_gpu: dict[int, set[int]], now: float, wall: float) -> JobReading | None:
        try:
            data = os.pread(f.fd, track.FILE_SIZE, 0)
        except OSError:
            return None
        header = parse_header(data)
        if header is None:
            return None
        f.pid, f.name, f.cvd = header
        ring = parse_steps(data)
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
        step, end, done, tokens_done = f.latest or (0, None, 0, 0)
        updated = None if end is None else datetime.fromtimestamp(wall - (now - end), UTC)
        return JobReading(
            pid=f.pid, name=f.name, gpus=job_gpus(f.pid, f.cvd, gpus, on_gpu),
            step=step, samples=done, tokens=tokens_done, samples_per_s=samples,
            tokens_per_s=tokens, step_time_s=step_s, updated=updated,
            cuda_visible_devices=f.cvd)
