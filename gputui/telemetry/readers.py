"""GPU readings on worker threads, so that a hung or slow device stalls only itself.

A driver call can block for seconds, or forever (Xid storms, GPU resets), so NVML calls
never run on the sampler's thread. Every tick the sampler queues every device that is not
inside a call and wakes one worker, which reads the queued devices one after the other: one
hand-off per tick, not one per GPU (8 per-GPU threads woken every tick cost more CPU than
their reads). A device whose call takes longer than its slot (READER_SLOT_S) keeps that
worker; the pool wakes (or starts) another for the rest of the queue, so the others are
read on time. The sampler waits until a deadline; a device that has not answered by then
keeps its last good values, marked ``stale=True`` with ``stale_s`` (their age). A device
inside a call is never queued again until the call returns, and workers are daemon threads:
a hung call never keeps the process from exiting.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from dataclasses import dataclass, replace
from typing import Protocol

from gputui.telemetry.model import DeviceInfo, GpuProcess, GpuSample


class DeviceSource(Protocol):
    """What a reader needs from the NVML source (gputui.telemetry.nvml.NvmlSource)."""

    @property
    def count(self) -> int: ...

    @property
    def devices(self) -> tuple[DeviceInfo, ...]: ...

    def open_device(self, index: int) -> DeviceInfo: ...

    def read_device(self, index: int, *, slow: bool, processes: bool,
                    ) -> tuple[GpuSample, tuple[GpuProcess, ...] | None]: ...


# How long a device's call may take before the rest of the queue goes to another worker.
READER_SLOT_S = 0.02


@dataclass(frozen=True, slots=True)
class Reading:
    sample: GpuSample
    processes: tuple[GpuProcess, ...] | None  # None: not read this time
    done_at: float  # time.monotonic() when the reading finished
    seq: int  # counts this device's readings


class _Device:
    """One device's state in the pool (guarded by the pool's lock)."""

    def __init__(self, index: int) -> None:
        self.index = index
        self.started_at = time.monotonic()
        self.opened = False
        self.busy = True  # queued or inside a call (opening first)
        self.job: tuple[bool, bool] = (True, True)  # (slow, processes) of the queued read
        self.latest: Reading | None = None
        self.seq = 0


class _Worker:
    """A daemon thread that reads queued devices until the queue is empty."""

    def __init__(self, pool: ReaderPool, n: int) -> None:
        self.pool = pool
        self.go = threading.Lock()
        self.go.acquire()  # released: there is work (or the pool closed)
        self.current: _Device | None = None
        self.since = 0.0  # when the current call began
        self.thread = threading.Thread(target=self._run, name=f"gputui-reader{n}",
                                       daemon=True)
        self.thread.start()

    def _run(self) -> None:
        pool = self.pool
        while True:
            with pool.lock:
                if pool.closed:
                    return
                dev = pool.queue.popleft() if pool.queue else None
                self.current, self.since = dev, time.monotonic()
                if dev is None:
                    pool.idle.append(self)
            if dev is None:
                self.go.acquire()
                continue
            reading = pool.read_one(dev)
            with pool.lock:
                dev.seq += 1
                dev.latest = Reading(*reading, time.monotonic(), dev.seq)
                dev.busy = False
                self.current = None
                pool.pending.discard(dev.index)
                if not pool.pending and pool.done.locked():
                    pool.done.release()


class ReaderPool:
    """Every device's readings, and the per-tick rule: fresh if answered, else stale."""

    def __init__(self, source: DeviceSource) -> None:
        self.source = source
        self.lock = threading.Lock()
        self.done = threading.Lock()
        self.done.acquire()  # released: every device asked for this tick has answered
        self.closed = False
        self.devices = [_Device(i) for i in range(source.count)]
        self.queue: deque[_Device] = deque(self.devices)  # opened, then read at once
        self.pending: set[int] = {d.index for d in self.devices}
        self.idle: list[_Worker] = []
        self.workers: list[_Worker] = []
        self._shown: dict[int, int] = {}  # device index → seq of the reading last returned
        self._procs: dict[int, tuple[GpuProcess, ...]] = {}
        if self.devices:
            with self.lock:
                self._kick()

    def read_one(self, dev: _Device) -> tuple[GpuSample, tuple[GpuProcess, ...] | None]:
        """Open (the first time) and read one device, on a worker thread."""
        if not dev.opened:
            dev.opened = True
            try:
                self.source.open_device(dev.index)
            except Exception:
                pass
        slow, procs = dev.job
        try:
            return self.source.read_device(dev.index, slow=slow, processes=procs)
        except Exception as exc:
            info = self.source.devices[dev.index]
            return GpuSample(info=info, error=f"read failed: {exc}"), None

    def _kick(self) -> None:
        """Have a worker on the queue that is not stuck in a call (lock held)."""
        now = time.monotonic()
        for w in self.workers:
            if w not in self.idle and (w.current is None or now - w.since < READER_SLOT_S):
                return  # one is working through the queue
        if self.idle:
            self.idle.pop().go.release()
        else:
            self.workers.append(_Worker(self, len(self.workers)))

    def read(self, *, slow: bool, processes: bool, timeout_s: float,
             ) -> tuple[tuple[GpuSample, ...], tuple[GpuProcess, ...]]:
        """One tick: queue every device not inside a call, wait up to `timeout_s`, take
        what answered."""
        deadline = time.monotonic() + timeout_s
        with self.lock:
            for d in self.devices:
                if not d.busy:
                    d.busy, d.job = True, (slow, processes)
                    self.queue.append(d)
                    self.pending.add(d.index)
            self.done.acquire(blocking=False)  # a signal left from an earlier tick
            if self.pending:
                self._kick()
            waiting = bool(self.pending)
        while waiting:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            if self.done.acquire(timeout=min(left, READER_SLOT_S)):
                break
            with self.lock:
                waiting = bool(self.pending)
                if self.queue:
                    self._kick()  # the worker is stuck in a slow call: another takes over
        now = time.monotonic()
        samples = []
        with self.lock:
            latest = [(d.index, d.started_at, d.latest) for d in self.devices]
        for index, started_at, reading in latest:
            if reading is None:
                # Never answered, not even while opening: nothing but its index is known.
                info = self.source.devices[index]
                samples.append(GpuSample(info=info, error="not answering", stale=True,
                                         stale_s=now - started_at))
                continue
            if reading.seq != self._shown.get(index):
                self._shown[index] = reading.seq
                samples.append(reading.sample)
                if reading.processes is not None:
                    self._procs[index] = reading.processes
            else:
                samples.append(replace(reading.sample, stale=True,
                                       stale_s=now - reading.done_at))
        procs = tuple(p for i in sorted(self._procs) for p in self._procs[i])
        return tuple(samples), procs

    @property
    def hung(self) -> bool:
        """Some device is inside a driver call right now."""
        with self.lock:
            return any(w.current is not None for w in self.workers)

    def close(self) -> None:
        with self.lock:
            self.closed = True
            idle, self.idle = self.idle, []
        for w in idle:
            w.go.release()
