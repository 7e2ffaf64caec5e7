from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator

import psutil
import pytest

from gputui.telemetry.procctl import check_signal, send_signal

NOBODY_UID = 65534


@pytest.fixture
def child() -> Iterator[subprocess.Popen[bytes]]:
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=10)


def test_own_child_can_be_signalled(child: subprocess.Popen[bytes]) -> None:
    assert check_signal(child.pid) is None
    assert send_signal(child.pid, signal.SIGTERM) is None
    assert child.wait(timeout=10) == -signal.SIGTERM


def test_never_init_nor_ourselves_nor_nonsense() -> None:
    assert check_signal(1) == "PID 1 is the init process; gputui never signals it"
    assert "not a process" in (check_signal(0) or "")
    assert "not a process" in (check_signal(-5) or "")
    assert check_signal(os.getpid()) == f"PID {os.getpid()} is gputui itself; quit with q instead"
    assert send_signal(1, signal.SIGTERM) is not None
    assert send_signal(os.getpid(), signal.SIGTERM) is not None  # and we are still here


def test_exited_process_is_no_such_process(child: subprocess.Popen[bytes]) -> None:
    child.kill()
    child.wait(timeout=10)
    assert check_signal(child.pid) == "no such process"
    assert send_signal(child.pid, signal.SIGTERM) == "no such process"


def test_zombie_is_reported_as_exited(child: subprocess.Popen[bytes]) -> None:
    os.kill(child.pid, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while psutil.Process(child.pid).status() != psutil.STATUS_ZOMBIE:
        assert time.monotonic() < deadline
        time.sleep(0.01)
    reason = check_signal(child.pid)
    assert reason is not None and "already exited" in reason


def test_reused_pid_is_refused(child: subprocess.Popen[bytes]) -> None:
    started = psutil.Process(child.pid).create_time()
    assert check_signal(child.pid, expected_start=started) is None
    reason = send_signal(child.pid, signal.SIGTERM, expected_start=started - 3600)
    assert reason == f"PID {child.pid} is now a different process (the one shown has exited)"
    assert child.poll() is None


def test_bad_signal_number_is_one_line(child: subprocess.Popen[bytes]) -> None:
    reason = send_signal(child.pid, 12345)
    assert reason is not None and reason.startswith("cannot send signal 12345 to PID")
    assert "\n" not in reason


def _as_nobody(pid: int) -> list[str]:
    """check_signal and send_signal(SIGKILL) on `pid` from a forked child running as nobody.

    A fork (not a new interpreter): the interpreter lives under root's home, which
    nobody cannot read, and the code under test is already imported here.
    """
    read_fd, write_fd = os.pipe()
    child_pid = os.fork()
    if child_pid == 0:  # pragma: no cover - runs in the child
        try:
            os.close(read_fd)
            os.setgroups([])
            os.setgid(NOBODY_UID)
            os.setuid(NOBODY_UID)
            out = f"{check_signal(pid)}\n{send_signal(pid, signal.SIGKILL)}\n"
            os.write(write_fd, out.encode())
        finally:
            os._exit(0)
    os.close(write_fd)
    with os.fdopen(read_fd, "rb") as fh:
        data = fh.read().decode()
    os.waitpid(child_pid, 0)
    return data.splitlines()


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to start a process as another user")
def test_another_users_process_is_refused_with_the_reason(
        child: subprocess.Popen[bytes]) -> None:
    # The child belongs to root; an unprivileged gputui must refuse, naming the owner.
    out = _as_nobody(child.pid)
    expected = (f"PID {child.pid} belongs to root; only your own processes can be signalled "
                "(run as root to signal others)")
    assert out == [expected, expected]
    assert child.poll() is None


@pytest.mark.skipif(os.geteuid() == 0, reason="root may signal everyone")
def test_another_users_process_is_refused_when_not_root() -> None:
    me = os.getuid()
    other = next((p for p in psutil.process_iter(["uids"])
                  if p.pid > 1 and p.info["uids"] and p.info["uids"].real != me), None)
    if other is None:
        pytest.skip("no process of another user to try")
    reason = check_signal(other.pid)
    assert reason is not None and "only your own processes can be signalled" in reason
