"""Drive a real terminal program inside tmux: start, read the screen, type, tear down.

Each session runs on its own tmux server (`-L <unique socket>`) with its own config,
so tests never touch a user's tmux and nothing outlives `close()` — which kills that
server and, with it, the program. `remain-on-exit` keeps a pane whose program died,
so a crash can still be read from the screen. The program runs under a tiny `sh`
wrapper that writes its exit status to a file: tmux itself sometimes marks a pane dead
(pty closed) long before it reaps the child and learns the status. With `gated=True`
the wrapper waits for `release()` before starting the program, so a caller can attach
`pipe-pane` first and time start-up from the real start. Also used by
benchmarks/tui_perf.py.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def tmux_available() -> bool:
    return shutil.which("tmux") is not None


def gputui_command() -> list[str]:
    """The installed `gputui` script next to this interpreter, else `python -m gputui`."""
    script = Path(sys.executable).parent / "gputui"
    if script.is_file() and os.access(script, os.X_OK):
        return [str(script)]
    return [sys.executable, "-m", "gputui"]


def _terminal() -> str:
    probe = subprocess.run(["infocmp", "tmux-256color"], capture_output=True, check=False) \
        if shutil.which("infocmp") else None
    return "tmux-256color" if probe is not None and probe.returncode == 0 else "screen-256color"


class TmuxError(AssertionError):
    """A wait timed out or tmux failed; the message carries the last screen."""


class TmuxSession:
    def __init__(self, command: Sequence[str], *, env: Mapping[str, str] | None = None,
                 unset: Sequence[str] = (), width: int = 120, height: int = 40,
                 name: str = "gputui", gated: bool = False, linger: bool = False,
                 cwd: Path | None = None) -> None:
        """`cwd`: the pane's working directory (default: ours). `python -m` puts it
        first on sys.path, so a program run from a source checkout imports that checkout."""
        self.command = list(command)
        self.cwd = cwd
        self.env = dict(os.environ if env is None else env)
        self.unset = list(unset)
        self.width = width
        self.height = height
        self.name = name
        self.socket = f"gputui-test-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        self._tmp = tempfile.TemporaryDirectory(prefix="gputui-tmux-")
        self._started = False
        self._socket_path = ""
        self.gated = gated
        # Keep the pane alive (a shell sleeping) after the program ends, so that the
        # terminal state it left can be read: tmux resets a dead pane's cursor flag.
        self.linger = linger
        tmp = Path(self._tmp.name)
        self._status_file = tmp / "exit-status"
        self._gate_file = tmp / "go"

    # --- lifecycle ---------------------------------------------------------------------

    def shell_command(self) -> str:
        """What the pane runs: `env -u X ... K=V ... command`, so the program gets exactly
        the variables asked for whatever environment the tmux server happened to have."""
        wanted = {k: v for k, v in self.env.items()
                  if k.startswith(("GPUTUI_", "FAKENVML_", "XDG_", "LD_LIBRARY_PATH", "HOME",
                                   "PATH", "PYTHON", "TEXTUAL", "COLORTERM", "LANG", "LC_"))}
        parts = ["env"]
        for key in self.unset:
            parts += ["-u", key]
        parts += [f"{k}={v}" for k, v in sorted(wanted.items()) if k not in self.unset]
        gate = (f"while [ ! -e {shlex.quote(str(self._gate_file))} ]; do sleep 0.005; done; "
                if self.gated else "")
        status = shlex.quote(str(self._status_file))
        # `env` execs the program, so the wrapper's only child *is* the program.
        script = f'{gate}"$@"; echo $? > {status}.tmp; mv {status}.tmp {status}'
        if self.linger:
            script += "; exec sleep 600"
        return shlex.join(["sh", "-c", script, "sh", *parts, *self.command])

    def release(self) -> None:
        """Start a gated program."""
        self._gate_file.touch()

    def start(self) -> TmuxSession:
        conf = Path(self._tmp.name) / "tmux.conf"
        conf.write_text(
            "set -g status off\n"  # every row belongs to the program
            "set -g remain-on-exit on\n"  # read the screen and exit status after it ends
            "set -g escape-time 0\n"
            f"set -g default-terminal {_terminal()}\n"
            "set -g history-limit 0\n")
        env = {**self.env, "TERM": self.env.get("TERM") or "xterm-256color"}
        for key in self.unset:
            env.pop(key, None)
        env.pop("TMUX", None)  # we may be running inside someone's tmux
        # The pane's size is the pane's: a COLUMNS/LINES in our environment (pytest-xdist's
        # workers have COLUMNS=80 LINES=24) would reach the program through the server's
        # environment and override it.
        env.pop("COLUMNS", None)
        env.pop("LINES", None)
        where = ["-c", str(self.cwd)] if self.cwd is not None else []
        self._run("-f", str(conf), "new-session", "-d", *where, "-x", str(self.width), "-y",
                  str(self.height), "-s", self.name, self.shell_command(), env=env)
        self._started = True
        self._socket_path = self._run("display-message", "-p", "#{socket_path}",
                                      check=False).stdout.strip()
        return self

    def close(self) -> None:
        """Kill this session's tmux server (and so the program). Safe to call twice."""
        if self._started:
            subprocess.run(["tmux", "-L", self.socket, "kill-server"], capture_output=True,
                           check=False, timeout=10)
            self._started = False
        if self._socket_path:  # tmux leaves its socket file behind after kill-server
            with contextlib.suppress(OSError):
                os.unlink(self._socket_path)
            self._socket_path = ""
        self._tmp.cleanup()

    def __enter__(self) -> TmuxSession:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- talking to tmux -----------------------------------------------------------------

    def _run(self, *args: str, env: Mapping[str, str] | None = None,
             check: bool = True) -> subprocess.CompletedProcess[str]:
        proc = subprocess.run(["tmux", "-L", self.socket, *args], capture_output=True,
                              text=True, env=env, timeout=10, check=False)
        if check and proc.returncode != 0:
            raise TmuxError(f"tmux {' '.join(args[:2])} failed: {proc.stderr.strip()}")
        return proc

    def tmux(self, *args: str) -> str:
        """Run any tmux command against this server; returns stdout."""
        return self._run(*args).stdout

    def capture(self) -> str:
        """The visible screen as text, one line per row."""
        return self._run("capture-pane", "-p", "-t", self.name).stdout

    def send_keys(self, *keys: str) -> None:
        """tmux key names ("q", "Enter", "Down", "C-c") or literal text."""
        self._run("send-keys", "-t", self.name, *keys)

    def pane_info(self) -> tuple[bool, int | None, int | None]:
        """(program exited, its exit status — negative for a signal — or None, pane pid)."""
        out = self._run("display-message", "-p", "-t", self.name,
                        "#{pane_dead}|#{pane_dead_status}|#{pane_dead_signal}|#{pane_pid}",
                        check=False)
        if out.returncode != 0:
            # Either the server is gone (nothing runs any more) or tmux hiccuped under load.
            alive = self._run("has-session", "-t", self.name, check=False).returncode == 0
            return (False, None, None) if alive else (True, None, None)
        dead, status, sig, pid = [*out.stdout.strip().split("|"), "", "", "", ""][:4]
        code: int | None = None
        if dead == "1":
            code = int(status) if status.isdigit() else -int(sig) if sig.isdigit() else None
        return dead == "1", code, int(pid) if pid.isdigit() else None

    def terminal_modes(self) -> dict[str, int]:
        """What the program left the terminal in: alternate screen, mouse reporting,
        cursor visible (tmux's #{alternate_on}, #{mouse_any_flag}, #{cursor_flag})."""
        names = ("alternate_on", "mouse_any_flag", "cursor_flag")
        out = self._run("display-message", "-p", "-t", self.name,
                        "|".join(f"#{{{n}}}" for n in names)).stdout.strip()
        return {n: int(v or 0) for n, v in zip(names, out.split("|"), strict=True)}

    @property
    def pid(self) -> int | None:
        """The program's pid (the wrapper shell's child), once it has started."""
        import psutil

        pane = self.pane_info()[2]
        if pane is None:
            return None
        try:
            children = psutil.Process(pane).children()
        except psutil.NoSuchProcess:
            return None
        return children[0].pid if children else None

    def exit_status(self) -> int | None:
        """The program's exit status once it has ended (128+n: killed by signal n)."""
        try:
            return int(self._status_file.read_text().strip())
        except (OSError, ValueError):
            return None

    def exited(self) -> bool:
        return self.pane_info()[0]

    # --- waiting -------------------------------------------------------------------------

    def wait_for(self, text: str | Sequence[str], timeout: float = 10.0,
                 interval: float = 0.05) -> str:
        """Wait until every given text is on screen; returns the screen. Raises TmuxError
        with the last screen (and the exit status if the program died) on timeout."""
        needles = [text] if isinstance(text, str) else list(text)
        deadline = time.monotonic() + timeout
        screen = ""
        while True:
            screen = self.capture()
            if all(n in screen for n in needles):
                return screen
            if time.monotonic() >= deadline:
                break
            time.sleep(interval)
        dead, status, _ = self.pane_info()
        state = f"program exited with status {status}" if dead else "program still running"
        raise TmuxError(f"{needles!r} not on screen after {timeout:.1f}s ({state}); "
                        f"screen:\n{screen}")

    def wait_exit(self, timeout: float = 10.0) -> int | None:
        """Wait for the program to end; returns its exit status (None: the wrapper itself
        died, so the status is unknown)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.linger and self._status_file.exists():
                return self.exit_status()
            if self.pane_info()[0]:  # the wrapper ends right after writing the status
                return self.exit_status()
            time.sleep(0.05)
        raise TmuxError(f"program still running after {timeout:.1f}s; screen:\n"
                        f"{self.capture()}")
