"""GPM profiling metrics: what NVML's "GPU utilization" hides.

NVML's utilization is the share of time in which *any* kernel ran; a GPU at 100 % can
have most of its SMs idle. Hopper and newer GPUs expose through NVML's GPM API the
profiling counters DCGM uses (SM active, occupancy, tensor/FP pipes, DRAM bandwidth,
PCIe/NVLink bytes). A metric is computed from two counter samples, so each device keeps
its previous sample and every tick yields the rates over the last interval.

This module is the pure part (metric ids from nvml.h, unit conversion, the back-off
when another profiler holds the counters); the NVML calls are in the `nvml` package.
"""

from __future__ import annotations

import functools
import operator
import struct
from collections.abc import Iterable
from dataclasses import dataclass, fields

MIB = 1024 * 1024

# nvmlGpmMetricId_t values (nvml.h).
GRAPHICS_UTIL = 1
SM_UTIL = 2
SM_OCCUPANCY = 3
ANY_TENSOR_UTIL = 5
DRAM_BW_UTIL = 10
FP64_UTIL = 11
FP32_UTIL = 12
FP16_UTIL = 13
PCIE_TX_PER_SEC = 20  # MiB/s
PCIE_RX_PER_SEC = 21  # MiB/s
NVLINK_TOTAL_RX_PER_SEC = 60  # MiB/s, all links
NVLINK_TOTAL_TX_PER_SEC = 61  # MiB/s, all links

# NVML return codes that mean "another profiler (DCGM, Nsight, CUPTI) holds the
# counters": NVML_ERROR_IN_USE, NVML_ERROR_INSUFFICIENT_RESOURCES.
BUSY_CODES = frozenset({19, 23})

# First wait after the counters were found busy, doubled up to BACKOFF_MAX_S: a profiling
# session usually lasts minutes, and asking each tick would only fail each tick.
BACKOFF_FIRST_S = 10.0
BACKOFF_MAX_S = 300.0
# Two GPM samples closer than this say nothing: on an H100 (driver 580.159.04) samples
# 50 ms apart gave every metric as 0.0 with NVML_SUCCESS (and DRAM as NaN) under a full
# matmul load, while 100 ms and more gave the true figures (SM active 96 %, tensor 93 %).
# The counters behind a sample refresh about every 100 ms, so a sample taken sooner than
# this after the previous one is not taken: the tick keeps the previous figures.
MIN_SAMPLE_GAP_S = 0.15


@dataclass(frozen=True, slots=True, kw_only=True)
class GpmActivity:
    """What share of the SMs / pipes / DRAM bandwidth was really busy over the last tick,
    in % (GPM, Hopper and newer); None where the device has no GPM or a read failed.

    The one record of these figures: a GpuSample carries them for the whole GPU, a
    MigDevice for its GPU instance (GPM samples a GPU instance, not a compute instance).
    Keyword-only, so that the records built on it keep their own positional fields."""

    sm_active_pct: float | None = None
    sm_occupancy_pct: float | None = None
    tensor_active_pct: float | None = None
    dram_active_pct: float | None = None
    fp64_active_pct: float | None = None
    fp32_active_pct: float | None = None
    fp16_active_pct: float | None = None
    gr_engine_active_pct: float | None = None


ACTIVITY_FIELDS: tuple[str, ...] = tuple(f.name for f in fields(GpmActivity))


# NVML's unit → gputui's: % stays % (NVML gives 0.0 .. 100.0); MiB/s → bytes/s.
_PCT = 1.0
_MIBPS = float(MIB)


@dataclass(frozen=True, slots=True)
class GpmMetric:
    """One GPM metric NVML computes, and the GpuSample field it fills."""

    metric_id: int
    field: str  # the GpuSample field it fills
    scale: float  # NVML's unit → gputui's (%, B/s)


METRICS: tuple[GpmMetric, ...] = (
    GpmMetric(SM_UTIL, "sm_active_pct", _PCT),
    GpmMetric(SM_OCCUPANCY, "sm_occupancy_pct", _PCT),
    GpmMetric(ANY_TENSOR_UTIL, "tensor_active_pct", _PCT),
    GpmMetric(DRAM_BW_UTIL, "dram_active_pct", _PCT),
    GpmMetric(FP64_UTIL, "fp64_active_pct", _PCT),
    GpmMetric(FP32_UTIL, "fp32_active_pct", _PCT),
    GpmMetric(FP16_UTIL, "fp16_active_pct", _PCT),
    GpmMetric(GRAPHICS_UTIL, "gr_engine_active_pct", _PCT),
    GpmMetric(PCIE_TX_PER_SEC, "gpm_pcie_tx_bps", _MIBPS),
    GpmMetric(PCIE_RX_PER_SEC, "gpm_pcie_rx_bps", _MIBPS),
    GpmMetric(NVLINK_TOTAL_TX_PER_SEC, "nvlink_tx_bps", _MIBPS),
    GpmMetric(NVLINK_TOTAL_RX_PER_SEC, "nvlink_rx_bps", _MIBPS),
)
METRIC_IDS: tuple[int, ...] = tuple(m.metric_id for m in METRICS)
FIELDS: tuple[str, ...] = tuple(m.field for m in METRICS)
_BY_ID = {m.metric_id: m for m in METRICS}
_SCALES: tuple[float, ...] = tuple(m.scale for m in METRICS)

# nvmlGpmMetric_t as laid out in memory: metricId, nvmlReturn, value, then three name
# pointers. Unpacking the filled array in one go costs a tenth of reading it field by
# field through ctypes (this runs every tick for every GPU).
METRIC_STRUCT = struct.Struct("=Iid24x")


def link_metric_ids(link: int) -> tuple[int, int]:
    """(RX, TX) per-link NVLink rate metric ids: links 0-17 from 62, 18-35 from 212."""
    base = 62 + 2 * link if link < 18 else 212 + 2 * (link - 18)
    return base, base + 1


def values_from_buffer(raw: bytes) -> dict[str, float | None]:
    """`values_from_results` over the raw bytes of nvmlGpmMetricsGet_t.metrics[:n]."""
    return parse_buffer(raw, 0)[0]


@functools.cache
def _array_struct(n: int) -> struct.Struct:
    return struct.Struct("=" + "Iid24x" * n)


@functools.cache
def request_ids(links: int) -> tuple[int, ...]:
    """The metric ids asked for, in order: the fixed ones, then RX and TX of each link."""
    return (*METRIC_IDS, *(m for i in range(links) for m in link_metric_ids(i)))


# Per-link NVLink rates as NVML gives them: RX then TX of link 0, of link 1, ... in MiB/s,
# None where a metric did not answer. Kept raw because a GPU has up to 18 links and most
# are idle: views compare this tuple with the last one instead of converting each tick.
LinkMiBps = tuple[float | None, ...]


def link_rate(raw: LinkMiBps, link: int) -> tuple[float | None, float | None]:
    """(TX, RX) bytes/s of one link from `LinkMiBps` (None, None past its end)."""
    if 2 * link + 1 >= len(raw):
        return None, None
    rx, tx = raw[2 * link], raw[2 * link + 1]
    return (None if tx is None else tx * MIB), (None if rx is None else rx * MIB)


def parse_buffer(raw: bytes, links: int) -> tuple[dict[str, float | None], LinkMiBps]:
    """The filled nvmlGpmMetricsGet_t.metrics[:n] of a request for `request_ids(links)`
    → (GpuSample field → value, the per-link rates).

    One unpack of the whole array, and values by position, since NVML fills the request's
    entries in place: this runs every tick for every GPU, with 48 metrics on an 18-link
    GPU. Should an id not be where it was asked for, or a metric fail or give NaN (no
    data), the metrics are matched one by one instead."""
    n = len(raw) // METRIC_STRUCT.size
    flat = _array_struct(n).unpack(raw[:n * METRIC_STRUCT.size])
    ids, rcs, vals = flat[0::3], flat[1::3], flat[2::3]
    total = sum(vals)
    k = len(METRIC_IDS)
    if ids == request_ids(links) and not any(rcs) and total == total:
        return dict(zip(FIELDS, map(operator.mul, vals[:k], _SCALES), strict=True)), vals[k:]
    got = {mid: (v if rc == 0 and v == v else None) for mid, rc, v in zip(ids, rcs, vals,
                                                                           strict=True)}
    per_link = tuple(got.get(m) for i in range(links) for m in link_metric_ids(i))
    return values_from_results(zip(ids, rcs, vals, strict=True)), per_link


def values_from_results(results: Iterable[tuple[int, int, float]]) -> dict[str, float | None]:
    """GpuSample field → value from nvmlGpmMetricsGet's (metric id, return code, value)
    triples. A metric the device does not have (no NVLink, an older GPU) is None."""
    out: dict[str, float | None] = dict.fromkeys(FIELDS)
    for metric_id, rc, value in results:
        m = _BY_ID.get(metric_id)
        if m is None or rc != 0 or value != value:  # NaN: no data
            continue
        out[m.field] = value * m.scale
    return out


def busy_note(retry_s: float) -> str:
    return ("profiling counters are held by another profiler (DCGM or Nsight): SM activity "
            f"is not shown; retrying in {retry_s:.0f} s")


class GpmBackoff:
    """When GPM sampling failed because another profiler holds the counters: say so
    once, and ask again only after a growing wait instead of every tick."""

    def __init__(self) -> None:
        self.wait_s = 0.0
        self.retry_at: float | None = None
        self.note: str | None = None

    def due(self, now: float) -> bool:
        return self.retry_at is None or now >= self.retry_at

    def busy(self, now: float) -> None:
        self.wait_s = BACKOFF_FIRST_S if self.wait_s == 0.0 else min(BACKOFF_MAX_S,
                                                                       2 * self.wait_s)
        self.retry_at = now + self.wait_s
        self.note = busy_note(self.wait_s)

    def ok(self) -> None:
        self.wait_s = 0.0
        self.retry_at = None
        self.note = None


# --- the verdict: what the counters say about a busy GPU, in words ---------------------

BUSY_UTIL_PCT = 80.0  # NVML's utilization from which a GPU counts as busy
LOW_SM_ACTIVE_PCT = 50.0  # a busy GPU with fewer SMs active than this is not compute-bound
TENSOR_IDLE_PCT = 1.0
FP32_BUSY_PCT = 10.0


def verdict(util_gpu_pct: float | None, sm_active_pct: float | None,
            tensor_active_pct: float | None, fp32_active_pct: float | None) -> str | None:
    """One line, like the throttle line, when "utilization" misleads; None otherwise.

    "busy 98 % but SMs 22 % active, tensor cores idle: launch- or input-bound?" — kernels
    run all the time but use few SMs (small kernels, launch overhead, a starved input
    pipeline). "SMs 91 % active, tensor cores idle: fp32 math (mixed precision would use
    them)" — busy doing fp32 where bf16/fp16 would run on the tensor cores."""
    if util_gpu_pct is None or sm_active_pct is None or util_gpu_pct < BUSY_UTIL_PCT:
        return None
    tensor_idle = tensor_active_pct is not None and tensor_active_pct < TENSOR_IDLE_PCT
    if sm_active_pct < LOW_SM_ACTIVE_PCT:
        if tensor_active_pct is None:
            tensor = ""
        elif tensor_idle:
            tensor = ", tensor cores idle"
        else:
            tensor = f", tensor cores {tensor_active_pct:.0f} % active"
        return (f"busy {util_gpu_pct:.0f} % but SMs {sm_active_pct:.0f} % active{tensor}: "
                "launch- or input-bound?")
    if tensor_idle and fp32_active_pct is not None and fp32_active_pct >= FP32_BUSY_PCT:
        return (f"SMs {sm_active_pct:.0f} % active, tensor cores idle: fp32 math (mixed "
                "precision would use them)")
    return None
