"""--notify-command never outlives gputui and never grows its memory: its process group
(with whatever it started) is ended when `watch` ends, when `export` gets SIGTERM and when
the notifier closes, SIGTERM then SIGKILL; only the end of its standard error is kept."""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

import psutil
import pytest

from gputui.notify.command import CommandSink
from gputui.notify.events import EventTracker
from gputui.notify.notifier import Notifier
from gputui.notify.sinks import DeliveryError
from tests.fakenvml.harness import FakeNvmlLib, derive_scenario
from tests.notify.conftest import clean_env
from tests.notify.test_sinks import EVENT

SW_POWER = 0x4
# The shell notes its process group and its child, then waits on the child (300 s).
SPAWN = "echo $$ > {d}/pgid; sleep 300 & echo $! > {d}/child; wait"
# The shell exits at once, leaving its child running in the group.
LEAVE = "echo $$ > {d}/pgid; sleep 300 & echo $! > {d}/child"


def live_members(pgid: int) -> list[int]:
    """The processes of group `pgid` that have not exited (a zombie waiting for a parent
    that may never reap it has exited)."""
    found = []
    for p in psutil.process_iter():
        try:
            if os.getpgid(p.pid) == pgid and p.status() != psutil.STATUS_ZOMBIE:
                found.append(p.pid)
        except (psutil.Error, ProcessLookupError):
            continue
    return found


def started(d: Path, timeout: float = 30.0) -> tuple[int, int]:
    """The command's process group and its child, once it has written them."""
    end = time.monotonic() + timeout
    while True:
        try:
            return int((d / "pgid").read_text()), int((d / "child").read_text())
        except (OSError, ValueError):
            if time.monotonic() >= end:
                raise AssertionError("the command did not start") from None
            time.sleep(0.02)


def throttling(tmp_path: Path) -> Path:
    # GPU 0 at its power cap from the first reading: an event at once.
    return derive_scenario("two_gpus", {
        "gpu.0.throttle_from_s": 0.0, "gpu.0.throttle_until_s": 10_000.0,
        "gpu.0.during.throttle_reasons": SW_POWER, "gpu.0.during.clock_sm_mhz": 1200,
    }, tmp_path / "throttle.conf")


def no_config(env: dict[str, str], tmp_path: Path) -> dict[str, str]:
    env = clean_env(env)
    env.pop("GPUTUI_CONFIG", None)
    env["XDG_CONFIG_HOME"] = str(tmp_path / "no-config")
    return env


@pytest.mark.parametrize("command", [SPAWN, LEAVE], ids=["running", "left-behind"])
def test_watch_ending_ends_the_commands_process_group(
        cli_env, fake_nvml_lib: FakeNvmlLib, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch, command: str) -> None:
    # The command starts with the first tick; the watch ends after its count, then gives
    # the command the drain's time (0.5 s here, 3 s for a user) before ending its group.
    monkeypatch.setattr("gputui.notify.notifier.DRAIN_S", 0.5)
    result = cli_env(["watch", "--interval", "0.1", "--count", "3", "--format", "jsonl",
                      "--notify-command", command.format(d=tmp_path)],
                     no_config(fake_nvml_lib.env(throttling(tmp_path)), tmp_path))
    assert result.returncode == 0, result.stderr
    pgid, child = started(tmp_path, timeout=0)
    assert live_members(pgid) == []
    assert not psutil.pid_exists(child) or psutil.Process(child).status() == \
        psutil.STATUS_ZOMBIE


def test_watch_on_sigterm_ends_like_ctrl_c_and_ends_the_group(
        cli_env, fake_nvml_lib: FakeNvmlLib, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("gputui.notify.notifier.DRAIN_S", 0.2)
    before = signal.getsignal(signal.SIGTERM)

    def terminate_once_started() -> None:
        started(tmp_path)  # the watch loop (and its SIGTERM handler) is running
        os.kill(os.getpid(), signal.SIGTERM)

    killer = threading.Thread(target=terminate_once_started)
    killer.start()
    result = cli_env(["watch", "--interval", "0.1", "--format", "jsonl", "--notify-command",
                      SPAWN.format(d=tmp_path)],
                     no_config(fake_nvml_lib.env(throttling(tmp_path)), tmp_path))
    killer.join()
    assert result.returncode == 0, result.stderr
    assert result.stdout  # its rows were written before it ended
    pgid, _child = started(tmp_path, timeout=0)
    assert live_members(pgid) == []
    assert signal.getsignal(signal.SIGTERM) == before  # the handler it set is gone


def test_export_on_sigterm_ends_the_commands_process_group(
        cli_env, fake_nvml_lib: FakeNvmlLib, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("gputui.notify.notifier.DRAIN_S", 0.2)
    seen: list[int] = []

    def terminate_once_started() -> None:
        # The command runs, so export's SIGTERM handler (set before the notifier) is in.
        pgid, _child = started(tmp_path)
        seen.extend(live_members(pgid))
        os.kill(os.getpid(), signal.SIGTERM)

    killer = threading.Thread(target=terminate_once_started)
    killer.start()
    result = cli_env(["export", "--listen", "127.0.0.1:0", "--interval", "0.1",
                      "--notify-command", SPAWN.format(d=tmp_path)],
                     no_config(fake_nvml_lib.env(throttling(tmp_path)), tmp_path))
    killer.join()
    assert result.returncode == 0, result.stderr
    pgid, _child = started(tmp_path, timeout=0)
    assert seen and live_members(pgid) == []
    assert "gputui: notify: command: 1 of 1 event not delivered (last error: still being " \
        "sent at exit)" in result.stderr


def test_closing_the_notifier_kills_a_command_that_ignores_sigterm(tmp_path: Path) -> None:
    sink = CommandSink(f"trap '' TERM; {SPAWN.format(d=tmp_path)}", grace_s=0.2)
    notifier = Notifier(EventTracker(), [sink])
    notifier.publish([EVENT])
    pgid, _child = started(tmp_path)
    stats = notifier.close(drain_s=0)
    assert live_members(pgid) == []
    assert stats[0].undelivered == 1


def test_a_command_that_leaves_a_child_is_delivered_and_its_child_ended(
        tmp_path: Path) -> None:
    # The shell exits 0 at once; what it left in its group gets the command's time
    # limit, then goes with it.
    sink = CommandSink(LEAVE.format(d=tmp_path), timeout_s=0.5, grace_s=0.2)
    sink.send(EVENT, threading.Event())
    pgid, _child = started(tmp_path)
    assert live_members(pgid) == []


def test_a_command_writing_200_mb_to_stderr_keeps_memory_bounded() -> None:
    me = psutil.Process()
    before = me.memory_info().rss
    peak = [before]
    done = threading.Event()

    def sample() -> None:
        while not done.wait(0.005):
            peak[0] = max(peak[0], me.memory_info().rss)

    sampler = threading.Thread(target=sample)
    sampler.start()
    try:
        with pytest.raises(DeliveryError) as err:
            CommandSink("head -c 200000000 /dev/zero >&2; printf '\\nthe last words\\n' >&2; "
                        "exit 4").send(EVENT, threading.Event())
    finally:
        done.set()
        sampler.join()
    # Reading it all held 645 MB; the end kept for the line is 4 KiB.
    assert peak[0] - before < 50 * 2**20, (before, peak[0])
    assert str(err.value) == "exit status 4: the last words"


def test_the_error_line_escapes_control_characters() -> None:
    with pytest.raises(DeliveryError) as err:
        CommandSink(r"printf 'bad \033]0;title\007 news\n' >&2; exit 1").send(
            EVENT, threading.Event())
    assert str(err.value) == r"exit status 1: bad \x1b]0;title\x07 news"
