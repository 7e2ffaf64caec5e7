"""The command sink: a shell command run for each event, which never outlives gputui and
whose output never grows gputui's memory.

The command runs in a process group of its own (a new session), so everything it starts
can be ended together: when it runs past its time limit, and when gputui ends (`watch`
ends, `export` gets SIGTERM, the monitor quits) — SIGTERM to the group, SIGKILL after a
grace period. The event counts as delivered when the shell exits with status 0; what it
left running in its group is waited for within the same time limit (the next event for
this sink waits too), then ended. A program meant to outlive it must leave the group
(`setsid`). Its standard output goes to /dev/null; of its standard error, only the last
4 KiB are kept, for the line that says why it failed.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import subprocess
import threading
import time
from dataclasses import dataclass

from gputui.notify.events import Event
from gputui.notify.sinks import DeliveryError
from gputui.safe_text import printable

COMMAND_TIMEOUT_S = 30.0  # the command with whatever it started in its group
GROUP_GRACE_S = 1.0  # between SIGTERM and SIGKILL to the group
STDERR_KEEP_BYTES = 4096  # the end of its standard error, for the error line
POLL_S = 0.05  # how often an exit, the time limit and `stop` are looked at
GROUP_POLL_S = 0.2  # how often a group the shell left behind is looked at (a /proc scan)


@dataclass
class CommandSink:
    """Run `command` through the shell with the event's JSON on standard input and its
    essentials in GPUTUI_EVENT, GPUTUI_KIND, GPUTUI_GPU, GPUTUI_HOST, GPUTUI_TEXT."""

    command: str
    timeout_s: float = COMMAND_TIMEOUT_S
    grace_s: float = GROUP_GRACE_S
    name: str = "command"

    def send(self, event: Event, stop: threading.Event) -> None:
        env = dict(os.environ)
        env.update(GPUTUI_EVENT=event.event, GPUTUI_KIND=event.kind,
                   GPUTUI_GPU="" if event.gpu is None else str(event.gpu),
                   GPUTUI_HOST=event.host, GPUTUI_TEXT=event.text)
        try:
            proc = subprocess.Popen(self.command, shell=True, env=env, stdin=subprocess.PIPE,
                                    stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                    start_new_session=True)
        except OSError as exc:
            raise DeliveryError(f"cannot start: {exc.strerror or type(exc).__name__}") from None
        run = _Run(proc, (event.to_json() + "\n").encode("utf-8"))
        finished = False  # the shell exited by itself: its status is the verdict
        try:
            run.wait(time.monotonic() + self.timeout_s, stop)
            finished = proc.poll() is not None
        finally:
            run.end_group(self.grace_s)  # nothing it started outlives this call
        if not finished:
            if stop.is_set():
                raise DeliveryError("still running when gputui ended, stopped")
            raise DeliveryError(f"still running after {self.timeout_s:g} s, killed")
        status = proc.returncode
        if status != 0:
            last = run.stderr_tail().strip().splitlines()
            detail = f": {printable(last[-1][:200])}" if last else ""
            how = (f"killed by signal {-status}" if status < 0 else f"exit status {status}")
            raise DeliveryError(f"{how}{detail}")


class _Run:
    """One run of the command: feeds its standard input, keeps the end of its standard
    error, and knows whether its process group still has members."""

    def __init__(self, proc: subprocess.Popen[bytes], stdin: bytes) -> None:
        assert proc.stdin is not None and proc.stderr is not None
        self.proc = proc
        self.pgid = proc.pid  # its own session: the shell leads the group
        self._in, self._err = proc.stdin, proc.stderr
        self._pending: memoryview | None = memoryview(stdin)
        self._tail = bytearray()
        self._poll = select.poll()
        for f, mask in ((self._in, select.POLLOUT), (self._err, select.POLLIN)):
            os.set_blocking(f.fileno(), False)
            self._poll.register(f.fileno(), mask)

    def wait(self, deadline: float, stop: threading.Event) -> None:
        """Until the shell has exited and nothing is left in its group, the deadline or
        `stop`, feeding its standard input and reading its standard error meanwhile."""
        group_check = 0.0
        while True:
            now = time.monotonic()
            if self.proc.poll() is not None and now >= group_check:
                if not self._group_alive():
                    break
                group_check = now + GROUP_POLL_S
            left = deadline - now
            if left <= 0 or stop.is_set():
                return
            # With both pipes closed, the poll only waits.
            for fd, _mask in self._poll.poll(min(POLL_S, left) * 1000):
                if not self._err.closed and fd == self._err.fileno():
                    self._read_stderr()
                elif not self._in.closed and fd == self._in.fileno():
                    self._write_stdin()
        # What it wrote just before it ended is still in the pipe (bounded: a process
        # outside the group could keep writing).
        for _ in range(16):
            if self._err.closed or not self._read_stderr():
                break

    def _read_stderr(self) -> bool:
        """Read what is there; False when nothing was (or at its end)."""
        try:
            chunk = os.read(self._err.fileno(), 65536)
        except BlockingIOError:
            return False
        except OSError:
            chunk = b""
        if not chunk:  # end of file: nothing in the group holds it open any more
            self._poll.unregister(self._err.fileno())
            self._err.close()
            return False
        # Only the end is kept: a command writing gigabytes costs 4 KiB here.
        self._tail += chunk
        del self._tail[:-STDERR_KEEP_BYTES]
        return True

    def _write_stdin(self) -> None:
        assert self._pending is not None
        try:
            n = os.write(self._in.fileno(), self._pending)
            self._pending = self._pending[n:] if n < len(self._pending) else None
        except BlockingIOError:
            return
        except OSError:  # it exited, or closed its standard input without reading it
            self._pending = None
        if self._pending is None:
            self._poll.unregister(self._in.fileno())
            self._in.close()

    def stderr_tail(self) -> str:
        return bytes(self._tail).decode("utf-8", "replace")

    def _group_alive(self) -> bool:
        # Looked at often while it has members, so its number cannot have been handed to
        # a new group in between (a number is reused only once no process holds it).
        try:
            os.killpg(self.pgid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:  # only members that changed user (sudo): not ours to end
            return False
        return _has_live_member(self.pgid)

    def end_group(self, grace_s: float) -> None:
        """SIGTERM to what is left of the group, SIGKILL after `grace_s`, and back once
        it is gone (SIGKILL takes effect when each process is next scheduled); the
        pipes closed."""
        for sig in (signal.SIGTERM, signal.SIGKILL):
            if not self._running():
                break
            self._signal(sig)
            end = time.monotonic() + grace_s
            while self._running() and time.monotonic() < end:
                time.sleep(POLL_S / 5)
        self._in.close()
        self._err.close()

    def _running(self) -> bool:
        """The shell or anything of its group has not exited (the shell is reaped)."""
        return self.proc.poll() is None or self._group_alive()

    def _signal(self, sig: signal.Signals) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.pgid, sig)


def _has_live_member(pgid: int) -> bool:
    """Whether a process of group `pgid` has not exited. One that exited stays a zombie
    in the group until its new parent reaps it, which a container's init may never do;
    Linux's /proc tells them apart. Elsewhere every member counts as alive."""
    try:
        entries = os.scandir("/proc")
    except OSError:
        return True
    with entries:
        for entry in entries:
            if not entry.name.isdigit():
                continue
            try:
                with open(f"/proc/{entry.name}/stat", "rb") as f:
                    stat = f.read()
            except OSError:  # it ended meanwhile
                continue
            # pid (comm) state ppid pgrp ...: comm may hold spaces and parentheses.
            fields = stat[stat.rfind(b")") + 2:].split()
            if len(fields) > 2 and int(fields[2]) == pgid and fields[0] not in (b"Z", b"X"):
                return True
    return False
