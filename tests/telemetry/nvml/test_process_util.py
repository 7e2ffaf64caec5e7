"""Per-process utilisation and containers: SM / memory / encoder / decoder %
per process from NVML (the newer call, or the older one on older drivers), and the
container from /proc/PID/cgroup (tests/telemetry/test_pods.py has every kind); in the
snapshot JSON."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from gputui.telemetry.container import ContainerNames
from gputui.telemetry.nvml import ALL_FIELDS, NvmlSource
from tests.cli import CliEnv
from tests.fakenvml.harness import FakeNvml, FakeNvmlLib

PROCS = {"device_count": 1, "gpu.0.processes": {4242: 2**30, 4343: 2**29, 4444: 2**28},
         "gpu.0.process_util": "4242:71:33:0:5,4343:9:2:40:0,9999:50:50:0:0"}


def _utils(fake_nvml: FakeNvml, scenario: dict[str, object]) -> dict[int, tuple]:
    fake_nvml.use(scenario, frozen_time=1.0)
    src = NvmlSource(process_every=1, fields=ALL_FIELDS)
    src.open()
    _, procs = src.read()
    src.close()
    return {p.pid: (p.sm_util_pct, p.mem_util_pct, p.enc_util_pct, p.dec_util_pct)
            for p in procs}


def test_per_process_utilisation_exact(fake_nvml: FakeNvml) -> None:
    got = _utils(fake_nvml, PROCS)
    # 9999 has a sample but no longer runs: not made up into the list.
    assert got == {4242: (71, 33, 0, 5), 4343: (9, 2, 40, 0), 4444: (None, None, None, None)}


def test_an_older_driver_uses_the_older_call(fake_nvml: FakeNvml) -> None:
    got = _utils(fake_nvml, {**PROCS, "not_found": ["nvmlDeviceGetProcessesUtilizationInfo"]})
    assert got[4242] == (71, 33, 0, 5)
    assert fake_nvml.count_for("nvmlDeviceGetProcessUtilization") == 2


def test_no_new_sample_keeps_the_last_for_a_while_then_null(
        fake_nvml: FakeNvml, monkeypatch: pytest.MonkeyPatch) -> None:
    """On a real H100 a reading 0.3 s after the last one often finds no new process
    sample (NOT_FOUND): the last sample stands for PROCESS_UTIL_KEEP_S, then "—"."""
    from gputui.telemetry.nvml import source as source_mod
    from gputui.telemetry.nvml.processes import PROCESS_UTIL_KEEP_S

    clock = [100.0]
    monkeypatch.setattr(source_mod.time, "monotonic", lambda: clock[0])
    fake_nvml.use(PROCS, frozen_time=1.0)
    src = NvmlSource(process_every=1, fields=ALL_FIELDS)
    src.open()
    _, procs = src.read()
    assert {p.pid: p.sm_util_pct for p in procs}[4242] == 71
    clock[0] += 1.0
    _, procs = src.read()  # the driver sampled nothing since: NOT_FOUND
    assert {p.pid: p.sm_util_pct for p in procs}[4242] == 71
    clock[0] += PROCESS_UTIL_KEEP_S
    _, procs = src.read()  # still nothing new, and the last sample is too old now
    assert {p.pid: p.sm_util_pct for p in procs}[4242] is None
    fake_nvml.set_time(2.0)
    _, procs = src.read()  # last-seen moved on: the new sample is found
    assert {p.pid: p.sm_util_pct for p in procs}[4242] == 71
    src.close()


def test_snapshot_json_has_process_utilisation_and_container(
        fake_nvml_lib: FakeNvmlLib, tmp_path: Path, cli_env: CliEnv) -> None:
    from tests.fakenvml.harness import write_scenario

    me = os.getpid()  # a real process, so that its cgroup can be read
    sc = write_scenario(tmp_path / "p.conf", {
        "device_count": 1, "gpu.0.processes": {me: 2**30},
        "gpu.0.process_util": f"{me}:88:44:0:0"})
    proc = cli_env(["snapshot", "--json"], fake_nvml_lib.env(sc))
    assert proc.returncode == 0, proc.stderr
    (p,) = json.loads(proc.stdout)["processes"]
    assert (p["pid"], p["sm_util_pct"], p["mem_util_pct"], p["enc_util_pct"],
            p["dec_util_pct"]) == (me, 88, 44, 0, 0)
    want = ContainerNames().get(me, None)
    assert p["container"] == (want.container if want else None)
    assert p["pod"] == (want.pod if want else None)
