"""`gputui snapshot` and `gputui watch` as a user runs them: the real CLI
(`gputui.cli.main`) in-process against the fake libnvidia-ml.so.1; a subprocess where the
process itself is the subject (a full disk at exit, Ctrl-C)."""

from __future__ import annotations

import csv
import json
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.cli import CliResult, CliRunner
from tests.fakenvml.harness import FakeNvml, FakeNvmlLib, scenario_path

GPUTUI = [sys.executable, "-m", "gputui"]
Gputui = Callable[..., CliResult]


@pytest.fixture
def gputui(fake_nvml: FakeNvml, cli: CliRunner, monkeypatch: pytest.MonkeyPatch) -> Gputui:
    """``gputui(args, scenario="two_gpus", env={"COLUMNS": "200"})``: the CLI in-process
    with the fake NVML on that scenario, its clock running from 0 as in a fresh process
    (an env value of None unsets the variable)."""

    def run_in_process(args: list[str], scenario: str | Path = "two_gpus",
                       env: dict[str, str | None] | None = None) -> CliResult:
        for key, value in (env or {}).items():
            if value is None:
                monkeypatch.delenv(key, raising=False)
            else:
                monkeypatch.setenv(key, value)
        fake_nvml.use(scenario, frozen_time=None)
        return cli(*args)

    return run_in_process


def test_snapshot_json_exact_values(gputui: Gputui) -> None:
    proc = gputui(["snapshot", "--json"])
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["nvml_error"] is None
    assert (doc["driver_version"], doc["cuda_driver_version"]) == ("550.54.15", "12.4")
    g0, g1 = doc["gpus"]
    assert g0["name"] == "NVIDIA A100-SXM4-80GB"
    assert g0["power_w"] == 312.0 and g0["power_limit_w"] == 400.0
    # The counter grows at power × time since the fake loaded (exact values: in-process tests).
    assert 123456.789 <= g0["energy_j"] <= 123456.789 + 312.0 * 60
    assert g0["pcie_rx_bps"] == 536870912.0 and g0["pcie_tx_bps"] == 134217728.0
    assert g0["temp_slowdown_c"] == 90 and g0["throttle_reasons"] == []
    assert g1["throttle_reasons"] == ["gpu_idle"] and g1["throttling"] is False
    pids = sorted(p["pid"] for p in doc["processes"])
    assert pids == [1999, 4242, 4343]


def test_snapshot_json_marks_throttling_in_words(gputui: Gputui, tmp_path: Path) -> None:
    from tests.fakenvml.harness import write_scenario

    sc = write_scenario(tmp_path / "t.conf", {"device_count": 1, "gpu.0.throttle_reasons": 0x44,
                                               "gpu.0.unsupported": ["fan"]})
    doc = json.loads(gputui(["snapshot", "--json"], sc).stdout)
    g = doc["gpus"][0]
    assert g["throttle_reasons"] == ["sw_power_cap", "hw_thermal_slowdown"]
    assert g["throttling"] is True and g["fan_pct"] is None


def test_snapshot_table_for_people(gputui: Gputui) -> None:
    proc = gputui(["snapshot"], "throttle", env={"COLUMNS": "200"})
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "NVIDIA A100-SXM4-80GB" in out and "00000000:3B:00.0" in out
    assert "Driver 550.54.15" in out and "CUDA 12.4" in out
    assert "380W / 400W" in out
    assert "GPU processes" in out and "5150" in out


def test_snapshot_piped_keeps_every_column(gputui: Gputui) -> None:
    out = gputui(["snapshot"], env={"COLUMNS": None}).stdout  # stdout is not a terminal
    for text in ("NVIDIA A100-SXM4-80GB", "NVIDIA GeForce RTX 4090", "00000000:3B:00.0",
                 "40960MiB / 81920MiB", "312W / 400W", "64°C (slowdown 90°C)", "P8",
                 "GPU idle"):
        assert text in out, text


def test_snapshot_in_an_80_column_terminal_loses_nothing(gputui: Gputui) -> None:
    out = gputui(["snapshot"], env={"COLUMNS": "80"}).stdout
    assert max(len(line) for line in out.splitlines()) <= 80
    for text in ("GPU 0 · NVIDIA A100-SXM4-80GB · 00000000:3B:00.0",
                 "GPU 1 · NVIDIA GeForce RTX 4090 · 00000000:AF:00.0",
                 "40960MiB / 81920MiB", "312W / 400W", "64°C (slowdown 90°C)",
                 "1410MHz / 1410MHz", "Gen4 x16", "512MiB/s", "GPU idle"):
        assert text in out, text


def test_snapshot_reports_time_throttled(gputui: Gputui, tmp_path: Path) -> None:
    from tests.fakenvml.harness import write_scenario

    sc = write_scenario(tmp_path / "hot.conf", {
        "device_count": 1, "gpu.0.throttle_from_s": 0,
        "gpu.0.during.throttle_reasons": 0x40, "gpu.0.during.temp_c": 91})
    g = json.loads(gputui(["snapshot", "--json"], sc).stdout)["gpus"][0]
    assert g["throttle_reasons"] == ["hw_thermal_slowdown"] and g["temp_c"] == 91
    assert g["violation_thermal_frac"] == pytest.approx(1.0, abs=1e-3)
    assert g["violation_power_frac"] == pytest.approx(0.0, abs=1e-3)


@pytest.mark.parametrize("args", [
    ["watch", "--count", "2", "--format", "csv", "--output", "/dev/full"],
    ["snapshot", "--json", "--stdout-to", "/dev/full"],
    ["watch", "--count", "1", "--stdout-to", "/dev/full"],
])
def test_a_full_disk_is_one_line_not_a_traceback(fake_nvml_lib: FakeNvmlLib,
                                                 args: list[str]) -> None:
    stdout = None
    if "--stdout-to" in args:
        i = args.index("--stdout-to")
        stdout = open(args[i + 1], "w")
        args = args[:i]
    try:
        proc = subprocess.run([*GPUTUI, *args], env=fake_nvml_lib.env(scenario_path("two_gpus")),
                              stdout=stdout or subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True, timeout=60)
    finally:
        if stdout is not None:
            stdout.close()
    assert proc.returncode == 1
    assert proc.stderr.strip().splitlines() == ["gputui: cannot write: No space left on device"]


def test_snapshot_without_nvml_shows_host_and_the_reason(no_nvml: object,
                                                          cli: CliRunner) -> None:
    proc = cli("snapshot")
    assert proc.returncode == 0
    assert "No GPU data: NVML library not found — is the NVIDIA driver installed?" in proc.stdout
    assert "Host" in proc.stdout
    doc = json.loads(cli("snapshot", "--json").stdout)
    assert doc["gpus"] == [] and doc["nvml_error"].startswith("NVML library not found")
    assert doc["host"]["mem_total_bytes"] > 0


def test_watch_csv_has_header_and_stable_columns(gputui: Gputui) -> None:
    proc = gputui(["watch", "--count", "2", "--interval", "0.2", "--format", "csv"])
    assert proc.returncode == 0, proc.stderr
    rows = list(csv.DictReader(proc.stdout.splitlines()))
    assert len(rows) == 4  # 2 ticks × 2 GPUs
    assert [r["gpu"] for r in rows] == ["0", "1", "0", "1"]
    assert rows[0]["power_w"] == "312.0" and rows[1]["throttle_reasons"] == "gpu_idle"
    assert rows[0]["fan_pct"] == "0" and float(rows[0]["energy_j"]) >= 123456.789


def test_watch_jsonl_to_a_file_appends(gputui: Gputui, tmp_path: Path) -> None:
    out = tmp_path / "log.jsonl"
    for _ in range(2):
        proc = gputui(["watch", "--count", "1", "--format", "jsonl", "--output", str(out)])
        assert proc.returncode == 0 and proc.stdout == ""
    lines = [json.loads(x) for x in out.read_text().splitlines()]
    assert len(lines) == 4 and lines[0]["name"] == "NVIDIA A100-SXM4-80GB"


def test_watch_csv_file_gets_one_header(gputui: Gputui, tmp_path: Path) -> None:
    out = tmp_path / "log.csv"
    for _ in range(2):
        gputui(["watch", "--count", "1", "--format", "csv", "--output", str(out)])
    text = out.read_text().splitlines()
    assert text[0].startswith("time,gpu,name") and sum(t.startswith("time,") for t in text) == 1


def test_watch_table_and_ctrl_c_exits_cleanly(fake_nvml_lib: FakeNvmlLib) -> None:
    proc = subprocess.Popen([*GPUTUI, "watch", "--interval", "0.2"],
                            env=fake_nvml_lib.env(scenario_path("two_gpus")),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    header = proc.stdout.readline()
    first = proc.stdout.readline()  # flushed per tick: readable while it runs
    assert "sm%" in header and first.split()[1] == "0"
    time.sleep(0.3)
    proc.send_signal(signal.SIGINT)
    _out, err = proc.communicate(timeout=20)
    assert proc.returncode == 0 and "Traceback" not in err


def test_watch_without_nvml_says_why_and_still_logs_host(no_nvml: object,
                                                        cli: CliRunner) -> None:
    proc = cli("watch", "--count", "1", "--format", "csv")
    assert proc.returncode == 0
    assert proc.stderr.strip() == ("gputui: no GPU data: NVML library not found — "
                                   "is the NVIDIA driver installed?")
    rows = list(csv.DictReader(proc.stdout.splitlines()))
    assert len(rows) == 1 and rows[0]["gpu"] == "" and rows[0]["host_mem_used_bytes"]


@pytest.mark.parametrize("args", [
    ["watch", "--interval", "0"],
    ["watch", "--interval", "-1"],
    ["watch", "--interval", "fast"],
    ["watch", "--interval", "0.01"],
    ["watch", "--count", "0"],
    ["watch", "--format", "xml"],
    ["watch", "--output", "/nonexistent-dir/x.csv", "--count", "1"],
    ["frobnicate"],
    ["snapshot", "--bogus"],
])
def test_bad_input_is_one_line_exit_2(args: list[str], no_nvml: object,
                                     cli: CliRunner) -> None:
    proc = cli(*args)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("gputui: "), proc.stderr
    assert "Traceback" not in proc.stderr


def test_version_and_help(cli: CliRunner) -> None:
    assert cli("--version").stdout.startswith("gputui ")
    helptext = cli("--help").stdout
    for cmd in ("snapshot", "watch", "replay", "bench", "export", "fleet", "doctor"):
        assert cmd in helptext


def test_each_command_gets_its_own_options_whatever_comes_before_it(cli: CliRunner) -> None:
    # Only the commands named on the line get their arguments; one named earlier as an
    # option's value (a theme called "watch") must not leave the real one without them.
    out = " ".join(cli("--help").stdout.split())
    assert "watch stream one row per GPU per tick" in out
    assert "--count N" in cli("watch", "--help").stdout
    assert "--json" in cli("snapshot", "--help").stdout
    proc = cli("--theme", "watch", "snapshot", "--nope")
    assert proc.returncode == 2
    assert proc.stderr.strip() == ("gputui: unrecognized arguments: --nope "
                                   "(see 'gputui --help')")
    proc = cli("frobnicate")
    assert proc.returncode == 2 and "invalid choice: 'frobnicate'" in proc.stderr
    assert "'doctor'" in proc.stderr  # the choices are listed


def test_watch_jsonl_rows_carry_the_gpus_processes_and_energy(gputui: Gputui) -> None:
    proc = gputui(["watch", "--count", "3", "--interval", "0.2", "--format", "jsonl"])
    assert proc.returncode == 0, proc.stderr
    rows = [json.loads(x) for x in proc.stdout.splitlines()]
    last0 = [r for r in rows if r["gpu"] == 0][-1]
    assert last0["energy_seen_j"] is not None and last0["energy_seen_j"] >= 0
    pids = sorted(p["pid"] for p in last0["processes"])
    assert pids and all(p["gpu"] == 0 for p in last0["processes"])
    for p in last0["processes"]:
        assert {"pod", "namespace", "container", "container_id", "qos", "power_w",
                "energy_j", "energy_method", "energy_estimate"} <= set(p)
    # The fake's processes are on no pod: no GPU-level pod label.
    assert last0["pod"] is None and last0["namespace"] is None
