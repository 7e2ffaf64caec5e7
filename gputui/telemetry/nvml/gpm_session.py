"""One GPM session: two alternating sample buffers and a metrics request, for a whole GPU
(`nvmlGpmSampleGet`) or one GPU instance of a MIG GPU (`nvmlGpmMigSampleGet`).

A metric comes from two samples: each tick takes a sample into one buffer and asks for
the metrics from the previous sample (the other buffer) to this one.
"""

from __future__ import annotations

import contextlib
import ctypes
from collections.abc import Callable
from typing import Any

import pynvml

from gputui.telemetry import gpm
from gputui.telemetry.nvml.query import NvmlQuery


def gpm_available(q: NvmlQuery, handle: Any) -> bool | None:
    """Whether the device has GPM: None when that could not be told this time."""
    if ctypes.sizeof(pynvml.c_nvmlGpmMetric_t) != gpm.METRIC_STRUCT.size:
        return False  # a pynvml whose struct layout we do not know
    support = q(pynvml.nvmlGpmQueryDeviceSupport, handle, key="gpm")
    if support is None:
        return False if "gpm" in q.unsupported or q.lost else None
    return bool(support.isSupportedDevice)


class GpmSession:
    """Two GPM sample buffers and a request for `ids`. `sample(buf)` takes a sample into
    `buf` through the query (it returns None when that failed)."""

    def __init__(self, q: NvmlQuery, ids: tuple[int, ...],
                 sample: Callable[[Any], Any]) -> None:
        self.q = q
        self.ids = ids
        self._sample = sample
        self.samples: tuple[Any, Any] | None = None
        a = q(pynvml.nvmlGpmSampleAlloc, key="gpm_alloc")
        b = q(pynvml.nvmlGpmSampleAlloc, key="gpm_alloc") if a is not None else None
        if a is not None and b is not None:
            self.samples = (a, b)
        elif a is not None:
            with contextlib.suppress(pynvml.NVMLError):
                pynvml.nvmlGpmSampleFree(a)
        self.request = pynvml.c_nvmlGpmMetricsGet_t()
        self.request.version = pynvml.NVML_GPM_METRICS_GET_VERSION
        for i, metric_id in enumerate(ids):
            self.request.metrics[i].metricId = metric_id
        self.current = 0  # the buffer the next sample goes into
        self.primed = False  # the other buffer holds a good sample
        self.sampled_at: float | None = None  # the clock's time of that sample
        self.last: dict[str, Any] = {}  # the figures of the last pair (the caller's)
        self.sample_failed = False  # the last step's sample did not answer

    @property
    def ok(self) -> bool:
        return self.samples is not None

    def too_soon(self, now: float, min_gap_s: float) -> bool:
        """A new pair this close to the last sample says nothing (gpm.MIN_SAMPLE_GAP_S)."""
        return (self.primed and self.sampled_at is not None
                and now - self.sampled_at < min_gap_s)

    def step(self, now: float, n_metrics: int) -> bytes | None:
        """Take a sample; the raw metrics[:n_metrics] over the previous sample and this
        one, or None (the first sample, or a failed read: the query says why)."""
        assert self.samples is not None
        buf = self.samples[self.current]
        self.sample_failed = self._sample(buf) is None
        if self.sample_failed:
            self.primed = False  # a fresh pair from the next sample
            return None
        prev = self.samples[1 - self.current]
        primed, self.primed = self.primed, True
        self.current = 1 - self.current
        self.sampled_at = now
        if not primed:
            return None
        req = self.request
        req.sample1, req.sample2 = prev, buf
        req.numMetrics = n_metrics
        if self.q(pynvml.nvmlGpmMetricsGet, req, key="gpm_metrics") is None:
            return None
        return ctypes.string_at(ctypes.addressof(req.metrics),
                                n_metrics * gpm.METRIC_STRUCT.size)

    def free(self) -> None:
        samples, self.samples = self.samples, None
        for buf in samples or ():
            with contextlib.suppress(pynvml.NVMLError):
                pynvml.nvmlGpmSampleFree(buf)
