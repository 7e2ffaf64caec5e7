"""A GPU whose driver calls hang forever, or answer slowly: the other GPUs go on, the
stale one is marked stale, and every command still ends on Ctrl-C/SIGTERM.

Real subprocesses of the CLI against the fake libnvidia-ml.so.1 (scenario keys
`gpu.N.hang_from_s`, `gpu.N.call_delay_ms`). Waits are bounded; nothing asserts a
duration.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path
from typing import IO

import psutil
import pytest

from tests.fakenvml.harness import FakeNvmlLib, derive_scenario

GPUTUI = [sys.executable, "-m", "gputui"]
BOUND_S = 60.0  # generous upper bound for any wait; a hang fails the test, not CI


def start(args: list[str], env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen([*GPUTUI, *args], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


class Lines:
    """stdout lines of a running process, read on a thread (never blocking the test)."""

    def __init__(self, stream: IO[str]) -> None:
        self.lines: list[str] = []
        self._cond = threading.Condition()
        threading.Thread(target=self._read, args=(stream,), daemon=True).start()

    def _read(self, stream: IO[str]) -> None:
        for line in stream:
            with self._cond:
                self.lines.append(line)
                self._cond.notify_all()

    def wait_for(self, pred: object, timeout: float = BOUND_S) -> list[str]:
        deadline = time.monotonic() + timeout
        with self._cond:
            while not pred(self.lines):  # type: ignore[operator]
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError("gave up waiting; got:\n" + "".join(self.lines[-20:]))
                self._cond.wait(left)
            return list(self.lines)


def rows(lines: list[str]) -> list[dict[str, object]]:
    return [json.loads(line) for line in lines if line.startswith("{")]


def test_snapshot_reports_a_gpu_hung_while_opening_and_shows_the_other(
        fake_nvml_lib: FakeNvmlLib, tmp_path: Path) -> None:
    sc = derive_scenario("two_gpus", {"gpu.0.hang_from_s": 0}, tmp_path / "hung.conf")
    proc = subprocess.run([*GPUTUI, "snapshot", "--json"], env=fake_nvml_lib.env(sc),
                          capture_output=True, text=True, timeout=BOUND_S)
    assert proc.returncode == 0, proc.stderr
    g0, g1 = json.loads(proc.stdout)["gpus"]
    assert g0["stale"] is True and g0["stale_s"] > 0 and g0["util_gpu_pct"] is None
    assert g0["error"] == "not answering"
    assert g1["stale"] is False and g1["name"] == "NVIDIA GeForce RTX 4090"
    assert g1["power_w"] == 32.0 and g1["temp_c"] == 38


def test_snapshot_text_marks_the_hung_gpu(fake_nvml_lib: FakeNvmlLib, tmp_path: Path) -> None:
    sc = derive_scenario("two_gpus", {"gpu.0.hang_from_s": 0}, tmp_path / "hung.conf")
    env = fake_nvml_lib.env(sc)
    env["COLUMNS"] = "200"
    proc = subprocess.run([*GPUTUI, "snapshot"], env=env, capture_output=True, text=True,
                          timeout=BOUND_S)
    assert proc.returncode == 0, proc.stderr
    assert "driver call hung" in proc.stdout and "32W / 450W" in proc.stdout


@pytest.mark.parametrize("sig, code", [(signal.SIGINT, 130), (signal.SIGTERM, -signal.SIGTERM)])
def test_snapshot_ends_on_a_signal_while_a_gpu_hangs(fake_nvml_lib: FakeNvmlLib,
                                                    tmp_path: Path, sig: int,
                                                    code: int) -> None:
    # Every GPU hangs: the reading would wait its whole deadline; the signal ends it.
    sc = derive_scenario("two_gpus", {"gpu.0.hang_from_s": 0, "gpu.1.hang_from_s": 0},
                         tmp_path / "hung.conf")
    proc = start(["snapshot", "--json"], fake_nvml_lib.env(sc))
    # Inside the reading (the deadline is 2 s per read, two reads): gputui's first thread
    # exists. A fixed sleep could signal a slow-starting interpreter before it handles SIGINT.
    deadline = time.monotonic() + BOUND_S
    while psutil.Process(proc.pid).num_threads() < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    proc.send_signal(sig)
    _out, err = proc.communicate(timeout=BOUND_S)
    assert proc.returncode == code, err
    assert "Traceback" not in err


def test_watch_goes_on_for_the_healthy_gpu_and_ends_on_ctrl_c(fake_nvml_lib: FakeNvmlLib,
                                                             tmp_path: Path) -> None:
    # GPU 0 answers for its first second, then every call hangs for good.
    sc = derive_scenario("two_gpus", {"gpu.0.hang_from_s": 1}, tmp_path / "hung.conf")
    proc = start(["watch", "--interval", "0.2", "--format", "jsonl"], fake_nvml_lib.env(sc))
    try:
        out = Lines(proc.stdout)  # type: ignore[arg-type]

        def enough(lines: list[str]) -> bool:
            r = rows(lines)
            stale0 = [x for x in r if x["gpu"] == 0 and x["stale"]]
            if not stale0:
                return False
            after = [x for x in r if x["gpu"] == 1 and x["time"] > stale0[0]["time"]]
            return len(after) >= 5

        r = rows(out.wait_for(enough))
        stale0 = [x for x in r if x["gpu"] == 0 and x["stale"]]
        fresh0 = [x for x in r if x["gpu"] == 0 and not x["stale"]]
        assert fresh0 and fresh0[-1]["util_gpu_pct"] == 87  # its values before the hang
        assert stale0[-1]["util_gpu_pct"] == 87 and stale0[-1]["stale_s"] > 0  # kept, marked
        gpu1 = [x for x in r if x["gpu"] == 1]
        assert all(not x["stale"] for x in gpu1)  # the healthy GPU is never held up
        times = [x["time"] for x in gpu1]
        assert times == sorted(set(times))  # a new reading every tick, none repeated
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=BOUND_S)
        assert proc.returncode == 0
        assert "Traceback" not in proc.stderr.read()  # type: ignore[union-attr]
    finally:
        if proc.poll() is None:
            proc.kill()


def test_a_slow_gpu_does_not_slow_the_others_or_the_first_row(fake_nvml_lib: FakeNvmlLib,
                                                              tmp_path: Path) -> None:
    # 200 ms per call: opening and one reading of GPU 0 take seconds.
    sc = derive_scenario("two_gpus", {"gpu.0.call_delay_ms": 200}, tmp_path / "slow.conf")
    proc = subprocess.run([*GPUTUI, "watch", "--interval", "0.5", "--count", "4",
                           "--format", "jsonl"], env=fake_nvml_lib.env(sc),
                          capture_output=True, text=True, timeout=BOUND_S)
    assert proc.returncode == 0, proc.stderr
    r = rows(proc.stdout.splitlines())
    assert [x["gpu"] for x in r] == [0, 1] * 4
    gpu1 = [x for x in r if x["gpu"] == 1]
    assert all(not x["stale"] and x["power_w"] == 32.0 for x in gpu1)
    # The first row did not wait for the slow GPU: it is there, marked not answering.
    assert r[0]["stale"] is True and r[0]["util_gpu_pct"] is None


def test_export_hung_at_start_answers_and_ends_on_sigterm(fake_nvml_lib: FakeNvmlLib,
                                                          tmp_path: Path) -> None:
    sc = derive_scenario("two_gpus", {"gpu.0.hang_from_s": 0}, tmp_path / "hung.conf")
    proc = start(["export", "--listen", "127.0.0.1:0", "--interval", "0.2"],
                 fake_nvml_lib.env(sc))
    try:
        out = Lines(proc.stdout)  # type: ignore[arg-type]
        line = out.wait_for(lambda ls: any("serving metrics on" in x for x in ls))
        url = next(x for x in line if "serving metrics on" in x).split(" on ", 1)[1].strip()
        body = ""
        deadline = time.monotonic() + BOUND_S
        while "RTX 4090" not in body and time.monotonic() < deadline:
            with urllib.request.urlopen(url, timeout=10) as resp:
                assert resp.status == 200
                body = resp.read().decode()
            time.sleep(0.1)
        assert "RTX 4090" in body  # the healthy GPU is exported
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=BOUND_S)
        assert proc.returncode == 0
    finally:
        if proc.poll() is None:
            proc.kill()


def test_fake_hang_key_blocks_only_that_device(fake_nvml_lib: FakeNvmlLib,
                                              tmp_path: Path) -> None:
    """The fake itself: a hung device's call never returns, the other device's do."""
    sc = derive_scenario("two_gpus", {"gpu.0.hang_from_s": 0}, tmp_path / "hung.conf")
    code = (
        "import threading, pynvml\n"
        "pynvml.nvmlInit()\n"
        "done = threading.Event()\n"
        "def hang():\n"
        "    pynvml.nvmlDeviceGetHandleByIndex(0); done.set()\n"
        "threading.Thread(target=hang, daemon=True).start()\n"
        "h = pynvml.nvmlDeviceGetHandleByIndex(1)\n"
        "print(pynvml.nvmlDeviceGetName(h), done.wait(1.0))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], env=fake_nvml_lib.env(sc),
                          capture_output=True,
                          text=True, timeout=BOUND_S)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["NVIDIA", "GeForce", "RTX", "4090", "False"]
