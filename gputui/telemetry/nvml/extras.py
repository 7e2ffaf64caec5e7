"""Reads beyond the per-tick core: extra DCGM counters, samples, NVLink and GPM."""

from __future__ import annotations

import contextlib
import ctypes
import functools
import struct
from collections.abc import Callable, Mapping
from typing import Any

import pynvml

from gputui.telemetry import gpm
from gputui.telemetry.model import (
    NvLink,
)
from gputui.telemetry.nvml.common import (
    _FIELD_VALUE_GETTERS,
    ALL_LINKS,
    FI_DEV_MEMORY_TEMP,
    FI_DEV_NVLINK_THROUGHPUT_DATA_RX,
    FI_DEV_NVLINK_THROUGHPUT_DATA_TX,
    _Device,
    _GpmSession,
)
from gputui.telemetry.nvml.prepared import gpm_metrics_get
from gputui.telemetry.units import kib_to_bytes, mw_to_w

# nvmlSample_t (timeStamp, then the 8-byte nvmlValue_t union) per value type.
_SAMPLE_LAYOUTS: dict[int, struct.Struct] = {
    pynvml.NVML_VALUE_TYPE_DOUBLE: struct.Struct("=Qd"),
    pynvml.NVML_VALUE_TYPE_UNSIGNED_INT: struct.Struct("=QI4x"),
    pynvml.NVML_VALUE_TYPE_UNSIGNED_LONG: struct.Struct("=QQ"),
    pynvml.NVML_VALUE_TYPE_UNSIGNED_LONG_LONG: struct.Struct("=QQ"),
    pynvml.NVML_VALUE_TYPE_SIGNED_LONG_LONG: struct.Struct("=Qq"),
    pynvml.NVML_VALUE_TYPE_SIGNED_INT: struct.Struct("=Qi4x"),
    pynvml.NVML_VALUE_TYPE_UNSIGNED_SHORT: struct.Struct("=QH6x"),
}


# The unsupported-set name of each kind of sub-second samples.
_SAMPLE_FIELDS = {key: f"samples_{key}" for key in ("power_w", "util_gpu_pct", "clock_sm_mhz")}


def _gpm_request(ids: tuple[int, ...], sample1: Any, sample2: Any) -> Any:
    """A GPM metrics request for `ids` over (sample1 → sample2)."""
    req = pynvml.c_nvmlGpmMetricsGet_t()
    req.version = pynvml.NVML_GPM_METRICS_GET_VERSION
    req.numMetrics = len(ids)
    for i, metric_id in enumerate(ids):
        req.metrics[i].metricId = metric_id
    req.sample1, req.sample2 = sample1, sample2
    return req


@functools.lru_cache(maxsize=64)
def _array_layout(item: str, n: int) -> struct.Struct:
    """`n` samples of one layout (its format without the byte-order prefix) in a row."""
    return struct.Struct("=" + item.lstrip("=") * n)


def _samples(dev: _Device, kind: int, seen: int,
             ) -> tuple[tuple[int, ...], tuple[float, ...]] | None:
    """(timestamps µs, values) of the driver's samples of `kind` newer than `seen`: one
    call into the device's prepared array; through pynvml (two calls, and one sample at
    a time should the layout be unknown) when that array came back full."""
    got = dev.calls.samples(kind, seen)
    if got is not None:
        value_type, raw = got
        samples: Any = None
    else:
        value_type, samples = pynvml.nvmlDeviceGetSamples(dev.handle, kind, seen)
        if not samples:
            return None
        raw = ctypes.string_at(ctypes.addressof(samples[0]),
                               ctypes.sizeof(samples[0]) * len(samples))
    if not raw:
        return None
    layout = _SAMPLE_LAYOUTS.get(value_type)
    if layout is not None and layout.size == ctypes.sizeof(pynvml.c_nvmlSample_t):
        # The whole array unpacked in one call (timestamp, value, timestamp, value, ...):
        # a tenth of the cost of per-field attribute reads, every GPU every tick.
        flat = _array_layout(layout.format, len(raw) // layout.size).unpack(raw)
        return flat[0::2], flat[1::2]
    else:
        if samples is None:
            samples = (pynvml.c_nvmlSample_t * (len(raw) // ctypes.sizeof(
                pynvml.c_nvmlSample_t))).from_buffer_copy(raw)
        read = _FIELD_VALUE_GETTERS.get(value_type, lambda x: x.uiVal)
        pairs = [(int(smp.timeStamp), read(smp.sampleValue)) for smp in samples]
    stamps, values = zip(*pairs, strict=True)
    return stamps, values


def _links(dev: _Device, states: tuple[bool, ...],
           rates: gpm.LinkMiBps | None) -> tuple[NvLink, ...]:
    """Each link's state and rates; last tick's records again when neither changed (an
    HGX GPU has 18 links, read every tick, and most are idle most of the time)."""
    last = dev.nvlink_shown
    if last is not None and last[0] == states and last[1] == rates:
        return last[2]
    links = tuple(NvLink(i, up, *(gpm.link_rate(rates, i) if rates else (None, None)))
                  for i, up in enumerate(states))
    dev.nvlink_shown = (states, rates, links)
    return links


class ExtraReads:
    """NvmlSource's reads beyond the core fields: dcgm-exporter's extra counters, the
    driver's sub-second samples, NVLink states and GPM profiling metrics. A mixin: it
    uses the source's `fields`, `_field` and `gpm_clock`."""

    fields: frozenset[str]
    link_rates_wanted: bool
    gpm_clock: Callable[[], float]
    gpm_min_gap_s: float
    _field: Callable[..., Any]

    def _read_extras(self, dev: _Device) -> dict[str, Any]:
        """dcgm-exporter's default counters beyond the core: memory temperature, encoder
        and decoder load every tick; PCIe replays and remapped rows from the slow tick."""
        h = dev.handle
        out: dict[str, Any] = {"mem_reserved_bytes": dev.mem_reserved_bytes}
        if "mem_temp" in self.fields:
            out["mem_temp_c"] = self._field_value(dev, "mem_temp", FI_DEV_MEMORY_TEMP)
        if "codec" in self.fields:
            enc = self._field(dev, "encoder", lambda: pynvml.nvmlDeviceGetEncoderUtilization(h))
            dec = self._field(dev, "decoder", lambda: pynvml.nvmlDeviceGetDecoderUtilization(h))
            out["enc_util_pct"] = None if enc is None else int(enc[0])
            out["dec_util_pct"] = None if dec is None else int(dec[0])
        out["pcie_replay_count"] = dev.pcie_replay_count
        if dev.remap is not None:
            (out["remap_correctable_rows"], out["remap_uncorrectable_rows"],
             out["remap_pending"], out["remap_failure"]) = dev.remap
        if dev.retired is not None:
            (out["retired_pages_sbe"], out["retired_pages_dbe"],
             out["retired_pages_pending"]) = dev.retired
        out["nvlink_bytes_total"] = dev.nvlink_bytes_total
        if dev.nvlink_states is not None:
            rates = dev.gpm.link_rates if dev.gpm is not None else None
            out["nvlink_links"] = _links(dev, dev.nvlink_states, rates)
        if "power_samples" in self.fields:
            self._read_samples(dev, pynvml.NVML_TOTAL_POWER_SAMPLES, "power_w", out)
        if "util_samples" in self.fields:
            self._read_samples(dev, pynvml.NVML_GPU_UTILIZATION_SAMPLES, "util_gpu_pct", out)
            self._read_samples(dev, pynvml.NVML_PROCESSOR_CLK_SAMPLES, "clock_sm_mhz", out)
        return out

    def _nvlink_states(self, dev: _Device) -> tuple[bool, ...] | None:
        """Each link's state, up to the first link the GPU does not have."""
        if "nvlink" in dev.unsupported:
            return None
        # Up to the count found the first time: the link past the last is not asked again.
        known = len(dev.nvlink_states) if dev.nvlink_states else pynvml.NVML_NVLINK_MAX_LINKS
        try:
            states, rc = dev.calls.nvlink_states(known)
        except pynvml.NVMLError_FunctionNotFound:
            states, rc = [], pynvml.NVML_ERROR_FUNCTION_NOT_FOUND
        if rc == pynvml.NVML_ERROR_GPU_IS_LOST:
            raise pynvml.NVMLError(rc)
        if rc not in (0, pynvml.NVML_ERROR_INVALID_ARGUMENT, pynvml.NVML_ERROR_NOT_SUPPORTED,
                      pynvml.NVML_ERROR_FUNCTION_NOT_FOUND):
            return dev.nvlink_states  # transient: keep what was known
        # (INVALID_ARGUMENT, NOT_SUPPORTED: the link past the GPU's last.)
        if not states:
            dev.unsupported.add("nvlink")
            return None
        return tuple(states)

    def _read_samples(self, dev: _Device, kind: int, key: str, out: dict[str, Any]) -> None:
        """Min and max of the driver's samples newer than the last ones read (none new,
        NOT_FOUND: N/A this tick)."""
        seen = dev.sample_seen.get(kind, 0)
        got = self._field(dev, _SAMPLE_FIELDS[key], _samples, dev, kind, seen)
        if not got:
            return
        stamps, values = got
        dev.sample_seen[kind] = max(stamps)
        lo, hi = min(values), max(values)
        if key == "power_w":
            out["power_w_min"], out["power_w_max"] = mw_to_w(lo), mw_to_w(hi)
        else:
            out[f"{key}_min"], out[f"{key}_max"] = int(lo), int(hi)

    def _nvlink_total(self, dev: _Device) -> int | None:
        """NVLink data sent plus received over all links since boot, bytes: one
        nvmlDeviceGetFieldValues call for both directions; None unless both answer."""
        if "nvlink_total" in dev.unsupported:
            return None
        values = self._field(dev, "nvlink_total", lambda: pynvml.nvmlDeviceGetFieldValues(
            dev.handle, [(FI_DEV_NVLINK_THROUGHPUT_DATA_TX, ALL_LINKS),
                         (FI_DEV_NVLINK_THROUGHPUT_DATA_RX, ALL_LINKS)]))
        if not values or len(values) != 2:
            return None
        if any(v.nvmlReturn == pynvml.NVML_ERROR_NOT_SUPPORTED for v in values):
            dev.unsupported.add("nvlink_total")  # an older driver: never asked again
            return None
        if any(v.nvmlReturn != pynvml.NVML_SUCCESS for v in values):
            return None
        get = _FIELD_VALUE_GETTERS
        return kib_to_bytes(sum(int(get.get(v.valueType, lambda x: x.ullVal)(v.value))
                                for v in values))

    def _field_value(self, dev: _Device, name: str, field_id: int) -> int | None:
        """One nvmlDeviceGetFieldValues field as an integer; its own NOT_SUPPORTED counts
        like the call's."""
        got = self._field(dev, name, dev.calls.field_value, field_id)
        if got is None:
            return None
        rc, value = got
        if rc == pynvml.NVML_ERROR_NOT_SUPPORTED:
            dev.unsupported.add(name)
            return None
        return None if value is None else int(value)

    # --- GPM profiling counters (gputui.telemetry.gpm) ----------------------------------

    def _read_gpm(self, dev: _Device) -> Mapping[str, Any]:
        """This tick's GPM metrics (from the previous sample and this one), {} when the
        device has none; `gpm_note` while another profiler holds the counters. Read-only:
        the session's own figures, not a copy (they become GpuSample fields)."""
        if "gpm" in dev.unsupported:
            return {}
        session = dev.gpm or self._gpm_open(dev)
        if session is None:
            return {}
        now = self.gpm_clock()
        if not session.backoff.due(now):
            return {"gpm_note": session.backoff.note}
        if (session.primed and session.sampled_at is not None
                and now - session.sampled_at < self.gpm_min_gap_s):
            return session.last  # too soon for a new pair (gpm.MIN_SAMPLE_GAP_S)
        buf = session.samples[session.current]
        try:
            dev.calls.gpm_sample(buf)
        except pynvml.NVMLError_GpuIsLost:
            raise
        except (pynvml.NVMLError_NotSupported, pynvml.NVMLError_FunctionNotFound):
            self._gpm_free(dev)
            dev.unsupported.add("gpm")
            return {}
        except pynvml.NVMLError as exc:
            session.primed = False
            if exc.value in gpm.BUSY_CODES:
                session.backoff.busy(now)
                return {"gpm_note": session.backoff.note}
            return {}  # transient: N/A this tick, a fresh pair from the next
        session.backoff.ok()
        primed, session.primed = session.primed, True
        session.current = 1 - session.current
        session.sampled_at = now
        if not primed:
            return {}
        # The request whose second sample is the one just taken (its first, the previous).
        i = 1 - session.current
        req = session.requests[i]
        # The per-link metrics follow the fixed ones in the request: asked for only while
        # wanted (36 of 48 metrics on an 18-link GPU).
        links = session.links if self.link_rates_wanted else 0
        n = len(gpm.METRIC_IDS) + 2 * links
        if session.asked[i] != n:
            req.numMetrics = session.asked[i] = n
        try:
            gpm_metrics_get(session.request_refs[i])
        except pynvml.NVMLError_GpuIsLost:
            raise
        except pynvml.NVMLError:
            return {}
        raw = ctypes.string_at(session.metrics_at[i], n * gpm.METRIC_STRUCT.size)
        session.last, rates = gpm.parse_buffer(raw, links)
        session.link_rates = rates if links else None
        return session.last

    def _gpm_open(self, dev: _Device) -> _GpmSession | None:
        support = self._field(dev, "gpm", lambda: pynvml.nvmlGpmQueryDeviceSupport(dev.handle))
        if support is None:
            return None
        if not support.isSupportedDevice:
            dev.unsupported.add("gpm")
            return None
        if ctypes.sizeof(pynvml.c_nvmlGpmMetric_t) != gpm.METRIC_STRUCT.size:
            dev.unsupported.add("gpm")  # a pynvml whose struct we do not know
            return None
        try:
            a = pynvml.nvmlGpmSampleAlloc()
            b = pynvml.nvmlGpmSampleAlloc()
        except pynvml.NVMLError:
            return None
        # The links are known from the first (slow) tick, read before GPM.
        links = len(dev.nvlink_states or ())
        ids = gpm.request_ids(links)
        # One request per order of the two buffers, filled in once: a tick only points
        # NVML at the one whose second sample is the newest.
        reqs = tuple(_gpm_request(ids, first, second) for first, second in ((b, a), (a, b)))
        dev.gpm = _GpmSession(
            (a, b), reqs, links=links, asked=[len(ids), len(ids)],
            request_refs=tuple(ctypes.byref(r) for r in reqs),
            metrics_at=tuple(ctypes.addressof(r.metrics) for r in reqs))
        return dev.gpm

    @staticmethod
    def _gpm_free(dev: _Device) -> None:
        session, dev.gpm = dev.gpm, None
        if session is not None:
            for buf in session.samples:
                with contextlib.suppress(pynvml.NVMLError):
                    pynvml.nvmlGpmSampleFree(buf)
