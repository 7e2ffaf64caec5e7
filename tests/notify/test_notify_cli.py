"""`gputui watch` with notifications, as a user runs it: the real CLI in a subprocess
against the fake libnvidia-ml.so.1, local webhook receivers and a command sink."""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
from datetime import datetime
from pathlib import Path

from tests.fakenvml.harness import FakeNvmlLib, derive_scenario
from tests.notify.conftest import Receiver, Silent, clean_env

GPUTUI = [sys.executable, "-m", "gputui"]
SW_POWER = 0x4
LOG_CMD = 'cat >> {out}; echo "$GPUTUI_EVENT $GPUTUI_KIND $GPUTUI_GPU" >> {out}.env'


def watch(lib: FakeNvmlLib, scenario: Path, *args: str, env: dict[str, str] | None = None,
          timeout: float = 120) -> subprocess.CompletedProcess[str]:
    base = clean_env(lib.env(scenario))
    base.pop("GPUTUI_CONFIG", None)
    base["XDG_CONFIG_HOME"] = str(scenario.parent / "no-config")
    base.update(env or {})
    return subprocess.run([*GPUTUI, "watch", "--format", "jsonl", *args], env=base,
                          capture_output=True, text=True, timeout=timeout)


def events_of(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def test_one_gpu_throttles_one_pair_per_sink_and_failures_counted(
        fake_nvml_lib: FakeNvmlLib, tmp_path: Path, receiver: Receiver, failing: Receiver,
        silent: Silent) -> None:
    # GPU 0 is held at its power cap from second 1 for 1.5 s; GPU 1 never throttles.
    scenario = derive_scenario("two_gpus", {
        "gpu.0.throttle_from_s": 1.0, "gpu.0.throttle_until_s": 2.5,
        "gpu.0.during.throttle_reasons": SW_POWER, "gpu.0.during.clock_sm_mhz": 1200,
    }, tmp_path / "throttle.conf")
    out = tmp_path / "events.jsonl"
    proc = watch(fake_nvml_lib, scenario, "--interval", "0.2", "--count", "25",
                 "--notify-webhook", receiver.url("/services/T1/B2/secret-one"),
                 "--notify-webhook", silent.url("/services/T1/B2/secret-two"),
                 "--notify-webhook", failing.url("/services/T1/B2/secret-three"),
                 "--notify-command", LOG_CMD.format(out=out))
    assert proc.returncode == 0, proc.stderr
    # Every row, on time: a webhook that never answers (5 s timeout) held up no tick.
    rows = [json.loads(line) for line in proc.stdout.splitlines()]
    assert len(rows) == 50
    times = sorted({datetime.fromisoformat(str(r["time"]).replace("Z", "+00:00"))
                    for r in rows})
    assert max((b - a).total_seconds() for a, b in itertools.pairwise(times)) < 4.0
    # Exactly one started and one ended, for GPU 0, the same at every sink that answered.
    got = receiver.wait_for(2)
    assert [(e["event"], e["kind"], e["gpu"]) for e in got] == [
        ("started", "throttle", 0), ("ended", "throttle", 0)]
    assert got[0]["reasons"] == ["sw_power_cap"]
    assert got[0]["text"].startswith("GPU 0: SW power cap, SM clock 1410→1200 MHz")
    assert got[1]["duration_s"] > 0 and got[1]["started"] == got[0]["started"]
    assert events_of(out) == got
    assert Path(f"{out}.env").read_text() == "started throttle 0\nended throttle 0\n"
    # The server error was retried; both events are counted as not delivered, in one line
    # per sink, naming the host only.
    assert len(failing.bodies) >= 3
    lines = proc.stderr.strip().splitlines()
    summary = [x for x in lines if x.startswith("gputui: notify: ")]
    assert sorted(summary) == sorted([
        f"gputui: notify: webhook 127.0.0.1:{silent.port}: 2 of 2 events not delivered "
        "(last error: still being sent at exit)",
        f"gputui: notify: webhook 127.0.0.1:{failing.port}: 2 of 2 events not delivered "
        "(last error: HTTP 500)",
    ]), proc.stderr
    assert "secret" not in proc.stderr and "Traceback" not in proc.stderr


def test_min_duration_keeps_a_short_throttle_quiet(fake_nvml_lib: FakeNvmlLib,
                                                   tmp_path: Path) -> None:
    scenario = derive_scenario("two_gpus", {
        "gpu.0.throttle_from_s": 0.5, "gpu.0.throttle_until_s": 1.5,
        "gpu.0.during.throttle_reasons": SW_POWER,
        "gpu.1.throttle_from_s": 0.5, "gpu.1.throttle_until_s": 4.0,
        "gpu.1.during.throttle_reasons": SW_POWER,
    }, tmp_path / "blips.conf")
    out = tmp_path / "events.jsonl"
    proc = watch(fake_nvml_lib, scenario, "--interval", "0.2", "--count", "25",
                 "--notify-min-duration", "2", "--notify-command", LOG_CMD.format(out=out))
    assert proc.returncode == 0, proc.stderr
    got = events_of(out)
    assert [(e["event"], e["kind"], e["gpu"]) for e in got] == [
        ("started", "throttle", 1), ("ended", "throttle", 1)]
    started = datetime.fromisoformat(str(got[0]["started"]).replace("Z", "+00:00"))
    sent = datetime.fromisoformat(str(got[0]["time"]).replace("Z", "+00:00"))
    assert (sent - started).total_seconds() >= 2.0


def test_xid_and_a_lost_gpu(fake_nvml_lib: FakeNvmlLib, tmp_path: Path) -> None:
    scenario = derive_scenario("two_gpus", {
        "gpu.0.xid": 79, "gpu.0.xid_at_s": 1.0, "gpu.1.lost_from_s": 1.5,
    }, tmp_path / "faults.conf")
    out = tmp_path / "events.jsonl"
    proc = watch(fake_nvml_lib, scenario, "--interval", "0.2", "--count", "20",
                 "--notify-command", LOG_CMD.format(out=out),
                 "--notify-kinds", "xid,lost")
    assert proc.returncode == 0, proc.stderr
    got = sorted(events_of(out), key=lambda e: str(e["kind"]))
    assert [(e["event"], e["kind"], e["gpu"]) for e in got] == [
        ("started", "lost", 1), ("occurred", "xid", 0)]
    lost, xid = got
    assert lost["uuid"] == "GPU-66666666-7777-8888-9999-000000000000"
    assert xid["values"]["xid"] == 79 and xid["severity"] == "error"
    assert str(xid["text"]).startswith("GPU 0: XID 79: ")


def test_bad_notify_flags_are_one_line_exit_2_without_the_url(
        fake_nvml_lib: FakeNvmlLib, tmp_path: Path) -> None:
    scenario = derive_scenario("two_gpus", {}, tmp_path / "s.conf")
    for args in (["--notify-webhook", "ftp://hooks.example/services/SECRETPATH"],
                 ["--notify-kinds", "throttle,bogus"],
                 ["--notify-min-duration", "-1"]):
        proc = watch(fake_nvml_lib, scenario, "--count", "1", *args)
        assert proc.returncode == 2, args
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("gputui: "), proc.stderr
        assert "SECRETPATH" not in proc.stderr
