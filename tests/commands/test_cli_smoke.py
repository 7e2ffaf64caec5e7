"""One real `python -m gputui …` process per command: what only a fresh process shows — the
exit status as the shell sees it, the fake NVML found through LD_LIBRARY_PATH like the real
driver library, and what each command imports (never torch; textual only for the TUI).
Behaviour is tested in-process elsewhere (tests/cli.py)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.fakenvml.harness import FakeNvmlLib, scenario_path


def _imported(importtime_stderr: str) -> set[str]:
    """Top-level packages named in `python -X importtime`'s report."""
    names = set()
    for line in importtime_stderr.splitlines():
        if line.startswith("import time:") and "|" in line:
            names.add(line.rsplit("|", 1)[1].strip().split(".")[0])
    return names


def _gputui(args: list[str], env: dict[str, str]) -> tuple[subprocess.CompletedProcess[str],
                                                           set[str]]:
    proc = subprocess.run([sys.executable, "-X", "importtime", "-m", "gputui", *args], env=env,
                          capture_output=True, text=True, timeout=120)
    imported = _imported(proc.stderr)
    proc.stderr = "\n".join(line for line in proc.stderr.splitlines()
                            if not line.startswith("import time:"))
    return proc, imported


@pytest.fixture
def env(fake_nvml_lib: FakeNvmlLib, tmp_path: Path) -> dict[str, str]:
    env = fake_nvml_lib.env(scenario_path("two_gpus"))
    env["GPUTUI_DATA_DIR"] = str(tmp_path / "data")
    env["GPUTUI_CONFIG_DIR"] = str(tmp_path / "config")
    return env


def test_snapshot(env: dict[str, str]) -> None:
    proc, imported = _gputui(["snapshot", "--json"], env)
    assert proc.returncode == 0, proc.stderr
    assert [g["name"] for g in json.loads(proc.stdout)["gpus"]] == [
        "NVIDIA A100-SXM4-80GB", "NVIDIA GeForce RTX 4090"]
    assert "pynvml" in imported and not imported & {"torch", "textual"}


def test_watch(env: dict[str, str]) -> None:
    proc, imported = _gputui(["watch", "--count", "1", "--format", "csv"], env)
    assert proc.returncode == 0, proc.stderr
    assert len(proc.stdout.splitlines()) == 3  # header + one row per GPU
    assert not imported & {"torch", "textual"}


def test_replay(env: dict[str, str], tmp_path: Path) -> None:
    proc, _ = _gputui(["replay", str(tmp_path / "missing.jsonl")], env)
    assert proc.returncode == 2
    assert proc.stderr.startswith("gputui: ") and proc.stderr.count("\n") == 0


def test_monitor_rejects_an_unknown_theme(env: dict[str, str]) -> None:
    proc, imported = _gputui(["--theme", "no-such-theme"], env)
    assert proc.returncode == 2 and proc.stderr.startswith("gputui: unknown theme")
    assert "torch" not in imported


def test_bench(env: dict[str, str]) -> None:
    proc, imported = _gputui(["bench", "list", "--json"], env)
    assert proc.returncode == 0, proc.stderr
    assert "cnn-train" in {b["name"] for b in json.loads(proc.stdout)}
    assert not imported & {"torch", "textual"}
    proc, _ = _gputui(["bench", "show", "20990101-000000-000-abcdef"], env)
    assert proc.returncode == 2 and proc.stderr.startswith("gputui: no result with id")


def test_doctor(fake_nvml_lib: FakeNvmlLib, env: dict[str, str]) -> None:
    env = {**env, **fake_nvml_lib.env(scenario_path("doctor_clean"))}
    proc, imported = _gputui(["doctor", "--quick"], env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.splitlines()[-1].startswith("doctor: PASS")
    assert "torch" not in imported


def test_export_and_fleet_bad_usage(env: dict[str, str]) -> None:
    proc, _ = _gputui(["export", "--listen", "not-an-address:x"], env)
    assert proc.returncode == 2 and proc.stderr.startswith("gputui: ")
    proc, _ = _gputui(["fleet", "--once", "nohost"], env)
    assert proc.returncode == 2 and proc.stderr.startswith("gputui: ")


def test_version(env: dict[str, str]) -> None:
    proc, imported = _gputui(["--version"], env)
    assert proc.returncode == 0 and proc.stdout.startswith("gputui ")
    assert not imported & {"torch", "textual", "pynvml"}
