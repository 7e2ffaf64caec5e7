"""Signalling GPU processes from the monitor, with the reason in words when we may not.

The UI asks `check_signal` before offering "terminate"/"kill" so it can grey the
action out with a reason, and `send_signal` does it. Both answer None for "fine"
and a one-line sentence otherwise; neither raises for the expected failures. No
textual here.
"""

from __future__ import annotations

import os
import pwd
import signal

import psutil

# A PID whose start time differs from the one the caller saw by more than this is a
# different process that reused the number (start times are rounded to clock ticks).
_START_TOLERANCE_S = 1.0


def _user_name(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return f"uid {uid}"


def signal_name(sig: int) -> str:
    try:
        return signal.Signals(sig).name
    except ValueError:
        return f"signal {sig}"


def check_signal(pid: int, *, expected_start: float | None = None) -> str | None:
    """None if this user may signal `pid`; otherwise why not, in one line.

    `expected_start` (epoch seconds, psutil's create_time as carried in GpuProcess)
    guards against the PID having been reused since the snapshot was taken.
    """
    if pid <= 0:
        return f"PID {pid} is not a process"
    if pid == 1:
        return "PID 1 is the init process; gputui never signals it"
    if pid == os.getpid():
        return f"PID {pid} is gputui itself; quit with q instead"
    try:
        proc = psutil.Process(pid)
        status = proc.status()
        uids = proc.uids()
        started = proc.create_time()
    except psutil.ZombieProcess:  # before NoSuchProcess: it is a subclass
        return f"PID {pid} has already exited (a zombie waiting for its parent)"
    except psutil.NoSuchProcess:
        return "no such process"
    except psutil.AccessDenied:
        # Cannot read its /proc entry (hidepid): ask the kernel with the null signal.
        return _probe(pid)
    if status == psutil.STATUS_ZOMBIE:
        return f"PID {pid} has already exited (a zombie waiting for its parent)"
    if expected_start is not None and abs(started - expected_start) > _START_TOLERANCE_S:
        return f"PID {pid} is now a different process (the one shown has exited)"
    if os.geteuid() == 0:
        return None
    # The kernel's rule (kill(2)): the sender's real or effective UID must equal the
    # target's real or saved set-user-ID.
    ours = {os.getuid(), os.geteuid()}
    if ours & {uids.real, uids.saved}:
        return None
    return (f"PID {pid} belongs to {_user_name(uids.real)}; only your own processes can be "
            "signalled (run as root to signal others)")


def _probe(pid: int) -> str | None:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return "no such process"
    except PermissionError:
        return (f"PID {pid} belongs to another user; only your own processes can be "
                "signalled (run as root to signal others)")
    return None


def send_signal(pid: int, sig: int, *, expected_start: float | None = None) -> str | None:
    """Send `sig` to `pid`. None on success, else a one-line error."""
    reason = check_signal(pid, expected_start=expected_start)
    if reason is not None:
        return reason
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        return "no such process"
    except PermissionError:
        return f"not allowed to send {signal_name(sig)} to PID {pid}"
    except (OSError, ValueError, OverflowError) as exc:  # bad signal number and the like
        return f"cannot send {signal_name(sig)} to PID {pid}: {exc}"
    return None
