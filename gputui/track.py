"""Report a training job's progress to the gputui monitor: `track.step(samples=N)`.

    from gputui import track
    track.start(name="resnet50")          # optional
    for batch in loader:
        ...
        track.step(samples=len(batch), tokens=n_tokens)   # once per optimizer step

The figures travel through one small fixed-size file per process in the user's runtime
directory (`<user runtime dir>/jobs/<pid>.job`, the directory mode 0700), written in place
through a shared memory map: a step is one `struct.pack_into` into a ring of the last
RING_SLOTS steps, no system call. The monitor reads the files (gputui.telemetry.jobs).

A training job never fails because of gputui: nothing here raises, blocks or grows, and
when the directory is missing, full or read-only reporting is off for this process (the
job goes on). Only the standard library is imported, and the directory is found (with
platformdirs) on the first call, not at import.

The file (little-endian):
    header, HEADER_SIZE bytes: magic, version, pid, start (monotonic s), start (epoch s),
        name (utf-8, NUL-padded), CUDA_VISIBLE_DEVICES (as the job saw it; "\\x00" when unset)
    RING_SLOTS slots of SLOT: seq, step, end of the step (monotonic s), samples so far,
        tokens so far, seq again. Step n goes in slot n % RING_SLOTS; a reader takes a slot
        only when both seqs match (a torn write never does).

A live job holds a shared flock on its file: a reader that can take the lock knows the
job is gone and removes the file. A file appears under its final name only once written
and locked (created under a temporary name, then renamed).
"""

from __future__ import annotations

import os
import struct
import time
from typing import TYPE_CHECKING, Any

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


class Tracker:
    """One process's reporting (module-level functions use a single instance).

    `clock` gives the steps' end times (monotonic seconds: the monitor reads them on
    the same clock); tests pass a fake one."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._mm: Any = None  # the mmap while reporting
        self._fd = -1
        self._path: str | None = None
        self._off = False  # reporting failed once: stay off, cheaply
        self._name: str | None = None
        self.step_no = 0
        self.samples = 0
        self.tokens = 0

    # --- the calls a training loop makes -------------------------------------------------

    def start(self, name: str | None = None) -> None:
        """Name the job (default: the script's name); optional, never raises."""
        try:
            if name is not None:
                self._name = str(name)
            if self._mm is None and not self._off:
                self._open()
            elif self._mm is not None and name is not None:
                self._mm[NAME_OFFSET:NAME_OFFSET + NAME_BYTES] = _text(
                    self._name or "", NAME_BYTES).ljust(NAME_BYTES, b"\x00")
        except Exception:
            pass

    def step(self, samples: int = 0, tokens: int = 0) -> None:
        """One optimizer step done, with `samples` (and `tokens`) processed in it."""
        try:
            mm = self._mm
            if mm is None:
                if self._off:
                    return
                self._open()
                mm = self._mm
                if mm is None:
                    return
            k = int(samples)
            m = int(tokens)
            if k < 0 or m < 0:
                return
            n = self.step_no + 1
            s = self.samples + k
            t = self.tokens + m
            SLOT.pack_into(mm, HEADER_SIZE + (n % RING_SLOTS) * SLOT.size,
                           n, n, self._clock(), s, t, n)
            # Counted only once written: a value the file cannot hold changes nothing.
            self.step_no = n
            self.samples = s
            self.tokens = t
        except Exception:
            pass

    def close(self) -> None:
        """Stop reporting and remove the file (at exit)."""
        mm, self._mm = self._mm, None
        path, self._path = self._path, None
        try:
            if path is not None:
                os.unlink(path)
        except OSError:
            pass
        try:
            if mm is not None:
                mm.close()
        except Exception:
            pass
        if self._fd >= 0:
            try:
                os.close(self._fd)  # releases the lock
            except OSError:
                pass
            self._fd = -1

    def forget(self) -> None:
        """In a forked child: drop the parent's file (without removing it) and start
        over with a file of its own if it reports."""
        try:
            if self._mm is not None:
                self._mm.close()
        except Exception:
            pass
        if self._fd >= 0:
            try:
                os.close(self._fd)
            except OSError:
                pass
        self.__init__(self._clock)  # type: ignore[misc]

    # --- the file ------------------------------------------------------------------------

    def _open(self) -> None:
        """Create, fill, lock and publish this process's file; on any failure, report
        nothing from now on. The whole file is written with write() before it is mapped,
        so the mapping never needs a page the file system could refuse (a full tmpfs
        would otherwise kill the job with SIGBUS on a later step)."""
        self._off = True  # until it worked
        import fcntl
        import mmap

        directory = jobs_dir()
        if not private_dir(directory, create=True):
            return
        pid = os.getpid()
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
            mm = mmap.mmap(fd, FILE_SIZE, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
            os.rename(tmp, final)
        except Exception:
            try:
                os.unlink(tmp)
            except OSError:
                pass
            if fd >= 0:
                os.close(fd)
            return
        self._fd, self._mm, self._path = fd, mm, final
        self._off = False


_TRACKER = Tracker()


# The bound methods themselves (not wrappers): one Python call less per step.
# start(name=None): name this job in the monitor (optional; default: the script's name).
start = _TRACKER.start
# step(samples=0, tokens=0): call once per optimizer step; never raises or blocks.
step = _TRACKER.step


def _at_exit() -> None:
    _TRACKER.close()


def _install() -> None:
    import atexit

    atexit.register(_at_exit)
    if hasattr(os, "register_at_fork"):
        os.register_at_fork(after_in_child=_TRACKER.forget)


_install()
