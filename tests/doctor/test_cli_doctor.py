"""`gputui doctor --quick` as an admission script runs it: the real CLI (in-process, and in a
subprocess for Ctrl-C) against the fake libnvidia-ml.so.1, in text, JSON and JUnit."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.cli import CliResult
from tests.doctor.expected import CLEAN, FAULTS
from tests.fakenvml.harness import FakeNvmlLib, scenario_path

GPUTUI = [sys.executable, "-m", "gputui"]
LINE = re.compile(r"^(box|GPU (\d+))\s+(\w+)\s+(PASS|WARN|FAIL|SKIP)\b")


Run = Callable[..., CliResult]


@pytest.fixture
def run(cli_env: Run) -> Run:
    """``run(args, env)``: `gputui doctor *args` in-process, as a subprocess with that
    environment would run it."""

    def doctor(args: list[str], env: dict[str, str]) -> CliResult:
        return cli_env(["doctor", *args], env)

    return doctor


def text_statuses(stdout: str) -> dict[tuple[int | None, str], str]:
    out: dict[tuple[int | None, str], str] = {}
    for line in stdout.splitlines():
        m = LINE.match(line)
        if m:
            gpu = None if m.group(1) == "box" else int(m.group(2))
            out[(gpu, m.group(3))] = m.group(4).lower()
    return out


def json_statuses(doc: dict) -> dict[tuple[int | None, str], str]:
    return {(c["gpu"], c["id"]): c["status"] for c in doc["checks"]}


def junit_statuses(path: Path) -> dict[tuple[int | None, str], str]:
    out: dict[tuple[int | None, str], str] = {}
    for case in ET.parse(path).getroot().iter("testcase"):
        cls = case.get("classname")
        gpu = None if cls == "box" else int(cls.removeprefix("GPU"))
        if case.find("failure") is not None:
            status = case.find("failure").get("type")
        elif case.find("skipped") is not None:
            status = "skip"
        elif case.find("system-out") is not None:
            status = "warn"
        else:
            status = "pass"
        out[(gpu, case.get("name"))] = status
    return out


def test_clean_box_passes_in_text_json_and_junit(fake_nvml_lib: FakeNvmlLib,
                                                 tmp_path: Path, run: Run) -> None:
    env = fake_nvml_lib.env(scenario_path("doctor_clean"))
    junit = tmp_path / "doctor.xml"
    proc = run(["--quick", "--junit", str(junit)], env)
    assert proc.returncode == 0, proc.stderr
    assert text_statuses(proc.stdout) == CLEAN
    assert proc.stdout.rstrip().splitlines()[-1] == (
        "doctor: PASS — 0 failed, 0 warnings, 35 passed, 0 skipped on 2 GPUs")
    assert junit_statuses(junit) == CLEAN
    proc = run(["--quick", "--json"], env)
    assert proc.returncode == 0
    doc = json.loads(proc.stdout)
    assert json_statuses(doc) == CLEAN
    assert (doc["status"], doc["exit_code"]) == ("pass", 0)


def test_faulty_box_names_every_tripped_check(fake_nvml_lib: FakeNvmlLib,
                                              tmp_path: Path, run: Run) -> None:
    env = fake_nvml_lib.env(scenario_path("doctor_faults"))
    junit = tmp_path / "out" / "doctor.xml"
    # --observe 2: XID 79 arrives on GPU 0 one second after the fake loads.
    proc = run(["--quick", "--observe", "2", "--junit", str(junit)], env)
    assert proc.returncode == 1, proc.stderr
    assert text_statuses(proc.stdout) == FAULTS
    assert "XID 79 (GPU has fallen off the bus)" in proc.stdout
    assert proc.stdout.rstrip().splitlines()[-1] == (
        "doctor: FAIL — 12 failed, 9 warnings, 43 passed, 5 skipped on 4 GPUs")
    assert junit_statuses(junit) == FAULTS
    root = ET.parse(junit).getroot()
    assert (root.get("tests"), root.get("failures"), root.get("skipped")) == ("69", "12", "5")
    assert not [p for p in junit.parent.iterdir() if p.name != "doctor.xml"]  # no temp left


def test_faulty_box_json_document(fake_nvml_lib: FakeNvmlLib, run: Run) -> None:
    env = fake_nvml_lib.env(scenario_path("doctor_faults"))
    proc = run(["--quick", "--observe", "2", "--json"], env)
    assert proc.returncode == 1, proc.stderr
    doc = json.loads(proc.stdout)
    assert json_statuses(doc) == FAULTS
    assert (doc["status"], doc["exit_code"], doc["strict"]) == ("fail", 1, False)
    assert doc["counts"] == {"pass": 43, "warn": 9, "fail": 12, "skip": 5}
    by = {(c["gpu"], c["id"]): c for c in doc["checks"]}
    width = by[(0, "pcie_width")]
    assert (width["value"], width["expected"], width["unit"]) == (8, 16, "lanes")
    assert width["why"].startswith("fewer lanes")
    gen = by[(0, "pcie_gen")]
    assert (gen["value"], gen["expected"], gen["unit"]) == (3, 5, "gen")
    power = by[(0, "power_limit")]
    assert (power["value"], power["expected"], power["unit"]) == (500.0, 700.0, "W")
    ecc = by[(1, "ecc_volatile")]
    assert (ecc["value"], ecc["expected"], ecc["unit"]) == (2, 0, "errors")
    assert by[(1, "ecc_aggregate")]["value"] == 5
    assert by[(0, "xid")]["value"] == "79"
    assert by[(3, "fan")]["detail"].startswith("no fan reported")
    assert [g["index"] for g in doc["gpus"]] == [0, 1, 2, 3]


def test_a_lost_gpu_fails_once_and_the_others_are_checked(fake_nvml_lib: FakeNvmlLib,
                                                          make_scenario, run: Run) -> None:
    sc = make_scenario({"device_count": 2, "gpu.1.handle_error": 15})  # GPU_IS_LOST
    proc = run(["--quick", "--json"], fake_nvml_lib.env(sc))
    assert proc.returncode == 1, proc.stderr
    doc = json.loads(proc.stdout)
    assert [c["id"] for c in doc["checks"] if c["gpu"] == 1] == ["reachable"]
    assert json_statuses(doc)[(1, "reachable")] == "fail"
    assert {c["status"] for c in doc["checks"] if c["gpu"] == 0} == {"pass"}


def test_warnings_fail_only_with_strict(fake_nvml_lib: FakeNvmlLib, make_scenario,
                                        run: Run) -> None:
    sc = make_scenario({"device_count": 1, "gpu.0.persistence_mode": 0})
    env = fake_nvml_lib.env(sc)
    lenient = run(["--quick"], env)
    assert lenient.returncode == 0, lenient.stderr
    assert text_statuses(lenient.stdout)[(0, "persistence_mode")] == "warn"
    assert lenient.stdout.rstrip().splitlines()[-1].startswith("doctor: PASS with warnings")
    strict = run(["--quick", "--strict", "--json"], env)
    assert strict.returncode == 1
    assert json.loads(strict.stdout)["status"] == "fail"


def test_gpus_selects_and_rejects(fake_nvml_lib: FakeNvmlLib, run: Run) -> None:
    env = fake_nvml_lib.env(scenario_path("doctor_faults"))
    proc = run(["--quick", "--gpus", "1,3", "--json"], env)
    doc = json.loads(proc.stdout)
    assert {c["gpu"] for c in doc["checks"]} == {None, 1, 3}
    assert [g["index"] for g in doc["gpus"]] == [1, 3]
    for bad, msg in (("7", "no GPU 7"), ("a", "not a GPU index"), ("3-1", "bad range")):
        proc = run(["--quick", "--gpus", bad], env)
        assert proc.returncode == 2
        assert proc.stderr.startswith("gputui: --gpus:") and msg in proc.stderr
        assert "Traceback" not in proc.stderr and proc.stderr.count("\n") == 1


def test_without_nvml_one_line_and_exit_1(tmp_path: Path, run: Run) -> None:
    env = dict(os.environ)
    env.pop("LD_LIBRARY_PATH", None)
    env.pop("FAKENVML_SCENARIO", None)
    proc = run(["--quick", "--junit", str(tmp_path / "j.xml")], env)
    assert proc.returncode == 1
    assert proc.stderr.startswith("gputui: doctor needs NVML or an AMD GPU:")
    assert proc.stderr.count("\n") == 1 and proc.stdout == ""
    assert not (tmp_path / "j.xml").exists()


def test_ctrl_c_prints_what_was_checked_and_exits_130(fake_nvml_lib: FakeNvmlLib,
                                                      tmp_path: Path) -> None:
    import signal

    env = fake_nvml_lib.env(scenario_path("doctor_clean"))
    junit = tmp_path / "j.xml"
    proc = subprocess.Popen([*GPUTUI, "doctor", "--quick", "--observe", "60", "--junit",
                             str(junit)], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    lines = [proc.stdout.readline() for _ in range(2)]  # configuration checks streamed
    assert lines[0].startswith("box    driver")
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "Traceback" not in err
    last = out.rstrip().splitlines()[-1]
    assert last.startswith("doctor: INTERRUPTED — 0 failed, 0 warnings, ")
    assert last.endswith(" skipped")  # the GPUs were not all checked: no count claimed
    assert junit_statuses(junit)[(None, "driver")] == "pass"
