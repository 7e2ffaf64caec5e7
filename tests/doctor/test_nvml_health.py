"""The doctor's NVML reads (read_health, XidWatcher) through the real pynvml talking to
the fake libnvidia-ml.so.1: every field exactly as the scenario sets it."""

from __future__ import annotations

import time

from gputui.telemetry.nvml import NvmlSource, XidWatcher
from gputui.telemetry.nvml.health_reads import read_health
from tests.fakenvml.harness import FakeNvml


def _open() -> NvmlSource:
    src = NvmlSource()
    src.open()
    return src


def test_read_health_returns_every_field_of_the_scenario(fake_nvml: FakeNvml) -> None:
    fake_nvml.use({
        "device_count": 1,
        "gpu.0.pcie_gen": 3, "gpu.0.pcie_width": 8,
        "gpu.0.pcie_gen_max": 5, "gpu.0.pcie_width_max": 16,
        "gpu.0.persistence_mode": 0,
        "gpu.0.power_limit_mw": 500000, "gpu.0.power_default_limit_mw": 700000,
        "gpu.0.app_clock_sm_mhz": 1200, "gpu.0.app_clock_mem_mhz": 2600,
        "gpu.0.default_app_clock_sm_mhz": 1980, "gpu.0.default_app_clock_mem_mhz": 2619,
        "gpu.0.ecc_mode": 1, "gpu.0.ecc_mode_pending": 0,
        "gpu.0.ecc_uncorrected": 2, "gpu.0.ecc_uncorrected_aggregate": 7,
        "gpu.0.mig_mode": 0, "gpu.0.mig_mode_pending": 1,
        "gpu.0.compute_mode": 3,
        "gpu.0.remap_correctable": 4, "gpu.0.remap_uncorrectable": 1,
        "gpu.0.remap_pending": 1, "gpu.0.remap_failure": 0,
        "gpu.0.retired_pages_sbe": 3, "gpu.0.retired_pages_dbe": 2,
        "gpu.0.retired_pages_pending": 1,
        "gpu.0.throttle_reasons": 0x81,
        "gpu.0.temp_c": 61, "gpu.0.temp_slowdown_c": 87, "gpu.0.fan_pct": 55,
        "gpu.0.vbios_version": "96.00.74.00.0D",
    })
    src = _open()
    try:
        h = read_health(src, 0)
    finally:
        src.close()
    assert (h.pcie_gen, h.pcie_width, h.pcie_gen_max, h.pcie_width_max) == (3, 8, 5, 16)
    assert h.persistence_mode is False
    assert (h.power_limit_w, h.power_default_limit_w) == (500.0, 700.0)  # mW → W
    assert (h.app_clock_sm_mhz, h.app_clock_mem_mhz) == (1200, 2600)
    assert (h.default_app_clock_sm_mhz, h.default_app_clock_mem_mhz) == (1980, 2619)
    assert (h.ecc_mode, h.ecc_mode_pending) == (True, False)
    assert (h.ecc_uncorrected_volatile, h.ecc_uncorrected_aggregate) == (2, 7)
    assert (h.mig_mode, h.mig_mode_pending) == (False, True)
    assert h.compute_mode == 3
    assert (h.remap_correctable, h.remap_uncorrectable, h.remap_pending,
            h.remap_failure) == (4, 1, True, False)
    assert (h.retired_pages_sbe, h.retired_pages_dbe, h.retired_pages_pending) == (3, 2, True)
    assert h.throttle_mask == 0x81
    assert (h.temp_c, h.temp_slowdown_c, h.fan_pct) == (61, 87, 55)
    assert h.vbios_version == "96.00.74.00.0D"
    assert h.unsupported == frozenset() and h.read_errors == ()


def test_not_supported_reads_are_named_not_guessed(fake_nvml: FakeNvml) -> None:
    fake_nvml.use({"device_count": 1,
                   "gpu.0.unsupported": ["persistence", "ecc_mode", "ecc", "mig",
                                         "remapped_rows", "retired_pages", "fan",
                                         "app_clocks"]})
    src = _open()
    try:
        h = read_health(src, 0)
    finally:
        src.close()
    assert h.unsupported == {"persistence_mode", "ecc_mode", "ecc_errors", "mig_mode",
                             "remapped_rows", "retired_pages", "fan", "app_clocks"}
    assert h.persistence_mode is None and h.ecc_mode is None and h.fan_pct is None
    assert h.remap_pending is None and h.retired_pages_sbe is None
    assert h.pcie_width == 16  # the rest is still read


def test_older_driver_without_a_function_is_unsupported_not_an_error(
        fake_nvml: FakeNvml) -> None:
    fake_nvml.use({"device_count": 1, "not_found": ["nvmlDeviceGetRemappedRows"]})
    src = _open()
    try:
        h = read_health(src, 0)
    finally:
        src.close()
    assert "remapped_rows" in h.unsupported and h.read_errors == ()


def test_lost_gpu_reads_as_lost(fake_nvml: FakeNvml) -> None:
    fake_nvml.use({"device_count": 2, "gpu.1.handle_error": 15})
    src = _open()
    try:
        ok, lost = read_health(src, 0), read_health(src, 1)
    finally:
        src.close()
    assert ok.error is None and ok.lost is False
    assert lost.lost is True and lost.error == "GPU is lost"


def test_xid_watcher_reports_the_xid_delivered_at_second_n(fake_nvml: FakeNvml) -> None:
    fake_nvml.use({"device_count": 2, "gpu.1.xid": 79, "gpu.1.xid_at_s": 3.0})
    src = _open()
    watcher = XidWatcher(src, poll_ms=20)
    try:
        watcher.start()
        time.sleep(0.1)
        assert watcher.events() == ()  # second 0: nothing yet
        fake_nvml.set_time(3.0)
        deadline = time.monotonic() + 5
        while not watcher.events() and time.monotonic() < deadline:
            time.sleep(0.02)
        events = watcher.stop()
    finally:
        src.close()
    assert [(e.gpu, e.xid, e.meaning) for e in events] == [
        (1, 79, "GPU has fallen off the bus")]
    assert watcher.unsupported == set() and watcher.error is None


def test_xid_watcher_names_gpus_that_cannot_report_events(fake_nvml: FakeNvml) -> None:
    fake_nvml.use({"device_count": 2, "gpu.0.unsupported": ["events"]})
    src = _open()
    watcher = XidWatcher(src, poll_ms=20)
    try:
        watcher.start()
        events = watcher.stop()
    finally:
        src.close()
    assert events == () and watcher.unsupported == {0}


def test_p2p_link_names_nvlink_pcie_or_host(fake_nvml: FakeNvml) -> None:
    from gputui.telemetry.nvml.health_reads import p2p_link

    fake_nvml.use({"device_count": 3, "gpu.0.nvlink": 1, "gpu.1.nvlink": 1, "gpu.2.p2p": 0})
    src = _open()
    try:
        assert p2p_link(src, 0, 1) == "NVLink"
        assert p2p_link(src, 1, 0) == "NVLink"
        assert p2p_link(src, 0, 2) == "through host memory"
    finally:
        src.close()
    fake_nvml.use({"device_count": 2})
    src = _open()
    try:
        assert p2p_link(src, 0, 1) == "PCIe P2P"
    finally:
        src.close()
