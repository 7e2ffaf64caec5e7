"""HostSource: CPU, memory, swap and load, and details of GPU processes (psutil), with
the container and pod each runs in (gputui.telemetry.container)."""

from __future__ import annotations

import socket
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import psutil

from gputui.telemetry.container import ContainerNames
from gputui.telemetry.model import GpuProcess, HostSample

# psutil's CPU % is a delta since the previous call; shorter windows are noise.
MIN_CPU_WINDOW_S = 0.1
# Swap moves slowly and psutil reads all of /proc/vmstat for it: every few seconds.
SWAP_EVERY_S = 5.0
# A GPU process this host cannot see (another PID namespace: gputui in a container) is
# looked up again only this often, not every tick.
MISSING_RETRY_S = 10.0


def _busy_and_total(t: Any) -> tuple[float, float]:
    """(busy, total) CPU seconds of one psutil cpu_times row, counted as psutil's
    cpu_percent counts them: guest time is already inside user and nice, and idle and
    iowait are not busy."""
    total = sum(t) - getattr(t, "guest", 0.0) - getattr(t, "guest_nice", 0.0)
    return total - t.idle - getattr(t, "iowait", 0.0), total


def _pct(busy: float, total: float) -> float:
    return round(min(100.0, max(0.0, 100.0 * busy / total)), 1) if total > 0 else 0.0


def _memory() -> tuple[int, int]:
    """(used, total) bytes of host memory, used meaning total minus available (what
    `free` calls available: what a new process could get without swapping)."""
    vm = psutil.virtual_memory()
    return int(vm.total) - int(vm.available), int(vm.total)


class CpuLoad:
    """Whole-host and per-core CPU % since the previous reading, from one read of the
    per-core times (psutil's cpu_percent keeps one window for the whole process: two
    consumers would shorten each other's)."""

    def __init__(self) -> None:
        self._last = self._read()

    @staticmethod
    def _read() -> list[tuple[float, float]]:
        return [_busy_and_total(t) for t in psutil.cpu_times(percpu=True)]

    def percent(self) -> tuple[float, tuple[float, ...]]:
        now = self._read()
        last, self._last = self._last, now
        if len(now) != len(last):  # a core went on- or offline: start a new window
            return 0.0, tuple(0.0 for _ in now)
        deltas = [(b - b0, t - t0) for (b, t), (b0, t0) in zip(now, last, strict=True)]
        per_core = tuple(_pct(b, t) for b, t in deltas)
        return _pct(sum(b for b, _ in deltas), sum(t for _, t in deltas)), per_core


class HostSource:
    """The host's CPU, memory and load, and what /proc knows of the GPU processes (psutil
    reads them under psutil.PROCFS_PATH, which --path.procfs sets; `procfs` is the same
    tree, for the files gputui reads itself; `rootfs` is where the node's own files are,
    kubelet's and the container runtimes' among them)."""

    def __init__(self, *, clock: Callable[[], float] = time.monotonic,
                 procfs: Path = Path("/proc"), rootfs: Path = Path("/")) -> None:
        self._clock = clock  # monotonic seconds (tests pass a fake clock)
        self.hostname = socket.gethostname()
        # CPU % measures since the previous reading: prime it so the first real reading
        # covers one interval rather than reporting 0.
        self._cpu = CpuLoad()
        self._primed_at: float | None = clock()
        self._procs: dict[int, psutil.Process] = {}
        self._facts: dict[int, _Facts] = {}  # pid → user, command, start
        self._cpu_seen: dict[int, tuple[float, float]] = {}  # pid → (CPU s, when read)
        self._missing: dict[int, float] = {}  # pid → when it was last found missing
        self._swap: tuple[float, int, int] | None = None  # (read at, used, total)
        self._containers = ContainerNames(procfs, rootfs, clock=clock)

    def read(self) -> HostSample:
        # Each figure is read from /proc on its own: one that cannot be read this tick
        # (too many open files, say) is None, and the tick goes on.
        mem_used: int | None
        mem_total: int | None
        try:
            mem_used, mem_total = _memory()
        except OSError:
            mem_used, mem_total = None, None
        now = self._clock()
        if self._swap is None or now - self._swap[0] >= SWAP_EVERY_S:
            try:
                sw = psutil.swap_memory()
                self._swap = (now, int(sw.used), int(sw.total))
            except OSError:
                pass
        swap_used, swap_total = self._swap[1:] if self._swap is not None else (None, None)
        try:
            load = tuple(round(x, 2) for x in psutil.getloadavg())
        except OSError:
            load = None
        cpu: float | None
        try:
            cpu, per_core = self._cpu.percent()
        except OSError:
            cpu, per_core = None, ()
        if self._primed_at is not None:
            # Right after priming the delta covers a few ms and reads as a made-up 0 %.
            if now - self._primed_at < MIN_CPU_WINDOW_S:
                cpu, per_core = None, ()  # type: ignore[assignment]
            self._primed_at = None
        return HostSample(
            hostname=self.hostname,
            cpu_pct=cpu,
            cpu_per_core_pct=per_core,
            mem_used_bytes=mem_used,
            mem_total_bytes=mem_total,
            swap_used_bytes=swap_used,
            swap_total_bytes=swap_total,
            load_avg=load,  # type: ignore[arg-type]
        )

    def describe(self, procs: tuple[GpuProcess, ...]) -> tuple[GpuProcess, ...]:
        """Add user, command line, CPU % and RSS to NVML's pid list.

        The user, command line, start time and cgroup are read when a process is first
        seen; afterwards only CPU times and RSS (one psutil oneshot), and the container's
        and pod's names until they are known (ContainerNames). CPU % covers the time since
        the previous description of that process: None at its first (no window yet).
        """
        alive: dict[int, psutil.Process] = {}
        facts: dict[int, _Facts] = {}
        cpu_seen: dict[int, tuple[float, float]] = {}
        now = self._clock()
        missing = {pid: t for pid, t in self._missing.items() if now - t < MISSING_RETRY_S}
        out: list[GpuProcess] = []
        # One reading per PID per call: a process on two GPUs has two rows; its other
        # rows copy the first row's host-side facts.
        described: dict[int, GpuProcess] = {}
        for p in procs:
            first = described.get(p.pid)
            if first is not None:
                out.append(replace(p, user=first.user, command=first.command,
                                   cpu_pct=first.cpu_pct, rss_bytes=first.rss_bytes,
                                   started=first.started, container=first.container,
                                   container_id=first.container_id, pod=first.pod,
                                   namespace=first.namespace, pod_uid=first.pod_uid,
                                   qos=first.qos))
                continue
            proc = self._procs.get(p.pid) or alive.get(p.pid)
            if proc is None and p.pid in missing:
                out.append(p)  # not visible from here (looked up again later)
                described[p.pid] = p
                continue
            try:
                known = self._facts.get(p.pid) if p.pid in self._procs else None
                if proc is None or known is None:
                    proc = proc or psutil.Process(p.pid)
                    with proc.oneshot():
                        cmd = proc.cmdline()
                        known = _Facts(_safe(proc.username),
                                       " ".join(cmd) if cmd else f"[{proc.name()}]",
                                       proc.create_time())
                cpu, rss = self._usage(p.pid, proc, now, cpu_seen)
                out.append(GpuProcess(
                    gpu_index=p.gpu_index, pid=p.pid, gpu_mem_bytes=p.gpu_mem_bytes,
                    kind=p.kind, user=known.user, command=known.command, cpu_pct=cpu,
                    rss_bytes=rss, started=known.started, sm_util_pct=p.sm_util_pct,
                    mem_util_pct=p.mem_util_pct, enc_util_pct=p.enc_util_pct,
                    dec_util_pct=p.dec_util_pct,
                ).with_workload(self._containers.get(p.pid, known.started)))
                alive[p.pid] = proc
                facts[p.pid] = known
            except (psutil.NoSuchProcess, psutil.ZombieProcess):
                missing[p.pid] = now
                out.append(p)
            except psutil.AccessDenied:
                out.append(replace(p, user=_safe(proc.username) if proc else None
                                   ).with_workload(self._containers.get(p.pid, None)))
                if proc is not None:
                    alive[p.pid] = proc
            except OSError:  # /proc unreadable this tick (too many open files): NVML's facts
                out.append(p)
            described[p.pid] = out[-1]
        self._procs = alive
        self._facts = facts
        self._cpu_seen = cpu_seen
        self._missing = missing
        return tuple(out)

    def _usage(self, pid: int, proc: psutil.Process, now: float,
               seen: dict[int, tuple[float, float]]) -> tuple[float | None, int | None]:
        """(CPU % of one core since this process's previous description, RSS bytes):
        user + system time over wall time, as top counts it."""
        with proc.oneshot():
            times = proc.cpu_times()
            rss = int(proc.memory_info().rss)
        cpu_s = times.user + times.system
        seen[pid] = (cpu_s, now)
        last = self._cpu_seen.get(pid)
        if last is None or now <= last[1]:
            return None, rss
        return round(100.0 * max(0.0, cpu_s - last[0]) / (now - last[1]), 1), rss


@dataclass(frozen=True, slots=True)
class _Facts:
    """What does not change while a process runs, read once per process."""

    user: str | None
    command: str
    started: float


def _safe(fn: object) -> str | None:
    try:
        return fn()  # type: ignore[operator, no-any-return]
    except (psutil.Error, KeyError):
        return None
