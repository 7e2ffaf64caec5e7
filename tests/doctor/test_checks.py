"""The check rules on hand-built readings: the thresholds and the cases a scenario file
does not reach."""

from __future__ import annotations

import dataclasses

from gputui.doctor import checks
from gputui.doctor.model import Check, GpuIdent, Report, Stage, Status, value_text
from gputui.telemetry.health import DeviceHealth
from gputui.telemetry.model import SystemInfo


def health(**kw: object) -> DeviceHealth:
    base = DeviceHealth(index=0, name="NVIDIA H100 80GB HBM3", uuid="GPU-0", pci_bus_id="0")
    return dataclasses.replace(base, **kw)


def test_pcie_generation_below_max_warns_at_idle_and_fails_under_load() -> None:
    h = health(pcie_gen=4, pcie_gen_max=5, pcie_width=16, pcie_width_max=16)
    assert checks.pcie_gen(h, loaded=False).status is Status.WARN
    assert checks.pcie_gen(h, loaded=True).status is Status.FAIL
    assert checks.pcie_width(h).status is Status.PASS
    assert value_text(checks.pcie_gen(h, loaded=False)) == "gen 4"


def test_power_limit_below_default_fails_above_warns() -> None:
    assert checks.power_limit(health(power_limit_w=699.0, power_default_limit_w=700.0)
                              ).status is Status.FAIL
    assert checks.power_limit(health(power_limit_w=750.0, power_default_limit_w=700.0)
                              ).status is Status.WARN
    assert checks.power_limit(health(power_limit_w=700.0, power_default_limit_w=700.0)
                              ).status is Status.PASS


def test_locked_clocks_show_through_the_clocks_event_reason() -> None:
    c = checks.app_clocks(health(throttle_mask=0x2, unsupported=frozenset({"app_clocks"})))
    assert c.status is Status.WARN and "locked-clock" in (c.detail or "")
    quiet = checks.app_clocks(health(throttle_mask=0x1, unsupported=frozenset({"app_clocks"})))
    assert quiet.status is Status.PASS


def test_pending_mode_changes_warn() -> None:
    assert checks.ecc_mode(health(ecc_mode=True, ecc_mode_pending=False)).status is Status.WARN
    assert checks.mig_mode(health(mig_mode=False, mig_mode_pending=True)).status is Status.WARN
    assert checks.ecc_mode(health(ecc_mode=True, ecc_mode_pending=True)).status is Status.PASS


def test_retired_pages_near_the_limit_fail() -> None:
    assert checks.retired_pages(health(retired_pages_sbe=59, retired_pages_dbe=1,
                                       retired_pages_pending=False)).status is Status.FAIL
    assert checks.retired_pages(health(retired_pages_sbe=59, retired_pages_dbe=0,
                                       retired_pages_pending=False)).status is Status.PASS


def test_temperature_headroom_thresholds() -> None:
    h = health(temp_slowdown_c=87)
    assert checks.temp_headroom(h, 78).status is Status.FAIL  # 9 °C left
    assert checks.temp_headroom(h, 77).status is Status.WARN  # 10 °C left
    assert checks.temp_headroom(h, 77).value == 10
    assert checks.temp_headroom(h, 68).status is Status.WARN
    assert checks.temp_headroom(h, 67).status is Status.PASS


def test_idle_throttle_reasons() -> None:
    h = health()
    assert checks.throttle_idle(h, 0x1 | 0x2 | 0x100).status is Status.PASS
    assert checks.throttle_idle(h, 0x4).status is Status.WARN  # SW power cap while idle
    for bit in (0x8, 0x40, 0x80):
        assert checks.throttle_idle(h, bit).status is Status.FAIL


def test_a_failed_read_warns_and_names_the_error() -> None:
    c = checks.persistence(health(read_errors=(("persistence_mode", "Unknown Error"),)))
    assert c.status is Status.WARN and c.detail == "NVML could not read it: Unknown Error"
    skipped = checks.persistence(health(unsupported=frozenset({"persistence_mode"})))
    assert skipped.status is Status.SKIP and skipped.detail == checks.NOT_SUPPORTED


def test_nvml_library_that_does_not_match_the_driver_fails() -> None:
    bad = checks.driver_check(SystemInfo("550.54.15", "12.535.104.05", "12.4"))
    assert bad.status is Status.FAIL and "12.535.104.05" in (bad.detail or "")
    assert checks.driver_check(SystemInfo("550.54.15", "12.550.54.15", "12.4")
                               ).status is Status.PASS


def test_vbios_compared_within_a_model_only() -> None:
    hs = [health(index=0, vbios_version="A"), health(index=1, vbios_version="A"),
          health(index=2, vbios_version="B"),
          health(index=3, name="NVIDIA L40S", vbios_version="C")]
    assert [c.status for c in checks.vbios_checks(hs)] == [
        Status.PASS, Status.PASS, Status.WARN, Status.PASS]


def _c(status: Status) -> Check:
    return Check("fan", 0, status, 1, 2, "%", "why", stage=Stage.HEALTH)


def test_exit_codes_and_verdict() -> None:
    gpus = (GpuIdent(0, "x", "u"),)
    warn = Report(checks=(_c(Status.PASS), _c(Status.WARN)), gpus=gpus)
    assert (warn.exit_code(False), warn.exit_code(True)) == (0, 1)
    assert warn.verdict(True) == ("doctor: FAIL — 0 failed, 1 warnings, 1 passed, 0 skipped "
                                  "on 1 GPU (--strict: warnings fail)")
    fail = Report(checks=(_c(Status.FAIL), _c(Status.SKIP)), gpus=gpus)
    assert fail.exit_code(False) == 1
    stopped = Report(checks=(_c(Status.PASS),), gpus=gpus, interrupted=True)
    assert stopped.exit_code(False) == 130 and "INTERRUPTED" in stopped.verdict(False)


def test_throttling_under_load() -> None:
    h = health()
    ok = checks.throttle_load(h, 0x4)  # SW power cap at full power
    assert ok.status is Status.PASS and ok.detail == "SW power cap at full power is expected"
    assert checks.throttle_load(h, 0x4 | 0x80).status is Status.FAIL  # power brake
    assert checks.throttle_load(h, 0x8).status is Status.FAIL  # HW slowdown
    assert checks.throttle_load(h, 0x20).status is Status.WARN


def test_temperature_headroom_under_load() -> None:
    h = health(temp_slowdown_c=87)
    assert checks.temp_headroom_load(h, 85).status is Status.FAIL
    assert checks.temp_headroom_load(h, 80).status is Status.WARN
    assert checks.temp_headroom_load(h, 70).status is Status.PASS
    assert checks.temp_headroom_load(h, None).status is Status.SKIP
