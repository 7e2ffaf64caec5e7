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
from dataclasses import dataclass, replace

from gputui.telemetry.model import GpuProcess, GpuSample
from gputui.telemetry.source import GpuSource

# How long a reader waits for the one reading before it, then reads anyway. Readers take
# turns because each NVML call lets go of the GIL: eight threads reading at once handed it
# back and forth at every call, ~130 futex calls a reader a tick where one reader at a time
# makes a few; an NVML read takes a few milliseconds. A device slower than this (or hung
# inside a call, holding its turn) holds the others up by this much and no more.
TURN_WAIT_S = 0.05


@dataclass(frozen=True, slots=True)
class Reading:
    """One device's reading, as its reader thread finished it."""

    sample: GpuSample
    processes: tuple[GpuProcess, ...] | None  # None: not read this time
    done_at: float  # time.monotonic() when the reading finished
    seq: int  # counts this device's readings


class ReaderThread:
    """One device's thread: opens the device, reads it once, then once per `ask`."""

    def __init__(self, source: GpuSource, index: int, done: threading.Condition,
                 tick: _Tick, turn: threading.Lock) -> None:
        self.source = source
        self.index = index
        self.started_at = time.monotonic()
        self._done = done  # notified (held by the caller) when a tick's last reading lands
        self._tick = tick
        self._turn = turn  # held while reading, by one reader at a time
        self._wake = threading.Event()
        # Guarded by `done`'s lock:
        self.busy = True  # opening, or inside a read
        self.awaited = False  # the tick in progress waits for this reading
        self.job = (True, True)  # (slow, processes) of the next read
        self.latest: Reading | None = None
        self.closed = False
        threading.Thread(target=self._run, name=f"gputui-gpu{index}", daemon=True).start()

    def ask(self, slow: bool, processes: bool) -> bool:
        """Read again (the caller holds `done`'s lock); False while inside a call."""
        if self.busy:
            return False
        self.busy, self.job = True, (slow, processes)
        self._wake.set()
        return True

    def _run(self) -> None:
        try:
            self.source.open_device(self.index)
        except Exception:
            pass  # the reading says what is wrong
        while not self.closed:
            slow, procs = self.job
            # One reader at a time while each answers promptly (see TURN_WAIT_S).
            my_turn = self._turn.acquire(timeout=TURN_WAIT_S)
            try:
                sample, processes = self.source.read_device(self.index, slow=slow,
                                                            processes=procs)
            except Exception as exc:
                sample = GpuSample(info=self.source.devices[self.index],
                                   error=f"read failed: {exc}")
                processes = None
            finally:
                if my_turn:
                    self._turn.release()
            with self._done:
                seq = self.latest.seq + 1 if self.latest else 1
                self.latest = Reading(sample, processes, time.monotonic(), seq)
                self.busy = False
                if self.awaited:
                    self.awaited = False
                    self._tick.pending -= 1
                    if not self._tick.pending:
                        # Woken once a tick, by its last reading: a wake-up per device
                        # cost the sampler's thread more than the readings' hand-over.
                        self._done.notify_all()
            self._wake.wait()
            self._wake.clear()

    def close(self) -> None:
        self.closed = True
        self._wake.set()


class _Tick:
    """How many readings the tick in progress still waits for (under the readers' lock)."""

    pending: int = 0


class ReaderThreads:
    """Every device's reader, and the per-tick rule: fresh if answered, else stale."""

    def __init__(self, source: GpuSource) -> None:
        self.source = source
        self._done = threading.Condition()
        self._tick = _Tick()
        turn = threading.Lock()
        self.threads = [ReaderThread(source, i, self._done, self._tick, turn)
                        for i in range(source.count)]
        self._shown: dict[int, int] = {}  # device index → seq of the reading last returned
        self._procs: dict[int, tuple[GpuProcess, ...]] = {}

    def read(self, *, slow: bool, processes: bool, timeout_s: float,
             ) -> tuple[tuple[GpuSample, ...], tuple[GpuProcess, ...]]:
        """One tick: ask every device not inside a call, wait up to `timeout_s` for them
        (and for those still opening), take what answered."""
        with self._done:
            waiting = [t for t in self.threads
                       if (t.ask(slow, processes) or t.latest is None) and t.busy]
            for t in waiting:
                t.awaited = True
            self._tick.pending = len(waiting)
            self._done.wait_for(lambda: not self._tick.pending, timeout_s)
            for t in waiting:  # late ones (stale this tick) wake nobody
                t.awaited = False
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
