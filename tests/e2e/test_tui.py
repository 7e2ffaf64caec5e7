"""The real `gputui` in a real terminal (tmux) against the fake NVML library."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.e2e.tmux import TmuxSession, gputui_command
from tests.fakenvml.harness import FakeNvmlLib, scenario_path

pytestmark = pytest.mark.e2e

Start = Callable[..., TmuxSession]


def test_shows_both_gpus(tui: Start, fake_nvml_lib: FakeNvmlLib,
                         isolated_env: dict[str, str]) -> None:
    env = fake_nvml_lib.env(scenario_path("two_gpus"), base=isolated_env)
    session = tui(env)
    screen = session.wait_for(["NVIDIA A100-SXM4-80GB", "NVIDIA GeForce RTX 4090"],
                              timeout=30)
    assert "Traceback" not in screen


def test_throttle_alert_appears(tui: Start, fake_nvml_lib: FakeNvmlLib,
                                isolated_env: dict[str, str]) -> None:
    # throttle.conf: GPU 0 is in HW thermal slowdown from second 3 to second 8 of the
    # fake library's clock, which starts when gputui loads it.
    # "HW thermal slowdown" alone would prove nothing: the panel's throttle line names
    # the reason whether or not an alert was raised. Wait for the alert itself: the
    # toast (titled "GPU alert", saying which GPU) and the header's count.
    env = fake_nvml_lib.env(scenario_path("throttle"), base=isolated_env)
    session = tui(env)
    screen = session.wait_for(["NVIDIA A100-SXM4-80GB", "✓ no alerts"], timeout=30)
    assert "GPU alert" not in screen
    screen = wait_for_match(session, ALERT_COUNT, timeout=12)
    session.wait_for(["GPU alert", "GPU 0: HW thermal slowdown"], timeout=5)


ALERT_COUNT = re.compile(r"⚠ [1-9]\d* alerts?\b")


def wait_for_match(session: TmuxSession, pattern: re.Pattern[str], timeout: float) -> str:
    """Poll the screen until `pattern` matches (bounded; no timing assertion)."""
    deadline = time.monotonic() + timeout
    screen = ""
    while time.monotonic() < deadline:
        screen = session.capture()
        if pattern.search(screen):
            return screen
        time.sleep(0.05)
    raise AssertionError(f"{pattern.pattern!r} not on screen after {timeout} s:\n{screen}")


def test_q_quits(tui: Start, fake_nvml_lib: FakeNvmlLib,
                 isolated_env: dict[str, str]) -> None:
    env = fake_nvml_lib.env(scenario_path("two_gpus"), base=isolated_env)
    session = tui(env)
    session.wait_for("NVIDIA A100-SXM4-80GB", timeout=30)
    session.send_keys("q")
    assert session.wait_exit(timeout=20) == 0


def test_ctrl_c_quits(tui: Start, fake_nvml_lib: FakeNvmlLib,
                      isolated_env: dict[str, str]) -> None:
    """As in top, htop, nvtop and nvitop: no "press ctrl+q" hint, the monitor ends."""
    env = fake_nvml_lib.env(scenario_path("two_gpus"), base=isolated_env)
    session = tui(env)
    session.wait_for("NVIDIA A100-SXM4-80GB", timeout=30)
    session.send_keys("C-c")
    assert session.wait_exit(timeout=20) == 0


def test_without_nvml_shows_the_reason(tui: Start, isolated_env: dict[str, str]) -> None:
    # No fake library on LD_LIBRARY_PATH and no driver here: host-only monitor.
    session = tui(isolated_env, unset=("LD_LIBRARY_PATH", "FAKENVML_SCENARIO"))
    screen = session.wait_for("NVML library not found", timeout=30)
    assert "Traceback" not in screen
    session.send_keys("q")
    assert session.wait_exit(timeout=20) == 0


def test_replay_plays_a_recording(tui: Start, isolated_env: dict[str, str],
                                  tmp_path: Path) -> None:
    from gputui.telemetry.record import Recorder
    from tests.factories import gpu, snapshot

    path = tmp_path / "run.jsonl"
    rec = Recorder(path, interval=1.0)
    for i in range(30):
        rec.write(snapshot(i, [gpu(0, throttle_mask=0x40 if 2 <= i < 20 else 0, temp_c=88)]))
    rec.close()
    with path.open("a") as fh:
        fh.write('{"time": "20')  # a crash mid-line: warned about, not fatal
    session = tui(isolated_env, "replay", str(path), "--speed", "4",
                  unset=("LD_LIBRARY_PATH", "FAKENVML_SCENARIO"))
    session.wait_for("NVIDIA A100-SXM4-80GB #0", timeout=30)
    session.wait_for("HW thermal slowdown", timeout=15)
    session.send_keys("q")
    assert session.wait_exit(timeout=20) == 0


def _gputui_pid(session: TmuxSession) -> int:
    """The gputui process in the pane (the pane's process is the `sh` status wrapper)."""
    import psutil

    pane_pid = int(session.tmux("list-panes", "-t", session.name, "-F",
                                "#{pane_pid}").split()[0])
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        for child in psutil.Process(pane_pid).children(recursive=True):
            if any("gputui" in part for part in child.cmdline()[:2]):
                return child.pid
        time.sleep(0.05)
    raise AssertionError(f"no gputui process under pane pid {pane_pid}")


def _wait_gone(pid: int, timeout: float) -> bool:
    import psutil

    try:
        proc = psutil.Process(pid)
        proc.wait(timeout)
    except psutil.NoSuchProcess:
        return True
    except psutil.TimeoutExpired:
        return False
    return True


def _kill_leftover(pid: int) -> None:
    import psutil

    with contextlib.suppress(psutil.NoSuchProcess):
        psutil.Process(pid).kill()


@pytest.mark.parametrize("how", ["kill-server", "sigkill-server", "sigkill-no-sighup"])
def test_gputui_exits_when_its_terminal_goes_away(fake_nvml_lib: FakeNvmlLib,
                                                  isolated_env: dict[str, str],
                                                  how: str) -> None:
    """An SSH drop or a killed tmux must not leave gputui running (orphans spun at 23 % CPU).

    kill-server: tmux sends SIGHUP to the pane's processes. SIGKILL to the server: the
    pty's master side just closes (the kernel still hangs up the pane's process group).
    sigkill-no-sighup: the same with SIGHUP ignored, so only the dead tty tells (reads
    give EOF, tcgetattr EIO): gputui's terminal watcher must notice.
    """
    import psutil

    env = fake_nvml_lib.env(scenario_path("two_gpus"), base=isolated_env)
    command = gputui_command()
    if how == "sigkill-no-sighup":
        command = [sys.executable, str(Path(__file__).with_name("gputui_ignoring_sighup.py"))]
    session = TmuxSession(command, env=env, width=120, height=40)
    pid = None
    try:
        session.start()
        session.wait_for("NVIDIA A100-SXM4-80GB", timeout=30)
        pid = _gputui_pid(session)
        if how == "kill-server":
            session.tmux("kill-server")
        else:
            server = int(session.tmux("display-message", "-p", "#{pid}").strip())
            os.kill(server, signal.SIGKILL)
        gone = _wait_gone(pid, timeout=10)
        status = "gone" if gone else psutil.Process(pid).status()
        assert gone, f"gputui (pid {pid}) still running ({status}) 10 s after tmux {how}"
    finally:
        if pid is not None:
            _kill_leftover(pid)
        session.close()


def test_sigterm_exits_cleanly_and_restores_the_terminal(request: pytest.FixtureRequest,
                                                         fake_nvml_lib: FakeNvmlLib,
                                                         isolated_env: dict[str, str]) -> None:
    env = fake_nvml_lib.env(scenario_path("two_gpus"), base=isolated_env)
    session = TmuxSession(gputui_command(), env=env, width=120, height=40, linger=True)
    request.addfinalizer(session.close)
    session.start()
    session.wait_for("NVIDIA A100-SXM4-80GB", timeout=30)
    # While it runs the terminal really is taken over: the check below can fail.
    assert session.terminal_modes() == {"alternate_on": 1, "mouse_any_flag": 1,
                                        "cursor_flag": 0}
    pid = session.pid
    assert pid is not None
    os.kill(pid, signal.SIGTERM)
    assert session.wait_exit(timeout=20) == 143  # 128 + SIGTERM, documented
    assert session.terminal_modes() == {"alternate_on": 0, "mouse_any_flag": 0,
                                        "cursor_flag": 1}
    assert "Traceback" not in session.capture()


def test_a_hung_gpu_is_shown_stale_and_the_rest_goes_on(tui: Start, fake_nvml_lib: FakeNvmlLib,
                                                       isolated_env: dict[str, str],
                                                       tmp_path: Path) -> None:
    from tests.fakenvml.harness import derive_scenario

    # GPU 0 answers for two seconds, then every driver call of it hangs for good.
    sc = derive_scenario("two_gpus", {"gpu.0.hang_from_s": 2}, tmp_path / "hung.conf")
    session = tui(fake_nvml_lib.env(sc, base=isolated_env), "--interval", "0.5")
    session.wait_for(["NVIDIA A100-SXM4-80GB", "every 0.5s"], timeout=30)
    screen = session.wait_for(["STALE: not answering", "1 GPU stale"], timeout=30)
    assert "✓ no alerts" not in screen
    # The hung GPU's values are kept (marked stale), the other GPU's panel is there.
    assert "NVIDIA GeForce RTX 4090" in screen
    clock = re.compile(r"\d\d:\d\d:\d\d  every 0\.5s")
    first = clock.search(screen)
    assert first is not None
    # The header clock still moves: the monitor is not frozen behind the hung GPU.
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        now = clock.search(session.capture())
        if now is not None and now.group() != first.group():
            break
        time.sleep(0.1)
    else:
        raise AssertionError("the header clock stopped: " + session.capture())
    # And the alert (after its grace time) says which GPU and why.
    session.wait_for("GPU 0: not answering", timeout=20)
    session.send_keys("q")
    assert session.wait_exit(timeout=20) == 0


HOSTILE = "\x1b]2;pwned\x07\x1b[2J"


def test_hostile_process_argv_is_shown_escaped(tui: Start, fake_nvml_lib: FakeNvmlLib,
                                               isolated_env: dict[str, str],
                                               tmp_path: Path) -> None:
    import subprocess

    from tests.fakenvml.harness import derive_scenario

    # A real local process whose argv carries an OSC title change and a clear-screen.
    victim = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)",
                               HOSTILE])
    try:
        sc = derive_scenario("two_gpus", {"gpu.0.processes": f"{victim.pid}:1073741824"},
                             tmp_path / "hostile.conf")
        session = tui(fake_nvml_lib.env(sc, base=isolated_env), width=250)
        screen = session.wait_for(["NVIDIA A100-SXM4-80GB", str(victim.pid)], timeout=30)
        screen = session.wait_for("\\x1b]2;pwned\\x07", timeout=15)
        title = session.tmux("display-message", "-p", "-t", session.name,
                             "#{pane_title}").strip()
        assert "pwned" not in title
        assert "NVIDIA GeForce RTX 4090" in screen  # nothing was cleared
        session.send_keys("q")
        assert session.wait_exit(timeout=20) == 0
        # `gputui snapshot` (text) shows the same command escaped, never raw.
        env = fake_nvml_lib.env(sc, base=isolated_env)
        env["COLUMNS"] = "250"
        out = subprocess.run([*gputui_command(), "snapshot"], env=env, capture_output=True,
                             text=True, timeout=60)
        assert out.returncode == 0, out.stderr
        assert "\x1b" not in out.stdout and "\\x1b]2;pwned\\x07" in out.stdout
    finally:
        victim.kill()
        victim.wait()
