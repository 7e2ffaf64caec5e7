"""MIG devices in the public JSON (`mig_devices`): `gputui snapshot --json` as a user runs
it, the schema's round trip (recordings, replay), and malformed input."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from gputui.telemetry.mig import MigDevice, MigProcess
from gputui.telemetry.model import DeviceInfo, GpuSample, HostSample, Snapshot, SystemInfo
from gputui.telemetry.schema import SchemaError, snapshot_from_dict, snapshot_to_dict
from tests.cli import CliEnv
from tests.fakenvml.harness import FakeNvmlLib, scenario_path

GIB = 1024**3

MIG0_JSON = {
    "index": 0, "uuid": "MIG-11111111-2222-3333-4444-000000000000",
    "name": "NVIDIA H100 80GB HBM3 MIG 3g.40gb", "profile": "3g.40gb",
    "gpu_instance_id": 2, "compute_instance_id": 0, "sm_count": 60,
    "mem_used_bytes": 10 * GIB, "mem_total_bytes": 42144366592,
    "processes": [{"pid": 4101, "gpu_mem_bytes": 8 * GIB},
                  {"pid": 4102, "gpu_mem_bytes": 2 * GIB}],
    "sm_active_pct": 87.5, "sm_occupancy_pct": 40.25, "tensor_active_pct": 62.5,
    "dram_active_pct": 55.0, "fp64_active_pct": 0.0, "fp32_active_pct": 12.5,
    "fp16_active_pct": 30.0, "gr_engine_active_pct": 99.0,
}


def test_snapshot_json_lists_mig_devices_under_their_gpu(fake_nvml_lib: FakeNvmlLib,
                                                         cli_env: CliEnv) -> None:
    proc = cli_env(["snapshot", "--json"], fake_nvml_lib.env(scenario_path("mig")))
    assert proc.returncode == 0, proc.stderr
    g0, g1 = json.loads(proc.stdout)["gpus"]
    assert g0["mig_devices"][0] == MIG0_JSON
    assert [m["profile"] for m in g0["mig_devices"]] == ["3g.40gb", "2g.20gb", "1g.10gb"]
    assert g0["mig_devices"][1]["dram_active_pct"] is None  # not given: null, not 0
    assert g0["mig_devices"][2]["processes"] == []
    assert g1["mig_devices"] == []  # MIG mode off


def _snapshot(*devices: MigDevice) -> Snapshot:
    info = DeviceInfo(index=0, name="NVIDIA H100 80GB HBM3", uuid="GPU-1", pci_bus_id="0:18")
    return Snapshot(time=datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC), mono=0.0,
                    system=SystemInfo(), host=HostSample(hostname="h"),
                    gpus=(GpuSample(info=info, util_gpu_pct=None, mig_devices=devices),))


def test_mig_devices_survive_the_json_round_trip() -> None:
    devices = (
        MigDevice(index=0, uuid="MIG-a", name="X MIG 1g.10gb", profile="1g.10gb",
                  gpu_instance_id=7, compute_instance_id=0, sm_count=14,
                  mem_used_bytes=5, mem_total_bytes=10,
                  processes=(MigProcess(12, None), MigProcess(13, 4096)), sm_active_pct=1.5),
        # Processes not read (None) stay null, distinct from "none running".
        MigDevice(index=3, uuid="MIG-b", name="X", profile=None, gpu_instance_id=None,
                  compute_instance_id=None),
    )
    doc = json.loads(json.dumps(snapshot_to_dict(_snapshot(*devices))))
    assert doc["gpus"][0]["mig_devices"][1]["processes"] is None
    assert snapshot_from_dict(doc).gpus[0].mig_devices == devices


def test_recordings_from_before_mig_read_as_no_mig_devices() -> None:
    doc = snapshot_to_dict(_snapshot())
    del doc["gpus"][0]["mig_devices"]
    assert snapshot_from_dict(doc).gpus[0].mig_devices == ()


@pytest.mark.parametrize(("patch", "message"), [
    ({"sm_count": "14"}, "gpus[0].mig_devices[0].sm_count is a string, not a number"),
    ({"processes": [{"pid": None}]}, "gpus[0].mig_devices[0].processes[0].pid is null"),
    ({"uuid": None}, "gpus[0].mig_devices[0].uuid is null, not text"),
    ({"index": ...}, "gpus[0].mig_devices[0] has no index"),
])
def test_a_malformed_mig_device_is_a_schema_error_naming_the_field(
        patch: dict[str, object], message: str) -> None:
    doc = snapshot_to_dict(_snapshot(MigDevice(
        index=0, uuid="MIG-a", name="n", profile="1g.10gb", gpu_instance_id=1,
        compute_instance_id=0)))
    dev = doc["gpus"][0]["mig_devices"][0]
    dev.update(patch)
    for key in [k for k, v in patch.items() if v is ...]:
        del dev[key]
    with pytest.raises(SchemaError) as err:
        snapshot_from_dict(doc)
    assert message in str(err.value)
