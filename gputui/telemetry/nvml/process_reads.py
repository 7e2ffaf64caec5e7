"""NvmlSource's process reads: the compute and graphics processes of a GPU and their
share of it (per-process utilization), every `process_every` ticks."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pynvml

from gputui.telemetry.model import GpuProcess
from gputui.telemetry.nvml.common import PROCESS_UTIL_KEEP_S, _Device


class ProcessReads:
    """A mixin of NvmlSource: it uses the source's `fields`, `_field` and
    `_fallback_call`."""

    fields: frozenset[str]
    _field: Callable[..., Any]
    _fallback_call: Callable[..., Any]

    def _read_processes(self, dev: _Device) -> list[GpuProcess]:
        if dev.pending or dev.lost or dev.handle is None:
            return []
        found: dict[int, tuple[int | None, str]] = {}  # pid → (GPU memory, kind)
        try:
            for kind in ("compute", "graphics"):
                for pid, mem in self._field(dev, f"processes_{kind}",
                                            lambda kind=kind: self._process_list(dev, kind)
                                            ) or ():
                    if pid in found:
                        # A process that is both compute and graphics (e.g. a viewer): keep
                        # the larger memory figure, as nvidia-smi does.
                        if mem is not None and (found[pid][0] or 0) < mem:
                            found[pid] = (mem, "compute+graphics")
                        continue
                    found[pid] = (mem, kind)
        except pynvml.NVMLError_GpuIsLost:
            dev.lost = True
            return []
        util = (self._process_util(dev) if found and "process_util" in self.fields
                else {})
        none4 = (None, None, None, None)
        out = []
        for pid, (mem, kind) in found.items():
            sm, mem_util, enc, dec = util.get(pid, none4)
            out.append(GpuProcess(gpu_index=dev.index, pid=pid, gpu_mem_bytes=mem,
                                       kind=kind, sm_util_pct=sm, mem_util_pct=mem_util,
                                       enc_util_pct=enc, dec_util_pct=dec))
        return out

    @staticmethod
    def _process_list(dev: _Device, kind: str) -> list[tuple[int, int | None]]:
        """(pid, GPU memory bytes or None): in one call while the prepared array holds
        them all, else through pynvml, which sizes the array."""
        got = dev.calls.processes(kind)
        if got is not None:
            return got
        fn = (pynvml.nvmlDeviceGetComputeRunningProcesses if kind == "compute"
              else pynvml.nvmlDeviceGetGraphicsRunningProcesses)
        return [(int(p.pid), None if p.usedGpuMemory is None else int(p.usedGpuMemory))
                for p in fn(dev.handle)]

    def _process_util(self, dev: _Device) -> dict[int, tuple[int, int, int, int]]:
        """pid → (SM, memory, encoder, decoder %) over the samples since the last call
        (NVML's lastSeenTimeStamp bookkeeping); a pid sampled more than once gets its
        latest sample."""
        h, seen = dev.handle, dev.sample_seen.get(-1, 0)

        def info() -> list[tuple[int, int, int, int, int, int]]:
            got = dev.calls.process_utilization(seen)
            if got is not None:
                return got
            return _util_rows(pynvml.nvmlDeviceGetProcessesUtilizationInfo(h, seen))

        samples = self._fallback_call(
            dev, "process_util", info,
            lambda: _util_rows(pynvml.nvmlDeviceGetProcessUtilization(h, seen)))
        now = time.monotonic()
        # The driver samples processes coarsely: a read soon after the last one often
        # finds nothing new (NOT_FOUND), so each pid keeps its latest sample for
        # PROCESS_UTIL_KEEP_S — seen as "—" after that, never as a stale figure.
        kept = {pid: v for pid, v in dev.process_util.items()
                if now - v[0] <= PROCESS_UTIL_KEEP_S}
        latest: dict[int, int] = {}
        for pid, ts, sm, mem, enc, dec in samples or ():
            if ts >= latest.get(pid, -1):
                latest[pid] = ts
                kept[pid] = (now, (sm, mem, enc, dec))
        if latest:
            dev.sample_seen[-1] = max(latest.values())  # -1: the process samples' key
        dev.process_util = kept
        return {pid: v for pid, (_, v) in kept.items()}


def _util_rows(samples: Any) -> list[tuple[int, int, int, int, int, int]]:
    """pynvml's per-process utilization samples → (pid, time µs, SM, memory, encoder,
    decoder %), as the prepared call gives them."""
    return [(int(u.pid), int(u.timeStamp), int(u.smUtil), int(u.memUtil), int(u.encUtil),
             int(u.decUtil)) for u in samples or ()]
