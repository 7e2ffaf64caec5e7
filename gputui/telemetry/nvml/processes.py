"""A GPU's compute and graphics processes and their share of it (per-process
utilization), read every few ticks."""

from __future__ import annotations

import time
from typing import Any

import pynvml

from gputui.telemetry.model import GpuProcess
from gputui.telemetry.nvml.query import NvmlQuery

# How long a process's last utilization sample stands when the driver has no newer one.
PROCESS_UTIL_KEEP_S = 5.0


class ProcessReader:
    """One GPU's process list, and the per-process utilization samples kept between reads."""

    def __init__(self, index: int, with_util: bool) -> None:
        self.index = index
        self.with_util = with_util
        self._seen_us = 0  # NVML's lastSeenTimeStamp of the utilization samples
        # pid → (monotonic time read, (SM, memory, encoder, decoder %)): the latest sample
        self._util: dict[int, tuple[float, tuple[int, int, int, int]]] = {}

    def read(self, q: NvmlQuery, handle: Any) -> list[GpuProcess]:
        found: dict[int, tuple[int | None, str]] = {}  # pid → (GPU memory, kind)
        for kind, fn in (("compute", pynvml.nvmlDeviceGetComputeRunningProcesses),
                         ("graphics", pynvml.nvmlDeviceGetGraphicsRunningProcesses)):
            for p in q(fn, handle, key=f"processes_{kind}") or ():
                pid = int(p.pid)
                mem = None if p.usedGpuMemory is None else int(p.usedGpuMemory)
                if pid in found:
                    # A process that is both compute and graphics (e.g. a viewer): keep
                    # the larger memory figure, as nvidia-smi does.
                    if mem is not None and (found[pid][0] or 0) < mem:
                        found[pid] = (mem, "compute+graphics")
                    continue
                found[pid] = (mem, kind)
        if q.lost:
            return []
        util = self._read_util(q, handle) if found and self.with_util else {}
        none4 = (None, None, None, None)
        out = []
        for pid, (mem, kind) in found.items():
            sm, mem_util, enc, dec = util.get(pid, none4)
            out.append(GpuProcess(gpu_index=self.index, pid=pid, gpu_mem_bytes=mem,
                                  kind=kind, sm_util_pct=sm, mem_util_pct=mem_util,
                                  enc_util_pct=enc, dec_util_pct=dec))
        return out

    def _read_util(self, q: NvmlQuery, handle: Any) -> dict[int, tuple[int, int, int, int]]:
        """pid → (SM, memory, encoder, decoder %) over the samples since the last call
        (NVML's lastSeenTimeStamp bookkeeping); a pid sampled more than once gets its
        latest sample."""
        samples = q.newer_or_older(
            "process_util",
            (pynvml.nvmlDeviceGetProcessesUtilizationInfo, handle, self._seen_us),
            (pynvml.nvmlDeviceGetProcessUtilization, handle, self._seen_us))
        now = time.monotonic()
        # The driver samples processes coarsely: a read soon after the last one often
        # finds nothing new (NOT_FOUND), so each pid keeps its latest sample for
        # PROCESS_UTIL_KEEP_S — seen as "—" after that, never as a stale figure.
        kept = {pid: v for pid, v in self._util.items() if now - v[0] <= PROCESS_UTIL_KEEP_S}
        latest: dict[int, int] = {}
        for u in samples or ():
            pid, ts = int(u.pid), int(u.timeStamp)
            if ts >= latest.get(pid, -1):
                latest[pid] = ts
                kept[pid] = (now, (int(u.smUtil), int(u.memUtil), int(u.encUtil),
                                   int(u.decUtil)))
        if latest:
            self._seen_us = max(latest.values())
        self._util = kept
        return {pid: v for pid, (_, v) in kept.items()}
