"""The MIG devices of a GPU with MIG mode on (the records: gputui.telemetry.mig).

Cost: MIG mode is asked once per open (`nvmlDeviceGetMigMode`); with MIG off nothing else
is ever called. With MIG on, the MIG device handles and their static facts (UUID, name,
instance ids, SM count) are read on the first tick and again every `slow_every` ticks
(instances can be created and destroyed while the driver runs); each tick reads each MIG
device's memory and, where the GPU has GPM, one GPM sample per GPU instance; processes
follow the source's process cadence. A failing MIG read leaves the GPU's other fields,
and the other MIG devices, as they are.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pynvml

from gputui.telemetry import gpm, mig
from gputui.telemetry.mig import MigDevice, MigProcess
from gputui.telemetry.nvml.errors import text
from gputui.telemetry.nvml.gpm_session import GpmSession, gpm_available
from gputui.telemetry.nvml.query import NvmlQuery

# The GPM metrics asked per GPU instance (the activity ratios; byte rates are per GPU).
_GPM_IDS = tuple(m.metric_id for m in gpm.METRICS if m.field in mig.GPM_FIELDS)


@dataclass
class _MigStatic:
    """What does not change about one MIG device while it exists."""

    index: int
    handle: Any
    uuid: str
    name: str
    gpu_instance_id: int | None
    compute_instance_id: int | None
    sm_count: int | None
    mem_total_bytes: int | None


class MigReader:
    """One GPU's MIG state, kept between ticks (touched by that GPU's reader only).

    Each MIG device's calls go through their own query (a MIG handle's NOT_SUPPORTED is
    its own); the GPU's query decides whether the GPU has MIG at all."""

    def __init__(self, q: NvmlQuery, handle: Any, *, slow_every: int, process_every: int,
                 with_gpm: bool, clock: Callable[[], float], min_gap_s: Callable[[], float],
                 ) -> None:
        self.q = q
        self.handle = handle
        self.slow_every = slow_every
        self.process_every = process_every
        self.with_gpm = with_gpm
        self.clock = clock
        self.min_gap_s = min_gap_s
        self.on: bool | None = None  # None: MIG mode not asked yet
        self.devices: list[_MigStatic] = []
        self.ticks = 0
        self.procs: dict[str, tuple[MigProcess, ...] | None] = {}  # by uuid
        self.gpm: dict[int, GpmSession] = {}  # by GPU instance id
        self.gpm_ok: bool | None = None  # None: not asked yet
        self._mig_q = NvmlQuery()  # the MIG handles' calls

    def read(self) -> tuple[MigDevice, ...]:
        q = self.q
        if self.on is None:
            mode = q(pynvml.nvmlDeviceGetMigMode, self.handle, key="mig",
                     absent=(pynvml.NVML_ERROR_INVALID_ARGUMENT,))
            if mode is None:
                return ()  # a GPU or driver without MIG, or ask again next tick
            self.on = mode[0] == pynvml.NVML_DEVICE_MIG_ENABLE
        if not self.on or "mig" in q.unsupported:
            return ()
        tick, self.ticks = self.ticks, self.ticks + 1
        if tick % self.slow_every == 0 and not self._scan():
            return ()
        procs_due = tick % self.process_every == 0
        with_gpm = self.with_gpm and self._gpm_ok()
        gpm_by_gi: dict[int, dict[str, float | None]] = {}
        mq = self._mig_q
        out = []
        for m in self.devices:
            mem = mq(pynvml.nvmlDeviceGetMemoryInfo, m.handle, key=f"memory/{m.uuid}")
            if procs_due:
                self.procs[m.uuid] = self._processes(m)
            gi = m.gpu_instance_id
            if with_gpm and gi is not None and gi not in gpm_by_gi:
                gpm_by_gi[gi] = self._gpm(gi)
            values = gpm_by_gi.get(gi, {}) if gi is not None else {}
            out.append(MigDevice(
                index=m.index, uuid=m.uuid, name=m.name,
                profile=mig.profile_from_name(m.name),
                gpu_instance_id=gi, compute_instance_id=m.compute_instance_id,
                sm_count=m.sm_count,
                mem_used_bytes=int(mem.used) if mem is not None else None,
                mem_total_bytes=int(mem.total) if mem is not None else m.mem_total_bytes,
                processes=self.procs.get(m.uuid),
                **{f: values.get(f) for f in mig.GPM_FIELDS}))
        return tuple(out)

    def _scan(self) -> bool:
        """(Re)read the MIG device handles and their static facts. False when the
        driver has no MIG device API (MIG is then off for this open)."""
        q = self.q
        count = q(pynvml.nvmlDeviceGetMaxMigDeviceCount, self.handle, key="mig")
        if count is None:
            if "mig" in q.unsupported:
                self.free()
                return False
            return bool(self.devices)  # transient: keep the devices known so far
        found: list[_MigStatic] = []
        for i in range(count):
            h = q(pynvml.nvmlDeviceGetMigDeviceHandleByIndex, self.handle, i,
                  key="mig_handle")
            if h is None:
                if "mig_handle" in q.unsupported:  # a driver without the MIG device API
                    q.unsupported.add("mig")
                    self.free()
                    return False
                continue  # NOT_FOUND: no MIG device at this index
            found.append(self._static(i, h))
        self.devices = found
        known = {m.uuid for m in found}
        self.procs = {u: p for u, p in self.procs.items() if u in known}
        return True

    def _static(self, index: int, h: Any) -> _MigStatic:
        mq = self._mig_q
        attrs = mq(pynvml.nvmlDeviceGetAttributes_v2, h, key="mig_attributes")
        return _MigStatic(
            index=index, handle=h,
            uuid=text(mq(pynvml.nvmlDeviceGetUUID, h, key="mig_uuid") or ""),
            name=text(mq(pynvml.nvmlDeviceGetName, h, key="mig_name") or ""),
            gpu_instance_id=_int(mq(pynvml.nvmlDeviceGetGpuInstanceId, h, key="mig_gi")),
            compute_instance_id=_int(mq(pynvml.nvmlDeviceGetComputeInstanceId, h,
                                        key="mig_ci")),
            sm_count=int(attrs.multiprocessorCount) if attrs is not None else None,
            mem_total_bytes=(int(attrs.memorySizeMB) * gpm.MIB
                             if attrs is not None else None),
        )

    def _processes(self, m: _MigStatic) -> tuple[MigProcess, ...] | None:
        plist = self._mig_q(pynvml.nvmlDeviceGetComputeRunningProcesses, m.handle,
                            key=f"mig_processes/{m.uuid}")
        if plist is None:
            return None
        return tuple(MigProcess(int(p.pid), None if p.usedGpuMemory is None
                                else int(p.usedGpuMemory)) for p in plist)

    # --- GPM per GPU instance ------------------------------------------------------------

    def _gpm_ok(self) -> bool:
        if self.gpm_ok is None:
            self.gpm_ok = gpm_available(self.q, self.handle)
        return bool(self.gpm_ok)

    def _gpm(self, gi: int) -> dict[str, float | None]:
        """This tick's GPM ratios of GPU instance `gi` ({} for the first sample or on a
        failed read: N/A, never 0)."""
        q = self.q
        session = self.gpm.get(gi)
        if session is None:
            key = "gpm_mig"

            def sample(buf: Any, gi: int = gi) -> Any:
                return q(pynvml.nvmlGpmMigSampleGet, self.handle, gi, buf, key=key)

            session = GpmSession(q, _GPM_IDS, sample)
            if not session.ok:
                return {}
            self.gpm[gi] = session
        now = self.clock()
        if session.too_soon(now, self.min_gap_s()):
            # Too soon for a new pair ("greater than 100 ms" between MIG samples, nvml.h).
            return dict(session.last)
        raw = session.step(now, len(_GPM_IDS))
        if "gpm_mig" in q.unsupported:
            self.gpm_ok = False
            self.free()
            return {}
        session.last = {} if raw is None else gpm.values_from_buffer(raw)
        return dict(session.last)

    def free(self) -> None:
        """Give back the GPM sample buffers of every GPU instance (on close)."""
        sessions, self.gpm = self.gpm, {}
        for session in sessions.values():
            session.free()


def _int(v: Any) -> int | None:
    return None if v is None else int(v)
