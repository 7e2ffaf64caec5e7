"""Counters beyond the per-tick core: NVML field values (memory temperature, NVLink
bytes), the driver's sub-second samples, NVLink link states and clock-violation time."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pynvml

from gputui.telemetry import gpm
from gputui.telemetry.model import NvLink
from gputui.telemetry.nvml.query import NvmlQuery
from gputui.telemetry.units import kib_to_bytes, us_to_ns

# nvmlDeviceGetFieldValues ids (nvml.h).
FI_DEV_MEMORY_TEMP = 82
FI_DEV_NVLINK_THROUGHPUT_DATA_TX = 138  # KiB of payload sent, since boot (per link, or
FI_DEV_NVLINK_THROUGHPUT_DATA_RX = 139  # all links with scopeId ALL_LINKS); received
ALL_LINKS = 0xFFFFFFFF  # scopeId UINT_MAX: the sum over the device's links

# How a value of each nvmlValueType_t is read from NVML's value union.
VALUE_GETTERS: dict[int, Callable[[Any], float]] = {
    pynvml.NVML_VALUE_TYPE_DOUBLE: lambda v: v.dVal,
    pynvml.NVML_VALUE_TYPE_UNSIGNED_INT: lambda v: v.uiVal,
    pynvml.NVML_VALUE_TYPE_UNSIGNED_LONG: lambda v: v.ulVal,
    pynvml.NVML_VALUE_TYPE_UNSIGNED_LONG_LONG: lambda v: v.ullVal,
    pynvml.NVML_VALUE_TYPE_SIGNED_LONG_LONG: lambda v: v.sllVal,
    pynvml.NVML_VALUE_TYPE_SIGNED_INT: lambda v: v.siVal,
    pynvml.NVML_VALUE_TYPE_UNSIGNED_SHORT: lambda v: v.usVal,
}


def _value(v: Any) -> float:
    """A field value's or sample's number, whatever its value type."""
    return VALUE_GETTERS.get(v.valueType, VALUE_GETTERS[pynvml.NVML_VALUE_TYPE_UNSIGNED_INT])(
        v.value)


def field_values(q: NvmlQuery, handle: Any, key: str,
                 ids: list[tuple[int, int]]) -> list[float] | None:
    """nvmlDeviceGetFieldValues for (field id, scope id) pairs: their values, or None
    unless every one answered. A field's own NOT_SUPPORTED counts like the call's."""
    got = q(pynvml.nvmlDeviceGetFieldValues, handle, ids, key=key)
    if not got or len(got) != len(ids):
        return None
    if any(v.nvmlReturn == pynvml.NVML_ERROR_NOT_SUPPORTED for v in got):
        q.unsupported.add(key)  # an older driver or GPU: never asked again
        return None
    if any(v.nvmlReturn != pynvml.NVML_SUCCESS for v in got):
        return None
    return [_value(v) for v in got]


def mem_temp_c(q: NvmlQuery, handle: Any) -> int | None:
    got = field_values(q, handle, "mem_temp", [(FI_DEV_MEMORY_TEMP, 0)])
    return None if got is None else int(got[0])


def nvlink_bytes_total(q: NvmlQuery, handle: Any) -> int | None:
    """NVLink data sent plus received over all links since boot, bytes."""
    got = field_values(q, handle, "nvlink_total",
                       [(FI_DEV_NVLINK_THROUGHPUT_DATA_TX, ALL_LINKS),
                        (FI_DEV_NVLINK_THROUGHPUT_DATA_RX, ALL_LINKS)])
    return None if got is None else kib_to_bytes(sum(int(v) for v in got))


class SampleRange:
    """Lowest and highest of the driver's sub-second samples of one kind (power, GPU
    utilization, SM clock) since the last read."""

    def __init__(self, kind: int, key: str) -> None:
        self.kind = kind
        self.key = key
        self.seen_us = 0

    def read(self, q: NvmlQuery, handle: Any) -> tuple[float, float] | None:
        got = q(pynvml.nvmlDeviceGetSamples, handle, self.kind, self.seen_us, key=self.key)
        if not got or not got[1]:
            return None  # none newer (NOT_FOUND), or N/A
        value_type, samples = got
        read = VALUE_GETTERS.get(value_type, VALUE_GETTERS[pynvml.NVML_VALUE_TYPE_UNSIGNED_INT])
        values = [read(s.sampleValue) for s in samples]
        self.seen_us = max(int(s.timeStamp) for s in samples)
        return min(values), max(values)


class NvLinks:
    """Each NVLink link's state (read on slow ticks) and the link records of a tick."""

    def __init__(self) -> None:
        self.states: tuple[bool, ...] | None = None  # per link: active; None: no NVLink
        self._shown: tuple[tuple[bool, ...], gpm.LinkMiBps | None,
                           tuple[NvLink, ...]] | None = None

    def read_states(self, q: NvmlQuery, handle: Any) -> tuple[bool, ...] | None:
        """Each link's state, up to the first link the GPU does not have."""
        if "nvlink" in q.unsupported:
            return None
        # Up to the count found the first time: the link past the last is not asked again.
        known = len(self.states) if self.states else pynvml.NVML_NVLINK_MAX_LINKS
        states: list[bool] = []
        for link in range(known):
            key = f"nvlink_state/{link}"
            up = q(pynvml.nvmlDeviceGetNvLinkState, handle, link, key=key,
                   absent=(pynvml.NVML_ERROR_INVALID_ARGUMENT,))
            if up is None:
                if key in q.unsupported:
                    break  # past the GPU's last link
                return self.states  # transient: keep what was known
            states.append(bool(up))
        if not states:
            q.unsupported.add("nvlink")
            self.states = None
        else:
            self.states = tuple(states)
        return self.states

    def records(self, rates: gpm.LinkMiBps | None) -> tuple[NvLink, ...] | None:
        """Each link's state and rates; last tick's records again when neither changed
        (an HGX GPU has 18 links, most idle most of the time)."""
        states = self.states
        if states is None:
            return None
        last = self._shown
        if last is not None and last[0] == states and last[1] == rates:
            return last[2]
        links = tuple(NvLink(i, up, *(gpm.link_rate(rates, i) if rates else (None, None)))
                      for i, up in enumerate(states))
        self._shown = (states, rates, links)
        return links


class Violation:
    """Fraction of wall time throttled by one policy (power, thermal) since the previous
    read (NVML counts nanoseconds against a microsecond reference clock)."""

    def __init__(self, policy: int) -> None:
        self.policy = policy
        self._last: tuple[int, int] | None = None

    def read(self, q: NvmlQuery, handle: Any) -> float | None:
        v = q(pynvml.nvmlDeviceGetViolationStatus, handle, self.policy,
              key=f"violation/{self.policy}")
        if v is None:
            return None
        ref_us, viol_ns = int(v.referenceTime), int(v.violationTime)
        prev, self._last = self._last, (ref_us, viol_ns)
        if prev is None or ref_us <= prev[0]:
            return None
        return min(1.0, max(0.0, (viol_ns - prev[1]) / us_to_ns(ref_us - prev[0])))
