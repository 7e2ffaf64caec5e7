from __future__ import annotations

import json
from pathlib import Path

import pytest

from gputui.errors import UsageError
from gputui.telemetry.model import GpuProcess
from gputui.telemetry.record import Recorder, load_recording
from gputui.telemetry.schema import SchemaError, snapshot_from_dict, snapshot_to_dict
from tests.factories import gpu, snapshot

GPU_KEYS = {"index", "name", "uuid", "pci_bus_id", "util_gpu_pct", "util_mem_pct",
            "mem_used_bytes", "mem_total_bytes", "power_w", "power_limit_w", "temp_c",
            "temp_slowdown_c", "fan_pct", "clock_sm_mhz", "clock_sm_max_mhz", "clock_mem_mhz",
            "pstate", "energy_j", "pcie_rx_bps", "pcie_tx_bps", "throttle_reasons", "throttling",
            "lost"}


def test_json_document_has_the_documented_shape() -> None:
    snap = snapshot(0, [gpu(0, throttle_mask=0x41), gpu(1, lost=True, throttle_mask=None)],
                    processes=(GpuProcess(0, 4242, 2**30, user="ana", command="python train.py"),))
    d = snapshot_to_dict(snap)
    assert set(d) >= {"time", "driver_version", "nvml_version", "cuda_driver_version", "host",
                      "gpus", "processes", "nvml_error"}
    assert d["time"] == "2026-11-21T14:02:11.000Z"
    g0, g1 = d["gpus"]
    assert GPU_KEYS <= set(g0)
    assert g0["throttle_reasons"] == ["gpu_idle", "hw_thermal_slowdown"]
    assert g0["throttling"] is True
    assert g0["fan_pct"] is None  # unsupported stays null, never 0
    assert g1["lost"] is True and g1["throttling"] is None  # unknown, not "fine"
    assert d["processes"][0] == {"gpu": 0, "pid": 4242, "kind": "compute", "user": "ana",
                                 "gpu_mem_bytes": 2**30, "cpu_pct": None, "rss_bytes": None,
                                 "started": None, "command": "python train.py",
                                 "sm_util_pct": None, "mem_util_pct": None,
                                 "enc_util_pct": None, "dec_util_pct": None,
                                 "container": None, "container_id": None, "pod": None,
                                 "namespace": None, "pod_uid": None, "qos": None,
                                 "power_w": None, "energy_j": None, "energy_method": None,
                                 "energy_estimate": None}
    json.dumps(d)  # serialisable as is


def test_snapshot_round_trips_through_json() -> None:
    snap = snapshot(3, [gpu(0, throttle_mask=0x40), gpu(1, fan_pct=40)])
    back = snapshot_from_dict(json.loads(json.dumps(snapshot_to_dict(snap))))
    assert back.gpus == snap.gpus
    assert back.time == snap.time and back.host == snap.host and back.system == snap.system


def test_pods_and_energy_round_trip_and_are_checked() -> None:
    from gputui.telemetry.model import GpuEnergy

    p = GpuProcess(0, 7, 2**30, container="trainer", container_id="c" * 64, pod="llama-0",
                   namespace="ml", pod_uid="u-1", qos="guaranteed", power_w=120.5,
                   energy_j=900.0, energy_method="sm_share", energy_estimate=True)
    snap = snapshot(3, [gpu(0), gpu(1)], processes=(p,),
                    gpu_energy=(GpuEnergy(0, 1000.0, 100.0, 100.0, 50.0),))
    d = json.loads(json.dumps(snapshot_to_dict(snap)))
    assert d["gpus"][0]["energy_seen_j"] == 1000.0 and d["gpus"][1]["energy_seen_j"] is None
    back = snapshot_from_dict(d)
    assert back.processes == (p,) and back.gpu_energy == snap.gpu_energy
    d["processes"][0]["energy_estimate"] = "yes"
    with pytest.raises(SchemaError, match=r"processes\[0\]\.energy_estimate"):
        snapshot_from_dict(d)
    d["processes"][0]["energy_estimate"] = None
    d["gpus"][0]["energy_idle_j"] = "lots"
    with pytest.raises(SchemaError, match=r"gpus\[0\]\.energy_idle_j"):
        snapshot_from_dict(d)


def test_an_amd_gpu_round_trips_and_an_old_recording_reads_as_nvidia() -> None:
    from dataclasses import replace

    from gputui.telemetry.model import SystemInfo
    from tests.factories import device

    amd = gpu(1, info=device(1, name="AMD Instinct MI300X", vendor="amd"),
              throttle_mask=0x80004, temp_junction_c=71, temp_edge_c=None)
    snap = snapshot(3, [gpu(0), amd], system=SystemInfo("580.65.06", None, "13.0", "6.12"))
    doc = json.loads(json.dumps(snapshot_to_dict(snap)))
    assert [g["vendor"] for g in doc["gpus"]] == ["nvidia", "amd"]
    assert doc["gpus"][1]["throttle_reasons"] == ["sw_power_cap", "prochot"]
    back = snapshot_from_dict(doc)
    assert back.gpus == snap.gpus and back.system == snap.system
    # A recording from before AMD GPUs were read: no vendor, no amdgpu version.
    for g in doc["gpus"]:
        del g["vendor"], g["temp_junction_c"], g["temp_edge_c"]
    del doc["amd_driver_version"]
    old = snapshot_from_dict(doc)
    assert [g.info.vendor for g in old.gpus] == ["nvidia", "nvidia"]
    assert old.system == replace(snap.system, amd_driver_version=None)


def test_recording_round_trip_and_truncated_last_line(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    rec = Recorder(path, interval=1.0)
    for t in range(5):
        rec.write(snapshot(t, [gpu(0, util_gpu_pct=10 * t)]))
    rec.close()
    with open(path, "a") as fh:
        fh.write('{"time": "2026-11-21T14:0')  # the crash happened mid-write
    loaded = load_recording(path)
    assert [s.gpus[0].util_gpu_pct for s in loaded.snapshots] == [0, 10, 20, 30, 40]
    assert loaded.interval_s == 1.0 and loaded.duration_s == 4.0
    assert [s.mono for s in loaded.snapshots] == [0.0, 1.0, 2.0, 3.0, 4.0]
    assert len(loaded.warnings) == 1 and "truncated" in loaded.warnings[0]


def test_recorder_appends_and_keeps_an_earlier_recording(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    for start in (0, 10):
        rec = Recorder(path)
        rec.write(snapshot(start, [gpu(0)]))
        rec.close()
    assert len(load_recording(path).snapshots) == 2


@pytest.mark.parametrize("content", ["hello world\n", "[1, 2]\n", '{"a": 1}\n', ""])
def test_a_file_that_is_not_a_recording_is_one_clear_error(tmp_path: Path, content: str) -> None:
    path = tmp_path / "x.jsonl"
    path.write_text(content)
    with pytest.raises(UsageError, match="not a gputui recording"):
        load_recording(path)


def test_missing_recording(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="no such recording"):
        load_recording(tmp_path / "nope.jsonl")


def test_unwritable_recording_is_a_usage_error(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="cannot write recording"):
        Recorder(tmp_path / "missing-dir" / "r.jsonl")


def test_a_full_disk_stops_the_recording_and_says_so() -> None:
    rec = Recorder("/dev/full", interval=1.0)
    rec.write(snapshot(0, [gpu(0)]))  # must not raise on the sampler thread
    assert rec.error is not None and "No space left on device" in rec.error
    rec.write(snapshot(1, [gpu(0)]))
    rec.close()
