"""HostSource: CPU, memory, swap and load through psutil; details of GPU processes."""

from __future__ import annotations

import os
import socket
import time
from dataclasses import replace

import psutil

from gputui.telemetry.container import ContainerNames
from gputui.telemetry.model import GpuProcess, HostSample

# psutil's CPU % is a delta since the previous call; shorter windows are noise.
MIN_CPU_WINDOW_S = 0.1


class HostSource:
    def __init__(self) -> None:
        self.hostname = socket.gethostname()
        # psutil's cpu_percent(None) measures since the previous call: prime it so the
        # first real reading covers one interval rather than reporting 0.
        psutil.cpu_percent(None)
        psutil.cpu_percent(None, percpu=True)
        self._primed_at: float | None = time.monotonic()
        self._procs: dict[int, psutil.Process] = {}
        self._containers = ContainerNames()

    def read(self) -> HostSample:
        vm = psutil.virtual_memory()
        sw = psutil.swap_memory()
        try:
            load = tuple(round(x, 2) for x in os.getloadavg())
        except OSError:
            load = None
        cpu = psutil.cpu_percent(None)
        per_core = tuple(psutil.cpu_percent(None, percpu=True))
        if self._primed_at is not None:
            # Right after priming the delta covers a few ms and reads as a made-up 0 %.
            if time.monotonic() - self._primed_at < MIN_CPU_WINDOW_S:
                cpu, per_core = None, ()  # type: ignore[assignment]
            self._primed_at = None
        return HostSample(
            hostname=self.hostname,
            cpu_pct=cpu,
            cpu_per_core_pct=per_core,
            mem_used_bytes=int(vm.total - vm.available),
            mem_total_bytes=int(vm.total),
            swap_used_bytes=int(sw.used),
            swap_total_bytes=int(sw.total),
            load_avg=load,  # type: ignore[arg-type]
        )

    def describe(self, procs: tuple[GpuProcess, ...]) -> tuple[GpuProcess, ...]:
        """Add user, command line, CPU % and RSS from psutil to NVML's pid list.

        Process objects are kept between calls because psutil's cpu_percent is a
        delta since the previous call on the same object.
        """
        alive: dict[int, psutil.Process] = {}
        out: list[GpuProcess] = []
        # One psutil reading per PID per tick: a process on two GPUs has two rows, and a
        # second cpu_percent() on the same object would measure the microseconds since
        # the first (≈0 %). Its other rows copy the first row's host-side facts.
        described: dict[int, GpuProcess] = {}
        for p in procs:
            first = described.get(p.pid)
            if first is not None:
                out.append(replace(p, user=first.user, command=first.command,
                                   cpu_pct=first.cpu_pct, rss_bytes=first.rss_bytes,
                                   started=first.started, container=first.container))
                continue
            proc = self._procs.get(p.pid) or alive.get(p.pid)
            try:
                if proc is None:
                    proc = psutil.Process(p.pid)
                    proc.cpu_percent(None)
                with proc.oneshot():
                    cmd = proc.cmdline()
                    out.append(replace(
                        p,
                        user=_safe(proc.username),
                        command=" ".join(cmd) if cmd else f"[{proc.name()}]",
                        cpu_pct=proc.cpu_percent(None),
                        rss_bytes=proc.memory_info().rss,
                        started=proc.create_time(),
                        container=self._containers.get(p.pid, proc.create_time()),
                    ))
                alive[p.pid] = proc
            except (psutil.NoSuchProcess, psutil.ZombieProcess):
                out.append(p)
            except psutil.AccessDenied:
                out.append(replace(p, user=_safe(proc.username) if proc else None))
                if proc is not None:
                    alive[p.pid] = proc
            described[p.pid] = out[-1]
        self._procs = alive
        return tuple(out)


def _safe(fn: object) -> str | None:
    try:
        return fn()  # type: ignore[operator, no-any-return]
    except (psutil.Error, KeyError):
        return None
