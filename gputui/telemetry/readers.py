"""One reader thread per GPU, so that a hung or slow device stalls only itself.

A driver call can block for seconds, or forever (Xid storms, GPU resets). Each
device's NVML calls therefore run on that device's own daemon thread. Every tick
the sampler asks every idle reader for a reading and waits until a deadline; a
device that has not answered by then keeps its last good values, marked
``stale=True`` with ``stale_s`` (their age), and the other devices go on at the
requested interval. A reader blocked in a C call is never waited for again (it
is simply not asked until it returns), and being a daemon thread it never keeps
the process from exiting.
"""

from __future__ import annotations

import threading
import time
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


# How long a tick waits for one reader before asking the next one anyway.
READER_SLOT_S = 0.02


@dataclass(frozen=True, slots=True)
class Reading:
    sample: GpuSample
    processes: tuple[GpuProcess, ...] | None  # None: not read this time
    done_at: float  # time.monotonic() when the reading finished
    seq: int  # counts this reader's readings


class DeviceReader:
    """Owns one device's NVML calls on a daemon thread."""

    def __init__(self, source: DeviceSource, index: int) -> None:
        self.source = source
        self.index = index
        self.started_at = time.monotonic()
        self._cond = threading.Condition()
        self._job: tuple[bool, bool] | None = None
        self._busy = True  # opening the device
        self._closed = False
        self.latest: Reading | None = None
        self._seq = 0
        self._thread = threading.Thread(target=self._run, name=f"gputui-gpu{index}",
                                        daemon=True)
        self._thread.start()

    @property
    def busy(self) -> bool:
        with self._cond:
            return self._busy

    def request(self, *, slow: bool, processes: bool) -> bool:
        """Ask for a reading; False (and nothing asked) while the last call is still out."""
        with self._cond:
            if self._busy or self._closed:
                return False
            self._job = (slow, processes)
            self._busy = True
            self._cond.notify_all()
            return True

    def wait(self, deadline: float) -> bool:
        """Wait (until the monotonic `deadline`) for the reader to be idle."""
        with self._cond:
            while self._busy:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._cond.wait(left)
            return True

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    def _run(self) -> None:
        try:
            self.source.open_device(self.index)
        except Exception:
            pass
        # The first reading follows the open at once: a tick that waited for the open
        # found this reader busy and asked nothing, and must not get an empty frame.
        with self._cond:
            if self._job is None:
                self._job = (True, True)
        while True:
            with self._cond:
                while self._job is None and not self._closed:
                    self._cond.wait()
                if self._closed:
                    return
                slow, procs = self._job  # type: ignore[misc]
                self._job = None
            try:
                sample, plist = self.source.read_device(self.index, slow=slow,
                                                        processes=procs)
            except Exception as exc:
                info = self.source.devices[self.index]
                sample, plist = GpuSample(info=info, error=f"read failed: {exc}"), None
            with self._cond:
                self._seq += 1
                self.latest = Reading(sample, plist, time.monotonic(), self._seq)
                self._busy = False
                self._cond.notify_all()


class ReaderPool:
    """Every device's reader, and the per-tick rule: fresh if answered, else stale."""

    def __init__(self, source: DeviceSource) -> None:
        self.source = source
        self.readers = [DeviceReader(source, i) for i in range(source.count)]
        self._shown: dict[int, int] = {}  # reader index → seq of the reading last returned
        self._procs: dict[int, tuple[GpuProcess, ...]] = {}

    def read(self, *, slow: bool, processes: bool, timeout_s: float,
             ) -> tuple[tuple[GpuSample, ...], tuple[GpuProcess, ...]]:
        """One tick: ask every idle reader, wait up to `timeout_s`, take what answered."""
        start = time.monotonic()
        deadline = start + timeout_s
        # One reader at a time while each answers within its slot: 8 threads woken at
        # once fight over the GIL at every NVML call (ctypes drops it per call), which
        # cost more CPU than the reads. A reader that takes longer than its slot (a slow
        # or hung call) is left running and the next one is asked: isolation holds.
        for r in self.readers:
            if r.request(slow=slow, processes=processes):
                r.wait(min(deadline, time.monotonic() + READER_SLOT_S))
        for r in self.readers:
            r.wait(deadline)
        now = time.monotonic()
        samples = []
        for r in self.readers:
            reading = r.latest
            if reading is None:
                # Never answered, not even while opening: nothing but its index is known.
                info = self.source.devices[r.index]
                samples.append(GpuSample(info=info, error="not answering", stale=True,
                                         stale_s=now - r.started_at))
                continue
            if reading.seq != self._shown.get(r.index):
                self._shown[r.index] = reading.seq
                samples.append(reading.sample)
                if reading.processes is not None:
                    self._procs[r.index] = reading.processes
            else:
                samples.append(replace(reading.sample, stale=True,
                                       stale_s=now - reading.done_at))
        procs = tuple(p for i in sorted(self._procs) for p in self._procs[i])
        return tuple(samples), procs

    @property
    def hung(self) -> bool:
        """Some reader is inside a driver call right now."""
        return any(r.busy for r in self.readers)

    def close(self) -> None:
        for r in self.readers:
            r.close()
