"""The straggler rule and the peak comparison, on recorded probe figures."""

from __future__ import annotations

import pytest

from gputui.doctor.model import Stage, Status
from gputui.doctor.perf import ProbeFigure, bus_bandwidth, pcie_peak_gbps, perf_checks

# bf16 matmul TFLOP/s measured on an 8×H100 SXM box (datasheet dense bf16: 989.4).
H100_BF16 = [702.1, 698.4, 705.3, 699.0, 611.8, 703.7, 700.2, 697.9]


def test_a_gpu_ten_percent_below_the_median_is_a_straggler() -> None:
    figs = [ProbeFigure("matmul_bf16", i, v, peak=989.4) for i, v in enumerate(H100_BF16)]
    checks = perf_checks(figs)
    assert [c.status for c in checks] == [Status.PASS] * 4 + [Status.FAIL] + [Status.PASS] * 3
    bad = checks[4]
    assert (bad.id, bad.gpu, bad.value, bad.unit) == ("perf_matmul_bf16", 4, 611.8, "TFLOP/s")
    assert bad.expected == 699.6  # the box's median
    assert bad.detail.startswith("straggler: 13 % below the box's median 699.6 TFLOP/s")
    assert checks[0].detail.startswith("71 % of the datasheet peak 989.4 TFLOP/s")
    assert {c.stage for c in checks} == {Stage.PERFORMANCE}


def test_just_under_ten_percent_is_not_a_straggler() -> None:
    figs = [ProbeFigure("membw", 0, 3000.0), ProbeFigure("membw", 1, 3000.0),
            ProbeFigure("membw", 2, 2701.0)]
    assert [c.status for c in perf_checks(figs)] == [Status.PASS] * 3
    figs[2] = ProbeFigure("membw", 2, 2700.0)
    assert [c.status for c in perf_checks(figs)] == [Status.PASS, Status.PASS, Status.FAIL]


def test_far_below_the_datasheet_peak_warns_even_alone() -> None:
    (c,) = perf_checks([ProbeFigure("h2d", 0, 11.0, peak=64.0)])
    assert c.status is Status.WARN and c.detail.startswith("17 % of the datasheet peak 64 GB/s")


def test_a_failed_probe_fails_its_check_with_the_reason_and_others_go_on() -> None:
    figs = [ProbeFigure("matmul_tf32", 0, None, error="timeout after 60 s (probe hung)"),
            ProbeFigure("matmul_tf32", 1, 400.0), ProbeFigure("matmul_tf32", 2, 402.0)]
    checks = perf_checks(figs)
    assert [c.status for c in checks] == [Status.FAIL, Status.PASS, Status.PASS]
    assert checks[0].detail.startswith("the probe failed: timeout after 60 s (probe hung)")
    assert checks[0].value is None


def test_pairs_and_links_and_throttling_are_named() -> None:
    figs = [ProbeFigure("p2p", 0, 180.0, peer=1, link="NVLink"),
            ProbeFigure("p2p", 0, 179.0, peer=2, link="NVLink"),
            ProbeFigure("p2p", 1, 24.0, peer=2, link="PCIe P2P",
                        throttle="SW power cap")]
    checks = perf_checks(figs)
    assert [c.id for c in checks] == ["perf_p2p_0_1", "perf_p2p_0_2", "perf_p2p_1_2"]
    assert checks[2].status is Status.FAIL
    assert "over PCIe P2P" in checks[2].detail
    assert "throttled while it ran: SW power cap" in checks[2].detail


def test_pcie_link_ceiling() -> None:
    assert pcie_peak_gbps(5, 16) == pytest.approx(63.015, abs=1e-3)
    assert pcie_peak_gbps(4, 16) == pytest.approx(31.508, abs=1e-3)
    assert pcie_peak_gbps(3, 8) == pytest.approx(7.877, abs=1e-3)
    assert pcie_peak_gbps(None, 16) is None


def test_bus_bandwidth_is_nccl_tests_formula() -> None:
    assert bus_bandwidth(100.0, 8) == 175.0
    assert bus_bandwidth(100.0, 2) == 100.0
    assert bus_bandwidth(100.0, 1) == 100.0


def test_interconnect_results_map_worker_indices_back_to_nvml_gpus() -> None:
    from gputui.bench.events import Point
    from gputui.bench.result import ErrorInfo, Result
    from gputui.doctor.probes import interconnect_figures

    def pt(src: int, dst: int, gbps: float) -> Point:
        return Point(label=f"{src}->{dst}", batch_size=None, throughput=gbps, unit="GB/s",
                     extra={"src": src, "dst": dst})

    # The worker saw NVML GPUs 2 and 5 as cuda:0 and cuda:1.
    links = {(2, 5): "NVLink", (5, 2): "NVLink"}
    ok = Result(id="x", benchmark="p2p", status="ok", points=(pt(0, 1, 180.0), pt(1, 0, 20.0)))
    figs = interconnect_figures("p2p", ok, [2, 5], lambda a, b: links.get((a, b)))
    assert [(f.gpu, f.peer, f.value, f.link) for f in figs] == [
        (2, 5, 180.0, "NVLink"), (5, 2, 20.0, "NVLink")]
    checks = perf_checks(figs)
    assert [(c.id, c.status) for c in checks] == [("perf_p2p_2_5", Status.PASS),
                                                  ("perf_p2p_5_2", Status.FAIL)]
    failed = Result(id="y", benchmark="allreduce", status="failed",
                    error=ErrorInfo(kind="crash", message="NCCL error: unhandled system error"))
    (fig,) = interconnect_figures("allreduce", failed, [2, 5], lambda a, b: None)
    (c,) = perf_checks([fig])
    assert (c.id, c.gpu, c.status) == ("perf_allreduce", None, Status.FAIL)
    assert "NCCL error: unhandled system error (crash)" in c.detail


def test_throttle_reasons_are_attributed_to_the_point_that_was_running() -> None:
    from gputui.doctor.probes import attribute

    ticks = [(0.5, 0x0), (1.0, 0x4), (1.5, 0x80), (2.0, 0x0), (2.5, 0x0)]
    points = [(1.2, "fp32"), (1.6, "tf32"), (1.7, "fp16"), (2.6, "bf16")]
    assert attribute(ticks, points) == {"fp32": 0x4, "tf32": 0x80, "fp16": 0x80, "bf16": 0}
    assert attribute([], points) == {"fp32": 0, "tf32": 0, "fp16": 0, "bf16": 0}
