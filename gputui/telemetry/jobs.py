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
import itertools
import os
import stat
import statistics
import time
from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime

from gputui import track
from gputui.telemetry.model import GpuProcess, GpuSample, JobReading

WINDOW_S = 5.0  # rates and step time are over this much of a job's latest steps
MAX_POINTS = 4096  # steps kept per job (a loop faster than the ring fills it at most)
TMP_MAX_AGE_S = 60.0  # an unpublished file older than this was left by a crash


@dataclass(frozen=True, slots=True)
class StepPoint:
    step: int
    end_mono: float
    samples: int
    tokens: int


@dataclass
class _JobFile:
    fd: int
    ino: int
    pid: int = 0
    name: str = ""
    cvd: str | None = None
    points: deque[StepPoint] = field(default_factory=lambda: deque(maxlen=MAX_POINTS))


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


def parse_steps(data: bytes, after: int = 0) -> list[StepPoint]:
    """The ring's whole slots of steps after `after`, oldest first; torn or empty slots
    are skipped."""
    out = []
    for i, (seq, step, end, samples, tokens, seq2) in enumerate(
            track.SLOT.iter_unpack(data[track.HEADER_SIZE:track.FILE_SIZE])):
        if seq == seq2 == step and step > after and step % track.RING_SLOTS == i:
            out.append(StepPoint(step, end, samples, tokens))
    out.sort(key=lambda p: p.step)
    return out


def rates(points: Sequence[StepPoint], now_mono: float, window_s: float = WINDOW_S
          ) -> tuple[float | None, float | None, float | None]:
    """(samples/s, tokens/s, median step time) over the last `window_s` of the steps.

    Measured between step ends, so the monitor's own tick does not jitter them. A job
    that has not finished a step for much longer than its steps take (a hung GPU, a
    stalled input pipeline) is measured up to now: its rate falls towards 0."""
    if len(points) < 2:
        return None, None, None
    last = points[-1]
    # Step times: each gap between two kept steps, per step in it.
    durations = [(b.end_mono - a.end_mono) / (b.step - a.step)
                 for a, b in itertools.pairwise(points)
                 if b.step > a.step and b.end_mono >= last.end_mono - window_s]
    step_time = statistics.median(durations) if durations else None
    ref = last.end_mono
    if step_time is not None and now_mono - last.end_mono > max(3 * step_time, 2.0):
        ref = now_mono  # stalled
    anchor = points[0]
    for p in reversed(points):
        if p.end_mono <= ref - window_s:
            anchor = p
            break
    span = ref - anchor.end_mono
    if span <= 0:
        return None, None, step_time
    samples = (last.samples - anchor.samples) / span if last.samples else None
    tokens = (last.tokens - anchor.tokens) / span if last.tokens else None
    return samples, tokens, step_time


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
        last = f.points[-1].step if f.points else 0
        f.points.extend(parse_steps(data, last))
        while len(f.points) > 2 and f.points[1].end_mono <= now - 2 * self.window_s:
            f.points.popleft()  # the oldest kept is the anchor of the longest window
        samples, tokens, step_time = rates(f.points, now, self.window_s)
        latest = f.points[-1] if f.points else None
        updated = None if latest is None else datetime.fromtimestamp(
            wall - (now - latest.end_mono), UTC)
        return JobReading(
            pid=f.pid, name=f.name, gpus=job_gpus(f.pid, f.cvd, gpus, on_gpu),
            step=latest.step if latest else 0, samples=latest.samples if latest else 0,
            tokens=latest.tokens if latest else 0, samples_per_s=samples,
            tokens_per_s=tokens, step_time_s=step_time, updated=updated,
            cuda_visible_devices=f.cvd)
