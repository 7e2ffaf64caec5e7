"""dcgm-exporter's default counters that NVML gives beyond the core:
memory (HBM) temperature and its limit, encoder/decoder load, driver-reserved memory,
PCIe replays and remapped rows, through the real pynvml and the fake library."""

from __future__ import annotations

import json
from datetime import UTC, datetime

from gputui.telemetry.alerts import AlertEngine
from gputui.telemetry.model import HostSample, Snapshot, SystemInfo
from gputui.telemetry.nvml import NvmlSource
from tests.cli import CliEnv
from tests.fakenvml.harness import FakeNvml, FakeNvmlLib, scenario_path

EXTRAS = ("mem_temp_c", "enc_util_pct", "dec_util_pct", "mem_reserved_bytes",
          "pcie_replay_count", "remap_correctable_rows", "remap_uncorrectable_rows",
          "remap_pending", "remap_failure")
H100_EXTRAS = {"mem_temp_c": 71, "enc_util_pct": 12, "dec_util_pct": 34,
               "mem_reserved_bytes": 512 * 2**20, "pcie_replay_count": 7,
               "remap_correctable_rows": 2, "remap_uncorrectable_rows": 1,
               "remap_pending": True, "remap_failure": False}


def test_extras_exact_through_pynvml(fake_nvml: FakeNvml) -> None:
    fake_nvml.use("gpm")
    src = NvmlSource()
    src.open()
    (g0, g1), _ = src.read()
    assert {k: getattr(g0, k) for k in EXTRAS} == H100_EXTRAS
    assert g0.info.temp_mem_max_c == 95
    # The A100 (the fake's default memory info has no reserved memory): none of them.
    assert {k: getattr(g1, k) for k in EXTRAS} == {**dict.fromkeys(EXTRAS),
                                                   "mem_reserved_bytes": 0}
    assert g1.info.temp_mem_max_c is None
    # What the A100 lacks is not asked again.
    fake_nvml.reset_counts()
    src.read()
    assert fake_nvml.count_for("nvmlDeviceGetFieldValues") == 1  # the H100's only
    assert fake_nvml.count_for("nvmlDeviceGetEncoderUtilization") == 1
    src.close()


def test_snapshot_json_has_the_extras(fake_nvml_lib: FakeNvmlLib, cli_env: CliEnv) -> None:
    proc = cli_env(["snapshot", "--json"], fake_nvml_lib.env(scenario_path("gpm")))
    assert proc.returncode == 0, proc.stderr
    g0, g1 = json.loads(proc.stdout)["gpus"]
    assert {k: g0[k] for k in EXTRAS} == H100_EXTRAS
    assert g0["temp_mem_max_c"] == 95 and g1["temp_mem_max_c"] is None
    assert g1["mem_temp_c"] is None and g1["remap_pending"] is None


def _alerts(samples: list) -> list:  # type: ignore[type-arg]
    engine = AlertEngine()
    raised = []
    for i, g in enumerate(samples):
        snap = Snapshot(time=datetime(2026, 11, 23, 4, 0, i, tzinfo=UTC), mono=float(i),
                        system=SystemInfo(), host=HostSample("h"), gpus=(g,))
        raised += engine.update(snap, {})
    return raised


def test_hot_memory_and_a_pending_remap_are_alerts(fake_nvml: FakeNvml) -> None:
    fake_nvml.use({"device_count": 1, "gpu.0.mem_temp_c": 91, "gpu.0.temp_mem_max_c": 95,
                   "gpu.0.remap_pending": 1, "gpu.0.remap_uncorrectable": 1})
    src = NvmlSource()
    src.open()
    (g0,), _ = src.read()
    (g0b,), _ = src.read()
    src.close()
    raised = _alerts([g0, g0b])
    assert [(a.kind, a.severity) for a in raised] == [("mem_hot", "warning"),
                                                      ("row_remap", "warning")]
    assert raised[0].message == ("GPU 0: memory (HBM) at 91 °C, limit 95 °C; the GPU slows "
                                 "down to protect it")
    assert raised[1].message.startswith("GPU 0: a memory row remap is pending (1 uncorrectable")


def test_cool_memory_and_no_remap_raise_nothing(fake_nvml: FakeNvml) -> None:
    fake_nvml.use({"device_count": 1, "gpu.0.mem_temp_c": 60, "gpu.0.temp_mem_max_c": 95})
    src = NvmlSource()
    src.open()
    (g0,), _ = src.read()
    src.close()
    assert g0.mem_temp_c == 60 and g0.remap_pending is False
    assert _alerts([g0]) == []


def test_a_remap_failure_is_an_error(fake_nvml: FakeNvml) -> None:
    fake_nvml.use({"device_count": 1, "gpu.0.remap_failure": 1})
    src = NvmlSource()
    src.open()
    (g0,), _ = src.read()
    src.close()
    (alert,) = _alerts([g0])
    assert (alert.kind, alert.severity) == ("row_remap", "error")
    assert "could not be remapped" in alert.message


def test_retired_pages_exact_and_in_json(fake_nvml: FakeNvml) -> None:
    fake_nvml.use("gpm")
    src = NvmlSource()
    src.open()
    (g0, g1), _ = src.read()
    src.close()
    assert (g0.retired_pages_sbe, g0.retired_pages_dbe, g0.retired_pages_pending) == (
        3, 1, True)
    assert (g1.retired_pages_sbe, g1.retired_pages_dbe, g1.retired_pages_pending) == (
        0, 0, False)


def test_a_gpu_without_page_retirement_is_null(fake_nvml: FakeNvml) -> None:
    fake_nvml.use({"device_count": 1, "gpu.0.unsupported": ["retired_pages"]})
    src = NvmlSource(slow_every=1)
    src.open()
    src.read()
    (g0,), _ = src.read()
    src.close()
    assert g0.retired_pages_sbe is None and g0.retired_pages_pending is None
    assert fake_nvml.count_for("nvmlDeviceGetRetiredPages") == 1  # not asked again
