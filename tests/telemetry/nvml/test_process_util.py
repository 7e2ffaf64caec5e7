"""Per-process utilisation and containers: SM / memory / encoder / decoder %
per process from NVML (the newer call, or the older one on older drivers), and the
container from /proc/PID/cgroup; in the snapshot JSON."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from gputui.telemetry.container import ContainerNames, container_from_cgroup
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


DOCKER_V2 = ("0::/system.slice/docker-"
             "3f4e5a6b7c8d9e0f1a2b3c4d5e6f7a8b9c0d1e2f3a4b5c6d7e8f9a0b1c2d3e4f.scope\n")
K8S_V2 = ("0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod"
          "1a2b3c4d_5e6f_7a8b_9c0d_1e2f3a4b5c6d.slice/cri-containerd-" + "ab12" * 16
          + ".scope\n")


@pytest.mark.parametrize(("text", "want"), [
    (DOCKER_V2, "docker:3f4e5a6b7c8d"),
    ("12:devices:/docker/" + "ab" * 32 + "\n", "docker:abababababab"),
    (K8S_V2, "containerd:ab12ab12ab12 pod 1a2b3c4d-5e6f-7a8b-9c0d-1e2f3a4b5c6d"),
    ("0::/machine.slice/libpod-" + "cd" * 32 + ".scope\n", "podman:cdcdcdcdcdcd"),
    ("0::/kubepods.slice/kubepods-pod12345678_1234_1234_1234_123456789abc.slice/crio-"
     + "ef" * 32 + ".scope\n", "cri-o:efefefefefef pod 12345678-1234-1234-1234-123456789abc"),
    ("0::/user.slice/user-1000.slice/session-3.scope\n", None),
])
def test_container_from_cgroup(text: str, want: str | None) -> None:
    assert container_from_cgroup(text) == want


def test_container_names_read_proc_once_per_process(tmp_path: Path) -> None:
    (tmp_path / "77").mkdir()
    (tmp_path / "77" / "cgroup").write_text(DOCKER_V2)
    names = ContainerNames(tmp_path)
    assert names.get(77, 1000.0) == "docker:3f4e5a6b7c8d"
    (tmp_path / "77" / "cgroup").write_text("0::/\n")  # cached: not read again
    assert names.get(77, 1000.0) == "docker:3f4e5a6b7c8d"
    assert names.get(77, 2000.0) is None  # a new process that reused the pid
    assert names.get(78, 1.0) is None  # no such process


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
    want = container_from_cgroup(Path(f"/proc/{me}/cgroup").read_text())
    assert p["container"] == want
