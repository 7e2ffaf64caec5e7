"""Report a training job's progress to the gputui monitor: `track.step(samples=N)`.

    from gputui import track
    track.start(name="resnet50")          # optional
    for batch in loader:
        ...
        track.step(samples=len(batch), tokens=n_tokens)   # once per optimizer step

The figures travel through one small fixed-size file per process in the user's runtime
directory (`<user runtime dir>/jobs/<pid>.job`, the directory mode 0700). A step is one
`os.pwrite` of one slot of a ring of the last RING_SLOTS steps. The monitor reads the
files (gputui.telemetry.jobs).

A training job never fails because of gputui: nothing here raises, blocks or grows, and
when the directory is missing, full or read-only reporting is off for this process (the
job goes on). Only the standard library is imported, and the directory is found (with
platformdirs) on the first call, not at import.

Why pwrite and not a shared memory map: a store into a mapped page past the end of the
file raises SIGBUS, which kills the job (Python cannot catch it), and anyone who can write
the file can truncate it. A pwrite past the end only extends the file, and one that fails
(a full file system) turns reporting off.

Threads: `step` and `start` may be called from several threads of one process (a training
loop, a logging thread, a callback): a lock per process holds for the slot's arithmetic
and its pwrite, so every step is counted once and slots are written in step order. Forks:
a child made by fork() — os.fork, or C code's fork() that runs no Python fork handler —
is noticed by its PID on its next call and never writes into its parent's file; it gets
a file of its own if it reports.

The file (little-endian):
    header, HEADER_SIZE bytes: magic, version, pid, start (monotonic s), start (epoch s),
        name (utf-8, NUL-padded), CUDA_VISIBLE_DEVICES (as the job saw it; "\\x00" when unset)
    RING_SLOTS slots of SLOT: seq, step, end of the step (monotonic s), samples so far,
        tokens so far, seq again. Step n goes in slot n % RING_SLOTS; a reader takes a slot
        only when both seqs match (a torn write never does).

A live job holds a shared flock on its file: a reader that can take the lock knows the
job is gone and removes the file. A file appears under its final name only once written
and locked (created under a temporary name, then renamed).

dcgm-exporter's job labels (optional): `start(hpc_job="12345")`, or GPUTUI_HPC_JOB_DIR
set, writes the files dcgm-exporter's `--hpc-job-mapping-dir` reads — one per GPU, named
by its index, one job id a line — and takes the job's line out again at exit. The
directory is `hpc_job_dir`, else GPUTUI_HPC_JOB_DIR, else DCGM_HPC_JOB_MAPPING_DIR (the
exporter's own variable); none: nothing is written. The job id is `hpc_job`, else
SLURM_JOB_ID, else the job's name; the GPUs are SLURM_STEP_GPUS or SLURM_JOB_GPUS (the
node's indices), else CUDA_VISIBLE_DEVICES when it lists indices. Several processes of one
job (torchrun's ranks) share a GPU's line: each leaves a marker `.gputui-<gpu>-<pid>`
(not a GPU's name, so the exporter skips it), and the line goes when the last live one's
process ends (a crashed one's marker is cleared by the next). Each file is rewritten
whole (temporary file, rename) under a lock on `.gputui.lock`, waited for at most
HPC_LOCK_WAIT_S.
"""

from __future__ import annotations

import os
import struct
import threading
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Callable

MAGIC = b"GPUTUIJ1"
VERSION = 1
NAME_BYTES = 64
CVD_BYTES = 128
HEADER = struct.Struct(f"<8sIIdd{NAME_BYTES}s{CVD_BYTES}s")
HEADER_SIZE = 256
SLOT = struct.Struct("<QQdqqQ")  # seq, step, end_mono, samples, tokens, seq
RING_SLOTS = 128
FILE_SIZE = HEADER_SIZE + RING_SLOTS * SLOT.size
NAME_OFFSET = 32  # where the name sits in the header (after magic, version, pid, 2 doubles)
CVD_UNSET = b"\x00"
JOB_SUFFIX = ".job"
TMP_SUFFIX = ".tmp"
HPC_DIR_ENVS = ("GPUTUI_HPC_JOB_DIR", "DCGM_HPC_JOB_MAPPING_DIR")
HPC_MARKER = ".gputui-"
HPC_LOCK_WAIT_S = 0.2
HPC_MAX_BYTES = 64 * 1024  # a mapping file holds a few job ids
HPC_JOB_CHARS = 128

_getpid = os.getpid
_pwrite = os.pwrite


def jobs_dir() -> str:
    """Where this user's jobs report: `jobs/` in platformdirs' user runtime dir (under
    XDG_RUNTIME_DIR, /run/user/UID, or a per-user fallback in /tmp)."""
    import warnings

    import platformdirs

    with warnings.catch_warnings():
        # platformdirs warns when XDG_RUNTIME_DIR is unset: not the training job's business.
        warnings.simplefilter("ignore")
        base = platformdirs.user_runtime_dir("gputui")
    return os.path.join(base, "jobs")


def private_dir(path: str, *, create: bool) -> bool:
    """True when `path` is a real directory owned by this user and closed to others
    (made so, when `create`): another user's directory, or a symlink planted in a shared
    /tmp, is never written to or read from."""
    import stat

    if create:
        try:
            os.makedirs(path, mode=0o700, exist_ok=True)
        except OSError:
            return False
    try:
        st = os.lstat(path)
    except OSError:
        return False
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid():
        return False
    if st.st_mode & 0o077:
        if not create:
            return False
        try:
            os.chmod(path, 0o700)
        except OSError:
            return False
    return True


def _text(value: str, size: int) -> bytes:
    raw = value.encode("utf-8", "replace")[:size]
    # Never cut a UTF-8 sequence in two: drop an incomplete tail.
    return raw.decode("utf-8", "ignore").encode("utf-8")


def _default_name() -> str:
    import sys

    argv0 = sys.argv[0] if sys.argv and sys.argv[0] else "python"
    return os.path.basename(argv0) or "python"


class _State:
    """One process's reporting: its file, its counts and the lock over both. A forked
    child makes a new one: the parent's lock may have been held, at the fork, by a
    thread the child does not have."""

    __slots__ = ("children", "fd", "hpc", "ino", "lock", "off", "path", "pid", "samples",
                 "step_no", "tokens")

    def __init__(self, pid: int) -> None:
        self.pid = pid
        # Reentrant: a step reported from a signal handler that interrupts a step of the
        # same thread must not wait forever for itself (it may share that step's number).
        self.lock = threading.RLock()
        self.fd = -1  # the job file, open while reporting
        self.ino = 0
        self.path: str | None = None
        self.off = False  # reporting failed or was closed: stay off, cheaply
        self.step_no = 0
        self.samples = 0
        self.tokens = 0
        self.children: dict[int, _State] = {}  # see Tracker._after_fork
        self.hpc: tuple[str, str, tuple[str, ...]] | None = None  # (dir, job id, GPUs)

    def stop(self, *, remove: bool) -> None:
        """Reporting off for good; the file removed when `remove` and still ours (not
        one put in its place since)."""
        self.off = True
        fd, self.fd = self.fd, -1
        path, self.path = self.path, None
        if fd < 0:
            return
        if remove and path is not None:
            try:
                if os.stat(path, follow_symlinks=False).st_ino == self.ino:
                    os.unlink(path)
            except OSError:
                pass
        try:
            os.close(fd)  # releases the lock
        except OSError:
            pass


class Tracker:
    """One process's reporting (module-level functions use a single instance).

    `clock` gives the steps' end times (monotonic seconds: the monitor reads them on
    the same clock); tests pass a fake one."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._name: str | None = None
        self._st = _State(_getpid())

    @property
    def step_no(self) -> int:
        return self._st.step_no

    @property
    def samples(self) -> int:
        return self._st.samples

    @property
    def tokens(self) -> int:
        return self._st.tokens

    # --- the calls a training loop makes -------------------------------------------------

    def start(self, name: str | None = None, hpc_job: str | None = None,
              hpc_job_dir: str | None = None) -> None:
        """Name the job (default: the script's name), and with `hpc_job` (or
        GPUTUI_HPC_JOB_DIR set) write dcgm-exporter's job mapping files (see the module's
        docstring); optional, never raises."""
        try:
            st = self._st
            if st.pid != _getpid():
                st = self._after_fork(st, _getpid())
            with st.lock:
                if name is not None:
                    self._name = str(name)
                if st.fd < 0:
                    if not st.off:
                        self._open(st)
                elif name is not None:
                    self._write(st, _text(self._name or "", NAME_BYTES).ljust(
                        NAME_BYTES, b"\x00"), NAME_OFFSET)
                if st.hpc is None:
                    st.hpc = _hpc_start(hpc_job, hpc_job_dir, self._name, st.pid)
        except Exception:
            pass

    def step(self, samples: int = 0, tokens: int = 0) -> None:
        """One optimizer step done, with `samples` (and `tokens`) processed in it."""
        try:
            st = self._st
            if st.pid != _getpid():  # a forked child (getpid: one system call, ~0.1 µs)
                st = self._after_fork(st, _getpid())
            if st.off:
                return
            k = int(samples)
            m = int(tokens)
            if k < 0 or m < 0:
                return
            with st.lock:
                if st.fd < 0 and (st.off or not self._open(st)):
                    return
                n = st.step_no + 1
                s = st.samples + k
                t = st.tokens + m
                # The clock is read under the lock: end times rise with the step numbers.
                slot = SLOT.pack(n, n, self._clock(), s, t, n)
                if self._write(st, slot, HEADER_SIZE + (n % RING_SLOTS) * SLOT.size):
                    # Counted only once written: a value the file cannot hold changes nothing.
                    st.step_no = n
                    st.samples = s
                    st.tokens = t
        except Exception:
            pass

    def close(self) -> None:
        """Stop reporting and remove the file (at exit)."""
        try:
            st = self._st
            if st.pid != _getpid():
                # A child of fork() that never reported: the file is its parent's.
                st = self._after_fork(st, _getpid())
            with st.lock:
                st.stop(remove=True)
                hpc, st.hpc = st.hpc, None
                if hpc is not None:
                    _hpc_mapping(*hpc, st.pid, add=False)
        except Exception:
            pass

    def forget(self) -> None:
        """In a forked child (os.fork's handler): drop the parent's file (without
        removing it) and start over with a file of its own if it reports."""
        try:
            st = self._st
            if st.pid != _getpid():
                self._after_fork(st, _getpid())
        except Exception:
            pass

    # --- the file ------------------------------------------------------------------------

    def _after_fork(self, st: _State, pid: int) -> _State:
        """The new state of a child made by fork(): the parent's descriptor closed (its
        file is never written or removed here), counts from zero, a new lock. Only one
        thread of the child may close that descriptor and set the new state: the first
        to `setdefault` its state in the inherited one's `children` (atomic in CPython)
        does, and every other thread takes that same state."""
        fresh = _State(pid)
        won = st.children.setdefault(pid, fresh)
        if won is fresh:
            st.stop(remove=False)  # this process's copy of the state: the parent's is intact
            self._st = fresh
        return won

    @staticmethod
    def _write(st: _State, data: bytes, offset: int) -> bool:
        """One pwrite into the job file; any failure turns reporting off for good (a full
        file system, an I/O error) and removes the file."""
        try:
            if _pwrite(st.fd, data, offset) == len(data):
                return True
        except OSError:
            pass
        st.stop(remove=True)
        return False

    def _open(self, st: _State) -> bool:
        """Create, fill, lock and publish this process's file (under `st.lock`); on any
        failure, report nothing from now on. The whole file is written up front, so a
        step's pwrite never needs a block the file system could refuse."""
        st.off = True  # until it worked
        import fcntl

        directory = jobs_dir()
        if not private_dir(directory, create=True):
            return False
        pid = st.pid
        final = os.path.join(directory, f"{pid}{JOB_SUFFIX}")
        tmp = os.path.join(directory, f"{pid}.{time.monotonic_ns()}{TMP_SUFFIX}")
        fd = -1
        try:
            fd = os.open(tmp, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            cvd = os.environ.get("CUDA_VISIBLE_DEVICES")
            header = HEADER.pack(MAGIC, VERSION, pid, self._clock(), time.time(),
                                 _text(self._name or _default_name(), NAME_BYTES),
                                 CVD_UNSET if cvd is None else _text(cvd, CVD_BYTES))
            data = header.ljust(FILE_SIZE, b"\x00")
            if os.write(fd, data) != len(data):
                raise OSError("short write")
            ino = os.fstat(fd).st_ino
            os.rename(tmp, final)
        except Exception:
            try:
                os.unlink(tmp)
            except OSError:
                pass
            if fd >= 0:
                os.close(fd)
            return False
        st.fd, st.ino, st.path = fd, ino, final
        st.off = False
        return True


def _hpc_start(job: str | None, directory: str | None, name: str | None,
               pid: int) -> tuple[str, str, tuple[str, ...]] | None:
    """Write this process's job into dcgm-exporter's mapping files; what to take out at
    exit, or None where there is no directory, job id or GPU to name."""
    env = os.environ
    directory = directory or next((env[k] for k in HPC_DIR_ENVS if env.get(k)), None)
    if not directory or (job is None and not env.get(HPC_DIR_ENVS[0])):
        return None
    job_id = "".join(ch for ch in str(job if job is not None else env.get("SLURM_JOB_ID")
                                      or name or _default_name())
                     if ch.isprintable())[:HPC_JOB_CHARS].strip()
    listed = env.get("SLURM_STEP_GPUS") or env.get("SLURM_JOB_GPUS") or env.get(
        "CUDA_VISIBLE_DEVICES") or ""
    gpus = tuple(dict.fromkeys(g.strip() for g in listed.split(",")))
    if not job_id or not gpus or not all(g.isdigit() and len(g) < 6 for g in gpus):
        return None
    _hpc_mapping(directory, job_id, gpus, pid, add=True)
    return directory, job_id, gpus


def _hpc_mapping(directory: str, job_id: str, gpus: tuple[str, ...], pid: int, *,
                 add: bool) -> None:
    """Add this process's line to each GPU's file, or take it out (`add` False): under
    the directory's lock, each file rewritten whole."""
    import fcntl

    if add:
        os.makedirs(directory, mode=0o755, exist_ok=True)
    lock = os.open(os.path.join(directory, HPC_MARKER.rstrip("-") + ".lock"),
                   os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    try:
        deadline = time.monotonic() + HPC_LOCK_WAIT_S
        while True:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    return  # another job holds it this long: leave the files as they are
                time.sleep(0.005)
        for gpu in gpus:
            mine = os.path.join(directory, f"{HPC_MARKER}{gpu}-{pid}")
            if add:
                _hpc_put(mine, job_id + "\n")
            elif os.path.lexists(mine):
                os.unlink(mine)
            _hpc_rewrite(directory, gpu, job_id, add)
    finally:
        os.close(lock)  # releases the lock


def _hpc_rewrite(directory: str, gpu: str, job_id: str, add: bool) -> None:
    """One GPU's file: its lines with this job's added, or taken out unless another live
    process's marker carries it; ids only dead processes' markers carried go too. A file
    left empty is removed."""
    live: set[str] = set()
    dead: set[str] = set()
    prefix = f"{HPC_MARKER}{gpu}-"
    for entry in os.listdir(directory):
        if entry.startswith(prefix) and entry[len(prefix):].isdigit():
            path = os.path.join(directory, entry)
            if _alive(int(entry[len(prefix):])):
                live.add(_hpc_read(path).strip())
            else:
                dead.add(_hpc_read(path).strip())
                os.unlink(path)
    target = os.path.join(directory, gpu)
    lines = [x for x in _hpc_read(target).splitlines() if x and (x in live or x not in dead)]
    if add and job_id not in lines:
        lines.append(job_id)
    elif not add and job_id not in live:
        lines = [x for x in lines if x != job_id]
    if lines:
        _hpc_put(target, "".join(f"{x}\n" for x in lines))
    elif os.path.lexists(target):
        os.unlink(target)


def _hpc_read(path: str) -> str:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return ""
    try:
        return os.read(fd, HPC_MAX_BYTES).decode("utf-8", "replace")
    except OSError:  # a directory, say: nothing of ours
        return ""
    finally:
        os.close(fd)


def _hpc_put(path: str, text: str) -> None:
    tmp = f"{os.path.join(os.path.dirname(path), HPC_MARKER)}tmp-{_getpid()}"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC,
                 0o644)
    try:
        os.write(fd, text.encode("utf-8"))
    finally:
        os.close(fd)
    os.rename(tmp, path)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True  # another user's: alive
    return True


_TRACKER = Tracker()


# The bound methods themselves (not wrappers): one Python call less per step.
# start(name=None, hpc_job=None, hpc_job_dir=None): name this job in the monitor (optional;
# default: the script's name); hpc_job: dcgm-exporter's job label for its GPUs.
start = _TRACKER.start
# step(samples=0, tokens=0): call once per optimizer step; never raises; thread-safe.
step = _TRACKER.step


def _at_exit() -> None:
    _TRACKER.close()


def _install() -> None:
    import atexit

    atexit.register(_at_exit)
    if hasattr(os, "register_at_fork"):
        os.register_at_fork(after_in_child=_TRACKER.forget)


_install()
