"""GPM profiling metrics through the real pynvml and the fake libnvidia-ml.so.1:
exact values, unsupported devices, older drivers, and another profiler holding the counters."""

from __future__ import annotations

import math
from datetime import UTC, datetime

import pytest

from gputui.telemetry import gpm
from gputui.telemetry.alerts import AlertEngine
from gputui.telemetry.model import HostSample, Snapshot, SystemInfo
from gputui.telemetry.nvml import NvmlSource
from tests.fakenvml.harness import FakeNvml

MIB = 1024 * 1024

# gpm.conf, GPU 0, as NVML gives it (%; MiB/s) → gputui's fields (%; B/s).
H100_EXPECTED = {
    "sm_active_pct": 22.5,
    "sm_occupancy_pct": 12.25,
    "tensor_active_pct": 0.5,
    "dram_active_pct": 31.5,
    "fp64_active_pct": 0.0,
    "fp32_active_pct": 18.5,
    "fp16_active_pct": 2.5,
    "gr_engine_active_pct": 97.5,
    "gpm_pcie_tx_bps": 150 * MIB,
    "gpm_pcie_rx_bps": 1200 * MIB,
    "nvlink_tx_bps": 4096 * MIB,
    "nvlink_rx_bps": 2048 * MIB,
}


def _open(fake_nvml: FakeNvml, scenario: object) -> NvmlSource:
    fake_nvml.use(scenario)  # type: ignore[arg-type]
    src = NvmlSource()
    # GPM pairs closer than gpm.MIN_SAMPLE_GAP_S are not taken: a clock that moves a
    # second per reading stands for a 1 Hz monitor.
    ticks = iter(range(1000, 100000))
    src.gpm_clock = lambda: float(next(ticks))  # type: ignore[method-assign]
    src.open()
    return src


def test_metrics_come_from_two_samples_with_exact_values(fake_nvml: FakeNvml) -> None:
    src = _open(fake_nvml, "gpm")
    (first0, _), _ = src.read()
    # One sample is not a rate: nothing yet, not 0.
    assert all(getattr(first0, f) is None for f in gpm.FIELDS)
    (g0, g1), _ = src.read()
    assert {f: getattr(g0, f) for f in gpm.FIELDS} == H100_EXPECTED
    assert g0.util_gpu_pct == 98 and g0.gpm_note is None
    # The A100 has no GPM: every field null.
    assert all(getattr(g1, f) is None for f in gpm.FIELDS)
    assert fake_nvml.count_for("nvmlGpmSampleGet") == 2  # only the H100 is sampled
    assert fake_nvml.count_for("nvmlGpmMetricsGet") == 1
    src.close()
    assert fake_nvml.count_for("nvmlGpmSampleFree") == 2  # both buffers given back


def test_a_gpu_without_nvlink_has_null_nvlink_rates(fake_nvml: FakeNvml) -> None:
    src = _open(fake_nvml, {"device_count": 1, "gpu.0.gpm_supported": 1,
                            "gpu.0.gpm_sm_util": 64, "gpu.0.nvlink": 0})
    src.read()
    (g0,), _ = src.read()
    assert g0.sm_active_pct == 64.0
    assert g0.nvlink_tx_bps is None and g0.nvlink_rx_bps is None
    assert g0.gpm_pcie_rx_bps == 200 * MIB  # the fake's default, still read
    src.close()


@pytest.mark.parametrize("scenario", [
    {"device_count": 1},  # isSupportedDevice = 0 (pre-Hopper)
    {"device_count": 1, "gpu.0.unsupported": ["gpm"]},  # NOT_SUPPORTED
    {"device_count": 1, "not_found": ["nvmlGpmQueryDeviceSupport"]},  # an older driver
], ids=["not-a-gpm-device", "not-supported", "older-driver"])
def test_no_gpm_is_null_and_never_asked_again(fake_nvml: FakeNvml,
                                              scenario: dict[str, object]) -> None:
    src = _open(fake_nvml, scenario)
    for _ in range(4):
        (g0,), _ = src.read()
        assert g0.sm_active_pct is None and g0.gpm_note is None
    assert fake_nvml.count_for("nvmlGpmQueryDeviceSupport") == 1
    assert fake_nvml.count_for("nvmlGpmSampleGet") == 0
    assert g0.util_gpu_pct is not None  # the rest of the device is still read
    src.close()


def test_counters_held_by_another_profiler_said_once_and_backed_off(
        fake_nvml: FakeNvml) -> None:
    src = _open(fake_nvml, {"device_count": 1, "gpu.0.gpm_supported": 1,
                            "gpu.0.gpm_sm_util": 40, "gpu.0.gpm_busy_from_s": 0,
                            "gpu.0.gpm_busy_until_s": 100})
    clock = [1000.0]
    src.gpm_clock = lambda: clock[0]  # type: ignore[method-assign]
    engine = AlertEngine()
    raised = []
    for tick in range(5):
        (g0,), _ = src.read()
        assert g0.sm_active_pct is None
        assert g0.gpm_note is not None and "another profiler" in g0.gpm_note
        snap = Snapshot(time=datetime(2026, 11, 23, 4, 0, tick, tzinfo=UTC), mono=tick,
                        system=SystemInfo(), host=HostSample("h"), gpus=(g0,))
        raised += engine.update(snap, {})
    # Asked once, then left alone for the back-off instead of failing every tick.
    assert fake_nvml.count_for("nvmlGpmSampleGet") == 1
    assert [(a.kind, a.gpu_index) for a in raised] == [("gpm_busy", 0)]
    assert raised[0].message == ("GPU 0: profiling counters are held by another profiler "
                                 "(DCGM or Nsight): SM activity is not shown; retrying in 10 s")
    # Still busy at the retry: the wait doubles.
    clock[0] += gpm.BACKOFF_FIRST_S
    (g0,), _ = src.read()
    assert fake_nvml.count_for("nvmlGpmSampleGet") == 2
    assert g0.gpm_note is not None and "retrying in 20 s" in g0.gpm_note
    # The profiler went away: the next retry samples again, two samples give values.
    fake_nvml.set_time(200)
    clock[0] += 2 * gpm.BACKOFF_FIRST_S
    (g0,), _ = src.read()
    assert g0.gpm_note is None and g0.sm_active_pct is None
    clock[0] += 1.0
    (g0,), _ = src.read()
    assert g0.sm_active_pct == 40.0
    snap = Snapshot(time=datetime(2026, 11, 23, 4, 1, tzinfo=UTC), mono=60.0,
                    system=SystemInfo(), host=HostSample("h"), gpus=(g0,))
    engine.update(snap, {})
    assert not [a for a in engine.active() if a.kind == "gpm_busy"]
    src.close()


def test_backoff_doubles_up_to_its_cap() -> None:
    b = gpm.GpmBackoff()
    assert b.due(0.0)
    waits = []
    for _ in range(8):
        b.busy(0.0)
        waits.append(b.wait_s)
    assert waits == [10.0, 20.0, 40.0, 80.0, 160.0, 300.0, 300.0, 300.0]
    assert not b.due(299.0) and b.due(300.0)
    b.ok()
    assert b.due(0.0) and b.note is None


def test_a_metric_in_error_or_without_data_is_null() -> None:
    values = gpm.values_from_results([(gpm.SM_UTIL, 0, 55.0), (gpm.ANY_TENSOR_UTIL, 3, 9.0),
                                      (gpm.DRAM_BW_UTIL, 0, math.nan),
                                      (gpm.PCIE_TX_PER_SEC, 0, 2.0)])
    assert values["sm_active_pct"] == 55.0
    assert values["tensor_active_pct"] is None and values["dram_active_pct"] is None
    assert values["gpm_pcie_tx_bps"] == 2 * MIB
    assert values["nvlink_rx_bps"] is None


@pytest.mark.parametrize(("util", "sm", "tensor", "fp32", "want"), [
    (98, 22.5, 0.5, 18.5,
     "busy 98 % but SMs 22 % active, tensor cores idle: launch- or input-bound?"),
    (95, 30.0, 12.0, 5.0,
     "busy 95 % but SMs 30 % active, tensor cores 12 % active: launch- or input-bound?"),
    (90, 40.0, None, None, "busy 90 % but SMs 40 % active: launch- or input-bound?"),
    (99, 91.0, 0.0, 60.0,
     "SMs 91 % active, tensor cores idle: fp32 math (mixed precision would use them)"),
    (99, 91.0, 45.0, 20.0, None),  # compute-bound on the tensor cores: nothing to say
    (40, 10.0, 0.0, 5.0, None),  # not busy
    (98, None, None, None, None),  # no GPM: no verdict
])
def test_verdict_in_words(util: float, sm: float | None, tensor: float | None,
                          fp32: float | None, want: str | None) -> None:
    assert gpm.verdict(util, sm, tensor, fp32) == want


def test_a_pair_closer_than_the_minimum_gap_keeps_the_previous_figures(
        fake_nvml: FakeNvml) -> None:
    """On a real H100 two GPM samples 50 ms apart read all zeros: a tick that comes sooner
    than gpm.MIN_SAMPLE_GAP_S after the last sample takes none and keeps the figures."""
    src = _open(fake_nvml, "gpm")
    clock = [1000.0]
    src.gpm_clock = lambda: clock[0]  # type: ignore[method-assign]
    src.read()
    clock[0] += 1.0
    (g0, _), _ = src.read()
    assert g0.sm_active_pct == 22.5
    calls = fake_nvml.count_for("nvmlGpmSampleGet")
    fake_nvml.set_time(60)  # the fake's counters move on ...
    clock[0] += gpm.MIN_SAMPLE_GAP_S / 2  # ... but too soon for a new pair
    (soon0, _), _ = src.read()
    assert fake_nvml.count_for("nvmlGpmSampleGet") == calls
    assert soon0.sm_active_pct == 22.5  # the previous figure, not None and not 0
    clock[0] += gpm.MIN_SAMPLE_GAP_S
    src.read()
    assert fake_nvml.count_for("nvmlGpmSampleGet") == calls + 1  # sampled again (GPU 1: no GPM)
    src.close()


def _buffer(triples: list[tuple[int, int, float]]) -> bytes:
    return b"".join(gpm.METRIC_STRUCT.pack(*t) for t in triples)


def test_a_filled_request_parses_the_same_whether_every_metric_answered_or_not() -> None:
    ids = gpm.request_ids(2)  # the fixed metrics, then RX and TX of links 0 and 1
    ok = [(mid, 0, float(i + 1)) for i, mid in enumerate(ids)]
    values, links = gpm.parse_buffer(_buffer(ok), 2)
    assert values == gpm.values_from_results(ok)
    k = len(gpm.METRIC_IDS)
    # Link 1: RX is entry k+2, TX entry k+3 (MiB/s) → (TX, RX) in bytes/s.
    assert gpm.link_rate(links, 1) == ((k + 4) * MIB, (k + 3) * MIB)
    assert gpm.link_rate(links, 2) == (None, None)  # past the last link
    # Link 0's TX failed and the SM metric has no data: only those are null.
    bad = list(ok)
    bad[k + 1] = (bad[k + 1][0], 3, 0.0)
    bad[0] = (bad[0][0], 0, math.nan)
    values, links = gpm.parse_buffer(_buffer(bad), 2)
    assert values == {**gpm.values_from_results(ok), gpm.FIELDS[0]: None}
    assert gpm.link_rate(links, 0) == (None, (k + 1) * MIB)
    assert gpm.link_rate(links, 1) == ((k + 4) * MIB, (k + 3) * MIB)
