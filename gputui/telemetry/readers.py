"""GPU readings on threads of their own, so that a hung or slow device stalls only itself.

A driver call can block for seconds, or forever (Xid storms, GPU resets), so NVML calls
never run on the sampler's thread. Each GPU has one reader thread: it opens the device,
then reads it whenever a tick asks. The sampler waits until a deadline; a device that has
not answered by then keeps its last good values, marked ``stale=True`` with ``stale_s``
(their age). A device inside a call is not asked again until the call returns, and the
threads are daemon threads: a hung call never keeps the process from exiting.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from dataclasses import dataclass, field, replace

from gputui.telemetry.model import GpuProcess, GpuSample
from gputui.telemetry.source import GpuSource

# Readers read one after another: each reader, done, starts the next one the tick asked.
# Each NVML call lets go of the GIL, so readers reading at once handed it back and forth at
# every call (~130 futex calls a reader a tick, 8 GPUs), and waking them all at once woke
# eight threads to wait for each other; an NVML read takes a few milliseconds. When no
# reading has landed for TURN_WAIT_S (a device slow, or hung inside a call) the tick
# starts all the rest beside it: it holds them up by that much, no more.
TURN_WAIT_S = 0.05


@dataclass(frozen=True, slots=True)
class Reading:
    """One device's reading, as its reader thread finished it."""

    sample: GpuSample
    processes: tuple[GpuProcess, ...] | None  # None: not read this time
    done_at: float  # time.monotonic() when the reading finished
    seq: int  # counts this device's readings


class ReaderThread:
    """One device's thread: opens the device, reads it once, then once per `start`."""

    def __init__(self, source: GpuSource, index: int, done: threading.Condition,
                 tick: _Tick) -> None:
        self.source = source
        self.index = index
        self.started_at = time.monotonic()
        self._done = done  # notified (held by the caller) when a tick's last reading lands
        self._tick = tick
        self._wake = threading.Event()
        # Guarded by `done`'s lock:
        self.busy = True  # opening, asked (waiting for its turn), or inside a read
        self.awaited = False  # the tick in progress waits for this reading
        self.job = (True, True)  # (slow, processes) of the next read
        self.latest: Reading | None = None
        self.closed = False
        threading.Thread(target=self._run, name=f"gputui-gpu{index}", daemon=True).start()

    def ask(self, slow: bool, processes: bool) -> bool:
        """Read again when started (the caller holds `done`'s lock); False while busy."""
        if self.busy:
            return False
        self.busy, self.job = True, (slow, processes)
        return True

    def start(self) -> None:
        self._wake.set()

    def _run(self) -> None:
        try:
            self.source.open_device(self.index)
        except Exception:
            pass  # the reading says what is wrong
        while not self.closed:
            slow, procs = self.job
            try:
                sample, processes = self.source.read_device(self.index, slow=slow,
                                                            processes=procs)
            except Exception as exc:
                sample = GpuSample(info=self.source.devices[self.index],
                                   error=f"read failed: {exc}")
                processes = None
            with self._done:
                seq = self.latest.seq + 1 if self.latest else 1
                self.latest = Reading(sample, processes, time.monotonic(), seq)
                self.busy = False
                self._tick.landed += 1
                if self.awaited:
                    self.awaited = False
                    self._tick.pending -= 1
                    if not self._tick.pending:
                        # Woken once a tick, by its last reading: a wake-up per device
                        # cost the sampler's thread more than the readings' hand-over.
                        self._done.notify_all()
                self._tick.start_next()
            self._wake.wait()
            self._wake.clear()

    def close(self) -> None:
        self.closed = True
        self._wake.set()


@dataclass(slots=True)
class _Tick:
    """The tick in progress (under the readers' lock): how many readings it still waits
    for, the readers asked and not started yet, and how many readings have landed."""

    pending: int = 0
    queue: deque[ReaderThread] = field(default_factory=deque)
    landed: int = 0

    def start_next(self) -> None:
        if self.queue:
            self.queue.popleft().start()


class ReaderThreads:
    """Every device's reader, and the per-tick rule: fresh if answered, else stale."""

    def __init__(self, source: GpuSource) -> None:
        self.source = source
        self._done = threading.Condition()
        self._tick = _Tick()
        self.threads = [ReaderThread(source, i, self._done, self._tick)
                        for i in range(source.count)]
        self._shown: dict[int, int] = {}  # device index → seq of the reading last returned
        self._procs: dict[int, tuple[GpuProcess, ...]] = {}

    def read(self, *, slow: bool, processes: bool, timeout_s: float,
             ) -> tuple[tuple[GpuSample, ...], tuple[GpuProcess, ...]]:
        """One tick: ask every device not inside a call, read them one after another,
        wait up to `timeout_s` for them (and for those still opening), take what
        answered."""
        tick = self._tick
        with self._done:
            asked = [t for t in self.threads if t.ask(slow, processes)]
            waiting = [t for t in self.threads if t.busy and (t in asked or t.latest is None)]
            for t in waiting:
                t.awaited = True
            tick.pending = len(waiting)
            tick.queue = deque(asked)
            tick.start_next()
            deadline = time.monotonic() + timeout_s
            landed = tick.landed
            while tick.pending and (left := deadline - time.monotonic()) > 0:
                self._done.wait(min(TURN_WAIT_S, left))
                if tick.landed == landed:  # nothing answered for a while: the rest, beside
                    while tick.queue:
                        tick.start_next()
                landed = tick.landed
            for t in waiting:  # late ones (stale this tick) wake nobody
                t.awaited = False
            while tick.queue:  # not reached by the deadline: read now, shown next tick
                tick.start_next()
            latest = [(t.index, t.started_at, t.latest) for t in self.threads]
        now = time.monotonic()
        samples = []
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
        with self._done:
            return any(t.busy for t in self.threads)

    def close(self) -> None:
        for t in self.threads:
            t.close()
