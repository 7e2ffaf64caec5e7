"""MIG reads: the MIG devices of a GPU with MIG mode on (gputui.telemetry.mig).

Cost: MIG mode is asked once per open (`nvmlDeviceGetMigMode`); with MIG off nothing else
is ever called. With MIG on, the MIG device handles and their static facts (UUID, name,
instance ids, SM count) are read on the first tick and again every `slow_every` ticks
(instances can be created and destroyed while the driver runs); each tick reads each MIG
device's memory and, where the GPU has GPM, one GPM sample per GPU instance; processes
follow the source's process cadence. A failing MIG read leaves the GPU's other fields,
and the other MIG devices, as they are.
"""

from __future__ import annotations

import contextlib
import ctypes
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import pynvml

from gputui.telemetry import gpm, mig
from gputui.telemetry.mig import MigDevice, MigProcess
from gputui.telemetry.nvml.common import _Device, _text

T = TypeVar("T")

# The GPM metrics asked per GPU instance (the activity ratios; byte rates are per GPU).
_GPM_IDS = tuple(m.metric_id for m in gpm.METRICS if m.field in mig.GPM_FIELDS)
# Errors that say "this driver or GPU has no such thing": stop asking.
_ABSENT = (pynvml.NVMLError_FunctionNotFound, pynvml.NVMLError_NotSupported)


@dataclass
class _MigStatic:
    index: int
    handle: Any
    uuid: str
    name: str
    gpu_instance_id: int | None
    compute_instance_id: int | None
    sm_count: int | None
    mem_total_bytes: int | None


@dataclass
class _MigGpm:
    """Two alternating GPM sample buffers of one GPU instance and its request struct."""

    samples: tuple[Any, Any]
    request: Any
    current: int = 0
    primed: bool = False
    sampled_at: float | None = None  # gpm_clock() of the sample in the other buffer
    last: dict[str, float | None] = field(default_factory=dict)  # the last pair's figures


@dataclass
class MigState:
    """One GPU's MIG state, kept between ticks (touched by that GPU's reader only)."""

    on: bool
    devices: list[_MigStatic] = field(default_factory=list)
    ticks: int = 0
    procs: dict[str, tuple[MigProcess, ...] | None] = field(default_factory=dict)  # by uuid
    gpm: dict[int, _MigGpm] = field(default_factory=dict)  # by GPU instance id
    gpm_ok: bool | None = None  # None: not asked yet
    no_attributes: bool = False  # nvmlDeviceGetAttributes_v2 absent: SM count N/A


def _opt(fn: Callable[[], T]) -> T | None:
    """One MIG read; any NVML error but a lost GPU is N/A for this value only."""
    try:
        return fn()
    except pynvml.NVMLError_GpuIsLost:
        raise
    except pynvml.NVMLError:
        return None


class MigReads:
    """NvmlSource's MIG reads. A mixin: it uses the source's `fields`, `slow_every`,
    `process_every` and GPM clock and minimum sample gap."""

    fields: frozenset[str]
    slow_every: int
    process_every: int
    gpm_clock: Callable[[], float]
    gpm_min_gap_s: float

    def _read_mig(self, dev: _Device) -> tuple[MigDevice, ...]:
        if "mig" in dev.unsupported:
            return ()
        st: MigState | None = dev.mig
        if st is None:
            st = dev.mig = self._mig_mode(dev)
            if st is None:
                return ()  # a transient failure: ask again next tick
        if not st.on:
            return ()
        tick, st.ticks = st.ticks, st.ticks + 1
        if tick % self.slow_every == 0 and not self._mig_scan(dev, st):
            return ()
        procs_due = tick % self.process_every == 0
        with_gpm = "gpm" in self.fields and self._mig_gpm_ok(dev, st)
        gpm_by_gi: dict[int, dict[str, float | None]] = {}
        out = []
        for m in st.devices:
            mem = _opt(lambda m=m: pynvml.nvmlDeviceGetMemoryInfo(m.handle))
            if procs_due:
                st.procs[m.uuid] = self._mig_processes(m)
            gi = m.gpu_instance_id
            if with_gpm and gi is not None and gi not in gpm_by_gi:
                gpm_by_gi[gi] = self._mig_gpm(dev, st, gi)
            values = gpm_by_gi.get(gi, {}) if gi is not None else {}
            out.append(MigDevice(
                index=m.index, uuid=m.uuid, name=m.name,
                profile=mig.profile_from_name(m.name),
                gpu_instance_id=gi, compute_instance_id=m.compute_instance_id,
                sm_count=m.sm_count,
                mem_used_bytes=int(mem.used) if mem is not None else None,
                mem_total_bytes=int(mem.total) if mem is not None else m.mem_total_bytes,
                processes=st.procs.get(m.uuid),
                **{f: values.get(f) for f in mig.GPM_FIELDS}))
        return tuple(out)

    def _mig_mode(self, dev: _Device) -> MigState | None:
        """Ask MIG mode once per open: None on a transient error (asked again)."""
        try:
            current, _pending = pynvml.nvmlDeviceGetMigMode(dev.handle)
        except pynvml.NVMLError_GpuIsLost:
            raise
        except (*_ABSENT, pynvml.NVMLError_InvalidArgument):
            dev.unsupported.add("mig")  # a GPU or driver without MIG
            return None
        except pynvml.NVMLError:
            return None
        return MigState(on=current == pynvml.NVML_DEVICE_MIG_ENABLE)

    def _mig_scan(self, dev: _Device, st: MigState) -> bool:
        """(Re)read the MIG device handles and their static facts. False when the
        driver has no MIG device API (MIG is then off for this open)."""
        try:
            count = pynvml.nvmlDeviceGetMaxMigDeviceCount(dev.handle)
        except pynvml.NVMLError_GpuIsLost:
            raise
        except _ABSENT:
            dev.unsupported.add("mig")
            self._mig_free(dev)
            return False
        except pynvml.NVMLError:
            return bool(st.devices)  # transient: keep the devices known so far
        found: list[_MigStatic] = []
        for i in range(count):
            try:
                h = pynvml.nvmlDeviceGetMigDeviceHandleByIndex(dev.handle, i)
            except pynvml.NVMLError_GpuIsLost:
                raise
            except pynvml.NVMLError_FunctionNotFound:
                dev.unsupported.add("mig")
                self._mig_free(dev)
                return False
            except pynvml.NVMLError:
                continue  # NOT_FOUND: no MIG device at this index
            found.append(self._mig_static(st, i, h))
        st.devices = found
        known = {m.uuid for m in found}
        st.procs = {u: p for u, p in st.procs.items() if u in known}
        return True

    def _mig_static(self, st: MigState, index: int, h: Any) -> _MigStatic:
        attrs = None
        if not st.no_attributes:
            try:
                attrs = pynvml.nvmlDeviceGetAttributes_v2(h)
            except pynvml.NVMLError_GpuIsLost:
                raise
            except pynvml.NVMLError_FunctionNotFound:
                st.no_attributes = True
            except pynvml.NVMLError:
                pass
        uuid = _opt(lambda: _text(pynvml.nvmlDeviceGetUUID(h)))
        return _MigStatic(
            index=index, handle=h,
            uuid=uuid or "",
            name=_opt(lambda: _text(pynvml.nvmlDeviceGetName(h))) or "",
            gpu_instance_id=_opt(lambda: int(pynvml.nvmlDeviceGetGpuInstanceId(h))),
            compute_instance_id=_opt(lambda: int(pynvml.nvmlDeviceGetComputeInstanceId(h))),
            sm_count=int(attrs.multiprocessorCount) if attrs is not None else None,
            mem_total_bytes=(int(attrs.memorySizeMB) * gpm.MIB
                             if attrs is not None else None),
        )

    @staticmethod
    def _mig_processes(m: _MigStatic) -> tuple[MigProcess, ...] | None:
        plist = _opt(lambda: pynvml.nvmlDeviceGetComputeRunningProcesses(m.handle))
        if plist is None:
            return None
        return tuple(MigProcess(int(p.pid), None if p.usedGpuMemory is None
                                else int(p.usedGpuMemory)) for p in plist)

    # --- GPM per GPU instance ------------------------------------------------------------

    def _mig_gpm_ok(self, dev: _Device, st: MigState) -> bool:
        if st.gpm_ok is None:
            if ctypes.sizeof(pynvml.c_nvmlGpmMetric_t) != gpm.METRIC_STRUCT.size:
                st.gpm_ok = False
            else:
                try:
                    support = pynvml.nvmlGpmQueryDeviceSupport(dev.handle)
                except pynvml.NVMLError_GpuIsLost:
                    raise
                except _ABSENT:
                    st.gpm_ok = False
                    return False
                except pynvml.NVMLError:
                    return False  # transient: ask again next tick
                st.gpm_ok = bool(support.isSupportedDevice)
        return st.gpm_ok

    def _mig_gpm(self, dev: _Device, st: MigState, gi: int) -> dict[str, float | None]:
        """This tick's GPM ratios of GPU instance `gi` ({} for the first sample or on a
        failed read: N/A, never 0)."""
        session = st.gpm.get(gi)
        if session is None:
            try:
                bufs = (pynvml.nvmlGpmSampleAlloc(), pynvml.nvmlGpmSampleAlloc())
            except pynvml.NVMLError:
                return {}
            req = pynvml.c_nvmlGpmMetricsGet_t()
            req.version = pynvml.NVML_GPM_METRICS_GET_VERSION
            req.numMetrics = len(_GPM_IDS)
            for i, metric_id in enumerate(_GPM_IDS):
                req.metrics[i].metricId = metric_id
            session = st.gpm[gi] = _MigGpm(bufs, req)
        now = self.gpm_clock()
        if (session.primed and session.sampled_at is not None
                and now - session.sampled_at < self.gpm_min_gap_s):
            # Too soon for a new pair ("greater than 100 ms" between MIG samples, nvml.h).
            return dict(session.last)
        buf = session.samples[session.current]
        try:
            pynvml.nvmlGpmMigSampleGet(dev.handle, gi, buf)
        except pynvml.NVMLError_GpuIsLost:
            raise
        except _ABSENT:
            st.gpm_ok = False
            self._mig_free(dev)
            return {}
        except pynvml.NVMLError:
            session.primed = False  # another profiler, an instance gone: a fresh pair
            return {}
        prev = session.samples[1 - session.current]
        primed, session.primed = session.primed, True
        session.current = 1 - session.current
        session.sampled_at = now
        session.last = {}
        if not primed:
            return {}
        req = session.request
        req.sample1, req.sample2 = prev, buf
        if _opt(lambda: pynvml.nvmlGpmMetricsGet(req)) is None:
            return {}
        raw = ctypes.string_at(ctypes.addressof(req.metrics),
                               req.numMetrics * gpm.METRIC_STRUCT.size)
        session.last = gpm.values_from_buffer(raw)
        return dict(session.last)

    @staticmethod
    def _mig_free(dev: _Device) -> None:
        """Give back the GPM sample buffers of every GPU instance (on close)."""
        st: MigState | None = dev.mig
        if st is None:
            return
        sessions, st.gpm = st.gpm, {}
        for session in sessions.values():
            for buf in session.samples:
                with contextlib.suppress(pynvml.NVMLError):
                    pynvml.nvmlGpmSampleFree(buf)
