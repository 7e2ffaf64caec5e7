"""Performance checks from probe figures: each GPU against its model's peak and against
the box's own median. A GPU 10 % or more below the median of its siblings on any probe
is a straggler: it sets the pace of every synchronous training step, so it fails.

The figures come from probes run in the benchmark worker process; this module only
judges them (and is tested on recorded figures).
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from gputui.doctor.model import Check, Stage, Status

# A GPU this far below the box's median on a probe is a straggler.
STRAGGLER_FRACTION = 0.10
# Below this share of the datasheet peak, warn: datasheet peaks are boost-clock figures,
# so a healthy GPU reaches 60-90 % of them on large shapes, rarely less than half.
PEAK_WARN_FRACTION = 0.5

PROBES: dict[str, tuple[str, str]] = {
    # probe id: (unit, what it measures)
    "matmul_bf16": ("TFLOP/s", "bf16 matrix multiply"),
    "matmul_tf32": ("TFLOP/s", "tf32 matrix multiply"),
    "membw": ("GB/s", "device memory bandwidth (copy)"),
    "h2d": ("GB/s", "host→device bandwidth, pinned"),
    "d2h": ("GB/s", "device→host bandwidth, pinned"),
    "p2p": ("GB/s", "GPU-to-GPU copy bandwidth"),
    "allreduce": ("GB/s", "NCCL all-reduce bus bandwidth"),
}

WHY_PERF = ("a GPU slower than its siblings on any probe is a straggler: every synchronous "
            "step waits for it")


@dataclass(frozen=True, slots=True)
class ProbeFigure:
    """One probe's result on one GPU (or a pair, or the whole box)."""

    probe: str  # a key of PROBES
    gpu: int | None  # None: the whole box (all-reduce)
    value: float | None  # None when the probe failed (see `error`)
    peak: float | None = None  # the ceiling it is judged against, same unit
    peak_what: str = "the datasheet peak"  # what that ceiling is
    peer: int | None = None  # p2p: the other GPU
    link: str | None = None  # p2p: "NVLink", "PCIe P2P" or "through host memory"
    error: str | None = None  # why the probe failed (crash, hang, out of memory)
    throttle: str | None = None  # throttle reasons seen while it ran, in words


# PCIe transfer rate per lane (GT/s) and line-code efficiency, by generation.
_PCIE_LANE = {1: (2.5, 8 / 10), 2: (5.0, 8 / 10), 3: (8.0, 128 / 130), 4: (16.0, 128 / 130),
              5: (32.0, 128 / 130), 6: (64.0, 242 / 256)}


def pcie_peak_gbps(gen: int | None, width: int | None) -> float | None:
    """The link's raw one-way bandwidth in GB/s (gen 4 ×16: 31.5; gen 5 ×16: 63.0), the
    ceiling for host↔device copies before protocol overhead."""
    if gen not in _PCIE_LANE or not width:
        return None
    rate, code = _PCIE_LANE[gen]
    return rate * code * width / 8


def bus_bandwidth(algbw_gbps: float, ranks: int) -> float:
    """NCCL all-reduce bus bandwidth as nccl-tests reports it: algbw × 2(n−1)/n."""
    return algbw_gbps * 2 * (ranks - 1) / ranks if ranks > 1 else algbw_gbps


def perf_checks(figures: Sequence[ProbeFigure]) -> list[Check]:
    out: list[Check] = []
    by_probe: dict[str, list[ProbeFigure]] = {}
    for f in figures:
        by_probe.setdefault(f.probe, []).append(f)
    for figs in by_probe.values():
        ok = [f.value for f in figs if f.value is not None]
        median = statistics.median(ok) if len(ok) >= 2 else None
        for f in figs:
            out.append(_judge(f, median))
    return out


def _judge(f: ProbeFigure, median: float | None) -> Check:
    unit, what = PROBES[f.probe]
    cid = f"perf_{f.probe}" if f.peer is None else f"perf_{f.probe}_{f.gpu}_{f.peer}"
    notes = [what + (f" over {f.link}" if f.link else "")]
    if f.throttle:
        notes.append(f"throttled while it ran: {f.throttle}")

    def check(status: Status, expected: float | str | None, *extra: str) -> Check:
        return Check(id=cid, gpu=f.gpu, status=status,
                     value=None if f.value is None else _sig(f.value),
                     expected=expected, unit=unit, why=WHY_PERF,
                     detail="; ".join([*extra, *notes]), stage=Stage.PERFORMANCE)

    if f.value is None:
        return check(Status.FAIL, None, f"the probe failed: {f.error or 'no result'}")
    if median is not None and f.value <= (1 - STRAGGLER_FRACTION) * median:
        slower = (1 - f.value / median) * 100
        return check(Status.FAIL, _sig(median),
                     f"straggler: {slower:.0f} % below the box's median {_sig(median):g} {unit}")
    if f.peak:
        share = f.value / f.peak
        share_text = f"{share * 100:.0f} % of {f.peak_what} {_sig(f.peak):g} {unit}"
        return check(Status.WARN if share < PEAK_WARN_FRACTION else Status.PASS,
                     _sig(f.peak), share_text)
    return check(Status.PASS, None if median is None else _sig(median),
                 "no datasheet peak for this GPU" if median is None else
                 f"within {STRAGGLER_FRACTION * 100:.0f} % of the box's median")


def _sig(x: float) -> float:
    """Four significant digits: a figure, not float noise (and never 0 for a tiny one)."""
    return float(f"{x:.4g}")
