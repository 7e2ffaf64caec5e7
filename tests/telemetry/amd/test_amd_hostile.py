"""Hostile trees: damaged gpu_metrics, garbage, files that vanish or refuse, a card that
goes away — N/A where it happened, one line where it helps, the other GPUs read on."""

from __future__ import annotations

import errno
import logging
from pathlib import Path

import pytest

from gputui.telemetry.amd import AmdSource, gpu_metrics
from tests.telemetry.amd.fake_tree import (
    V1_3,
    V1_8,
    FakeHost,
    deny,
    mi250x,
    mi300x,
    pack,
    rx7900xtx,
)


def opened(host: FakeHost) -> AmdSource:
    src = AmdSource(host.sys, host.proc)
    src.open()
    return src


@pytest.mark.parametrize(("blob", "note"), [
    (pack(V1_3)[:100], "gpu_metrics 1.3 is truncated: 100 of 120 bytes"),
    (pack(V1_3, crev=9), "gpu_metrics revision 1.9 (120 bytes) is a layout gputui does "
                         "not know"),
    (pack(V1_8, crev=3), "gpu_metrics 1.3 says 3872 bytes; gputui knows that revision at "
                         "120 bytes only"),
])
def test_damaged_gpu_metrics_is_na_with_one_logged_line(
        tmp_path: Path, caplog: pytest.LogCaptureFixture, blob: bytes, note: str) -> None:
    host = FakeHost(tmp_path)
    card = mi250x(host, 0, indep_throttle_status=1 << 36, energy_accumulator=65536)
    card.write("gpu_metrics", blob)
    src = opened(host)
    with caplog.at_level(logging.WARNING, logger="gputui"):
        samples = [src.read_device(0, slow=True, processes=False)[0] for _ in range(3)]
    s = samples[-1]
    assert (s.throttle_mask, s.energy_j) == (None, None)  # never a number from wrong bytes
    assert (s.util_gpu_pct, s.temp_c, s.power_w, s.error) == (64, 58, 389.0, None)
    assert src.gpu_metrics_note(0) == note
    lines = [r.getMessage() for r in caplog.records]
    assert lines == [f"AMD GPU 0 (0000:29:00.0): {note}; its fields read from it are N/A"]
    card.write("gpu_metrics", pack(V1_3, indep_throttle_status=0))  # fixed (a new driver)
    assert src.read_device(0, slow=True, processes=False)[0].throttle_mask == 0
    assert src.gpu_metrics_note(0) is None


def test_garbage_in_text_files_is_na(tmp_path: Path) -> None:
    host = FakeHost(tmp_path)
    card = rx7900xtx(host, 0)
    card.write("mem_info_vram_used", "lots")
    card.write("pp_dpm_mclk", "\x00\xff")
    card.write("current_link_width", "")
    card.hwmon_write("temp3_input", "-")
    card.hwmon_write("pwm1", "fast")
    card.hwmon_write("power1_cap", "1e9")
    card.write("gpu_busy_percent", "N/A")  # gpu_metrics' activity stands in
    card.write("gpu_metrics", b"\xff\xff")  # and gpu_metrics is garbage too
    s, _ = opened(host).read_device(0, slow=True, processes=False)
    assert (s.mem_used_bytes, s.clock_mem_mhz, s.pcie_width, s.mem_temp_c, s.fan_pct,
            s.power_limit_w, s.util_gpu_pct) == (None, 1249, None, None, None, None, None)
    assert s.error is None and not s.lost
    assert (s.temp_c, s.power_w) == (66, 181.0)  # the files that were fine


def test_files_that_vanish_between_ticks(tmp_path: Path) -> None:
    host = FakeHost(tmp_path)
    card = mi250x(host, 0)
    src = opened(host)
    assert src.read_device(0, slow=True, processes=False)[0].power_w == 389.0
    (card.hwmon / "power1_average").unlink()
    card.remove_file("mem_info_vram_used")
    card.remove_file("gpu_metrics")
    card.remove_file("ras/umc_err_count")
    s, _ = src.read_device(0, slow=True, processes=False)
    assert (s.power_w, s.mem_used_bytes, s.energy_j, s.throttle_mask, s.ecc_uncorrected) == (
        None, None, None, None, None)
    assert s.util_gpu_pct == 64 and s.error is None and not s.lost


@pytest.mark.parametrize("err", [errno.EPERM, errno.EACCES])
def test_a_runtime_suspended_gpu_refuses_reads(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                               err: int) -> None:
    host = FakeHost(tmp_path)
    card = rx7900xtx(host, 0)
    src = opened(host)
    # amdgpu answers EPERM for its power-management files while the dGPU sleeps.
    pm = ["gpu_busy_percent", "mem_busy_percent", "pp_dpm_sclk", "pp_dpm_mclk", "gpu_metrics"]
    deny(monkeypatch, *(card.dev / f for f in pm),
         *(card.hwmon / f for f in ("temp2_input", "power1_average", "freq1_input", "pwm1")),
         err=err)
    s, _ = src.read_device(0, slow=True, processes=False)
    assert (s.util_gpu_pct, s.util_mem_pct, s.clock_sm_mhz, s.temp_c, s.power_w, s.fan_pct,
            s.energy_j, s.throttle_mask) == (None,) * 8
    assert s.mem_used_bytes == 3 << 30 and s.error is None and not s.lost


def test_enodev_means_the_gpu_is_lost(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    host = FakeHost(tmp_path)
    card = mi300x(host, 0)
    src = opened(host)
    deny(monkeypatch, card.dev / "gpu_metrics", err=errno.ENODEV)
    s, procs = src.read_device(0, slow=False, processes=True)
    assert s.lost and s.error is not None and s.error.startswith("GPU is lost (")
    assert procs == ()


def test_a_card_removed_mid_run_is_lost_and_the_other_reads_on(tmp_path: Path) -> None:
    host = FakeHost(tmp_path)
    first, second = mi300x(host, 0, "0000:c1:00.0"), mi300x(host, 1, "0000:e1:00.0")
    src = opened(host)
    assert [src.read_device(i, slow=True, processes=False)[0].util_gpu_pct
            for i in range(2)] == [98, 98]
    first.remove()
    for _ in range(2):
        lost, _ = src.read_device(0, slow=True, processes=False)
        assert lost.lost and lost.error == "GPU is lost (its sysfs directory is gone)"
        assert lost.info.pci_bus_id == "00000000:C1:00.0"
        second.write("gpu_busy_percent", 55)
        ok, _ = src.read_device(1, slow=True, processes=False)
        assert (ok.lost, ok.error, ok.util_gpu_pct) == (False, None, 55)


def test_no_exception_ever_leaves_read_device(tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    host = FakeHost(tmp_path)
    mi300x(host, 0)
    src = opened(host)

    def broken(blob: bytes) -> object:
        raise RuntimeError("a bug in a parser")

    monkeypatch.setattr(gpu_metrics, "parse", broken)
    s, _ = src.read_device(0, slow=True, processes=False)
    assert s.error == "read failed: a bug in a parser" and not s.lost


def test_a_card_whose_static_files_refuse_still_opens(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    host = FakeHost(tmp_path)
    card = mi300x(host, 0)
    deny(monkeypatch, card.dev / "product_name", card.dev / "unique_id",
         card.dev / "pp_dpm_sclk", card.hwmon / "temp2_crit", err=errno.EPERM)
    info = opened(host).devices[0]
    assert (info.name, info.uuid, info.clock_sm_max_mhz, info.temp_slowdown_c) == (
        "AMD Instinct MI300X", "AMD-PCI-0000:c1:00.0", 2093, None)
