"""MIG through the real pynvml and the fake libnvidia-ml.so.1: each MIG
device's exact values in the sample, MIG off (no reads), older drivers, failing reads."""

from __future__ import annotations

import pytest

from gputui.telemetry import mig
from gputui.telemetry.mig import MigDevice, MigProcess
from gputui.telemetry.nvml import NvmlSource
from tests.fakenvml.harness import FakeNvml

GIB = 1024**3

# mig.conf, GPU 0 (an H100 in three MIG devices), after two ticks (GPM needs two samples).
EXPECTED = (
    MigDevice(
        index=0, uuid="MIG-11111111-2222-3333-4444-000000000000",
        name="NVIDIA H100 80GB HBM3 MIG 3g.40gb", profile="3g.40gb",
        gpu_instance_id=2, compute_instance_id=0, sm_count=60,
        mem_used_bytes=10 * GIB, mem_total_bytes=42144366592,
        processes=(MigProcess(4101, 8 * GIB), MigProcess(4102, 2 * GIB)),
        sm_active_pct=87.5, sm_occupancy_pct=40.25, tensor_active_pct=62.5,
        dram_active_pct=55.0, fp64_active_pct=0.0, fp32_active_pct=12.5,
        fp16_active_pct=30.0, gr_engine_active_pct=99.0),
    MigDevice(
        index=1, uuid="MIG-11111111-2222-3333-4444-000000000001",
        name="NVIDIA H100 80GB HBM3 MIG 2g.20gb", profile="2g.20gb",
        gpu_instance_id=3, compute_instance_id=0, sm_count=32,
        mem_used_bytes=1 * GIB, mem_total_bytes=21072183296,
        processes=(MigProcess(4103, 1 * GIB),),
        # Only these two metrics are given for this instance: the rest are null, not 0.
        sm_active_pct=12.5, tensor_active_pct=0.0),
    MigDevice(
        index=2, uuid="MIG-11111111-2222-3333-4444-000000000002",
        name="NVIDIA H100 80GB HBM3 MIG 1g.10gb", profile="1g.10gb",
        gpu_instance_id=9, compute_instance_id=0, sm_count=16,
        mem_used_bytes=0, mem_total_bytes=10468982784, processes=()),
)

MIG_CALLS = ("nvmlDeviceGetMaxMigDeviceCount", "nvmlDeviceGetMigDeviceHandleByIndex",
             "nvmlDeviceGetGpuInstanceId", "nvmlDeviceGetComputeInstanceId",
             "nvmlDeviceGetAttributes_v2", "nvmlGpmMigSampleGet")


def _open(fake_nvml: FakeNvml, scenario: object, **kw: object) -> NvmlSource:
    fake_nvml.use(scenario)  # type: ignore[arg-type]
    src = NvmlSource(**kw)  # type: ignore[arg-type]
    # GPM pairs closer than gpm.MIN_SAMPLE_GAP_S are not taken: a clock that moves a
    # second per reading stands for a 1 Hz monitor.
    ticks = iter(range(1000, 100000))
    src.gpm_clock = lambda: float(next(ticks))  # type: ignore[method-assign]
    src.open()
    return src


def test_each_mig_device_is_listed_under_its_gpu_with_exact_values(
        fake_nvml: FakeNvml) -> None:
    src = _open(fake_nvml, "mig")
    (first, _), _ = src.read()
    # One GPM sample is not a rate: the first tick has every other value, GPM null.
    assert [m.mem_used_bytes for m in first.mig_devices] == [10 * GIB, 1 * GIB, 0]
    assert all(getattr(m, f) is None for m in first.mig_devices for f in mig.GPM_FIELDS)
    (g0, g1), _ = src.read()
    assert g0.mig_devices == EXPECTED
    assert g1.mig_devices == ()  # the A100 has MIG mode off
    # GPM per GPU instance, on the parent handle: 3 instances × 2 ticks.
    assert fake_nvml.count_for("nvmlGpmMigSampleGet") == 6
    src.close()
    # Every buffer back: the GPU's own pair and one pair per GPU instance.
    assert fake_nvml.count_for("nvmlGpmSampleAlloc") == 8
    assert fake_nvml.count_for("nvmlGpmSampleFree") == 8


def test_gpu_fields_stay_intact_beside_mig(fake_nvml: FakeNvml) -> None:
    src = _open(fake_nvml, "mig")
    (g0, _), _ = src.read()
    assert g0.info.name == "NVIDIA H100 80GB HBM3"
    assert g0.mem_total_bytes == 85899345920 and g0.temp_c == 55
    src.close()


def test_mig_off_asks_the_mode_once_and_nothing_else(fake_nvml: FakeNvml) -> None:
    src = _open(fake_nvml, {"device_count": 2})
    for _ in range(12):  # past a slow tick, and past a process tick
        samples, _ = src.read()
        assert [g.mig_devices for g in samples] == [(), ()]
    assert fake_nvml.count_for("nvmlDeviceGetMigMode") == 2  # once per GPU per open
    assert {fn: fake_nvml.count_for(fn) for fn in MIG_CALLS} == dict.fromkeys(MIG_CALLS, 0)
    src.close()


def test_without_the_mig_field_nothing_is_asked(fake_nvml: FakeNvml) -> None:
    src = _open(fake_nvml, "mig", fields={"ecc"})
    (g0, _), _ = src.read()
    assert g0.mig_devices == ()
    assert fake_nvml.count_for("nvmlDeviceGetMigMode") == 0
    src.close()


@pytest.mark.parametrize("scenario", [
    # A driver older than MIG (R450): the mode query does not exist.
    {"not_found": ["nvmlDeviceGetMigMode"]},
    # MIG mode is reported, but the MIG device API is missing.
    {"not_found": ["nvmlDeviceGetMaxMigDeviceCount"]},
    {"not_found": ["nvmlDeviceGetMigDeviceHandleByIndex"]},
    # A GPU without MIG (NOT_SUPPORTED).
    {"gpu.0.unsupported": ["mig"]},
], ids=["no-mig-mode", "no-max-count", "no-handle-by-index", "not-supported"])
def test_an_old_driver_or_gpu_without_mig_gives_no_mig_devices_and_no_error(
        fake_nvml: FakeNvml, scenario: dict[str, object]) -> None:
    base = {"device_count": 1, "gpu.0.mig_mode": 1, "gpu.0.util_gpu": 61,
            "gpu.0.mig.0.profile": "7g.80gb"}
    src = _open(fake_nvml, {**base, **scenario})
    for _ in range(11):  # past the rescan on the next slow tick
        (g0,), _ = src.read()
        assert g0.mig_devices == () and g0.error is None
        assert g0.util_gpu_pct == 61  # the GPU's other fields are read as ever
    # Found missing once, never asked again.
    assert fake_nvml.count_for("nvmlDeviceGetMigMode") == 1
    assert fake_nvml.count_for("nvmlDeviceGetMaxMigDeviceCount") <= 1
    src.close()


def test_a_missing_attributes_call_leaves_the_sm_count_null_and_the_rest(
        fake_nvml: FakeNvml) -> None:
    src = _open(fake_nvml, {"device_count": 1, "gpu.0.mig_mode": 1,
                            "gpu.0.mig.0.profile": "1g.10gb", "gpu.0.mig.0.mem_used": 4096,
                            "not_found": ["nvmlDeviceGetAttributes_v2"]})
    src.read()
    (g0,), _ = src.read()
    (m,) = g0.mig_devices
    assert (m.profile, m.sm_count, m.mem_used_bytes, m.mem_total_bytes) == (
        "1g.10gb", None, 4096, 10 * GIB)
    assert fake_nvml.count_for("nvmlDeviceGetAttributes_v2") == 1  # not asked again
    src.close()


@pytest.mark.parametrize("scenario", [
    {"gpu.0.gpm_supported": 0},  # an A100: MIG without GPM
    {"gpu.0.gpm_supported": 1, "not_found": ["nvmlGpmMigSampleGet"]},  # an older driver
], ids=["no-gpm", "no-mig-gpm-call"])
def test_mig_without_gpm_has_null_activity(fake_nvml: FakeNvml,
                                           scenario: dict[str, object]) -> None:
    src = _open(fake_nvml, {"device_count": 1, "gpu.0.mig_mode": 1,
                            "gpu.0.mig.0.profile": "3g.40gb", "gpu.0.mig.0.gpm_sm_util": 50,
                            **scenario})
    for _ in range(3):
        (g0,), _ = src.read()
    (m,) = g0.mig_devices
    assert m.profile == "3g.40gb"
    assert all(getattr(m, f) is None for f in mig.GPM_FIELDS)
    assert fake_nvml.count_for("nvmlGpmMigSampleGet") <= 1  # never asked again
    src.close()


def test_another_profiler_holding_the_counters_nulls_mig_gpm_only(fake_nvml: FakeNvml) -> None:
    src = _open(fake_nvml, {"device_count": 1, "gpu.0.mig_mode": 1, "gpu.0.gpm_supported": 1,
                            "gpu.0.mig.0.profile": "3g.40gb", "gpu.0.mig.0.gpm_sm_util": 50,
                            "gpu.0.mig.0.mem_used": 1024,
                            "gpu.0.gpm_busy_from_s": 5, "gpu.0.gpm_busy_until_s": 10})
    src.read()
    (g0,), _ = src.read()
    assert g0.mig_devices[0].sm_active_pct == 50.0
    fake_nvml.set_time(6)
    (g0,), _ = src.read()
    (m,) = g0.mig_devices
    assert m.sm_active_pct is None and m.mem_used_bytes == 1024
    fake_nvml.set_time(11)
    src.read()  # a fresh pair of samples after the gap
    (g0,), _ = src.read()
    assert g0.mig_devices[0].sm_active_pct == 50.0
    src.close()


def test_instances_are_rescanned_on_slow_ticks_only(fake_nvml: FakeNvml) -> None:
    src = _open(fake_nvml, "mig", slow_every=10, process_every=5)
    for _ in range(10):
        src.read()
    # Max MIG device count 7: one scan (7 handle lookups) in ticks 0-9, on GPU 0 only.
    assert fake_nvml.count_for("nvmlDeviceGetMigDeviceHandleByIndex") == 7
    assert fake_nvml.count_for("nvmlDeviceGetGpuInstanceId") == 3
    src.read()  # tick 10: the second scan
    assert fake_nvml.count_for("nvmlDeviceGetMigDeviceHandleByIndex") == 14
    src.close()


def test_a_lost_gpu_with_mig_is_marked_lost(fake_nvml: FakeNvml) -> None:
    src = _open(fake_nvml, {"device_count": 1, "gpu.0.mig_mode": 1,
                            "gpu.0.mig.0.profile": "1g.10gb", "gpu.0.lost_from_s": 5})
    (g0,), _ = src.read()
    assert len(g0.mig_devices) == 1
    fake_nvml.set_time(6)
    (g0,), _ = src.read()
    assert g0.lost and g0.mig_devices == ()
    src.close()


def test_find_process_names_the_mig_device_a_pid_runs_on(fake_nvml: FakeNvml) -> None:
    src = _open(fake_nvml, "mig")
    (g0, _), _ = src.read()
    assert mig.find_process(4103, g0.mig_devices).label == "2g.20gb"  # type: ignore[union-attr]
    assert mig.find_process(9999, g0.mig_devices) is None
    src.close()


@pytest.mark.parametrize(("name", "profile"), [
    ("NVIDIA A100-SXM4-80GB MIG 1g.10gb", "1g.10gb"),
    ("NVIDIA H100 80GB HBM3 MIG 1g.10gb+me", "1g.10gb+me"),
    ("NVIDIA A100-SXM4-40GB", None),
])
def test_profile_from_name(name: str, profile: str | None) -> None:
    assert mig.profile_from_name(name) == profile


def test_mig_gpm_samples_closer_than_the_minimum_gap_are_not_taken(
        fake_nvml: FakeNvml) -> None:
    """nvml.h: two nvmlGpmMigSampleGet calls must be more than 100 ms apart."""
    src = _open(fake_nvml, {"device_count": 1, "gpu.0.mig_mode": 1, "gpu.0.gpm_supported": 1,
                            "gpu.0.mig.0.profile": "3g.40gb", "gpu.0.mig.0.gpm_sm_util": 50})
    clock = [1000.0]
    src.gpm_clock = lambda: clock[0]  # type: ignore[method-assign]
    src.read()
    (g0,), _ = src.read()  # no time has passed: no second sample, no figure yet
    assert g0.mig_devices[0].sm_active_pct is None
    assert fake_nvml.count_for("nvmlGpmMigSampleGet") == 1
    clock[0] += 1.0
    (g0,), _ = src.read()
    assert g0.mig_devices[0].sm_active_pct == 50.0
    clock[0] += 0.05
    (g0,), _ = src.read()  # too soon: the last pair's figure stands
    assert g0.mig_devices[0].sm_active_pct == 50.0
    assert fake_nvml.count_for("nvmlGpmMigSampleGet") == 2
    src.close()
