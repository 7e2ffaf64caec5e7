"""XID, ECC and clock-change events: one listener thread per NVML session, taking what
nvmlEventSetWait has waiting every poll (the monitor's: every second).

A device is registered for the subset of MONITOR_EVENTS that
nvmlDeviceGetSupportedEventTypes reports: nvml.h documents the clock-change event
(nvmlEventTypeClock) as Kepler only, so on newer GPUs only XID and ECC events arrive and
the polled clocks-event reasons (gputui.telemetry.throttle) tell of clock changes.

Every call goes through NvmlQuery, like every read: a device's registration through that
device's own query (a device without events is remembered as such, a lost GPU is lost for
its reader too), the event set's calls through the listener's own query, whose rules hold
for the set as a whole (a driver or pynvml without the call, a lost GPU: listening stops,
said in `error`). A wait that finds nothing ends in a timeout, a transient error there:
none is left.
Only freeing the set is a direct call: it is done even after a GPU was lost."""

from __future__ import annotations

import contextlib
import ctypes
import threading
import time
from collections.abc import Callable
from typing import Any, Protocol

import pynvml

from gputui.telemetry.nvml.query import NvmlQuery
from gputui.telemetry.units import ms_to_s
from gputui.telemetry.xid import XidEvent

# NVML event bits a watcher can listen for, and the kind each becomes.
EVENT_KINDS = {0x8: "xid", 0x1: "ecc_single_bit", 0x2: "ecc_double_bit",
               pynvml.nvmlEventTypeClock: "clock_change"}
MONITOR_EVENTS = 0x8 | 0x1 | 0x2 | pynvml.nvmlEventTypeClock
# A session's listener takes its events once a second: a frame is built once a tick, and
# each wake-up of a thread costs this VM ~0.1 ms of CPU.
MONITOR_POLL_MS = 1000


class Devices(Protocol):
    """What the watcher needs of an open NvmlSource: its devices' handles and queries."""

    @property
    def count(self) -> int: ...

    def handle(self, index: int) -> Any | None:
        """None for a device that is lost, not opened, or has no handle."""

    def query(self, index: int) -> NvmlQuery:
        """The device's own NvmlQuery (used on the thread that opened the device)."""


def _why(q: NvmlQuery) -> str:
    """Why the last call of `q` gave nothing, in words."""
    if q.lost:
        return "GPU is lost"
    return q.last_error_text if q.last_error is not None else "not supported"


class XidWatcher:
    """Collects the XID critical errors NVML reports on every open device of `source`
    while it runs, on its own thread (a call can block in the driver). With `mask`, also the
    ECC error events (the monitor's events); with `start(register=False)` devices are
    added one by one as they open (`register`)."""

    def __init__(self, source: Devices, *, poll_ms: int = 200,
                 on_event: Callable[[XidEvent], None] | None = None,
                 mask: int = 0x8) -> None:
        self._source = source
        self._poll_ms = poll_ms
        self._on_event = on_event
        self._mask = mask
        self._set: Any = None
        # The event set's calls: creating it (on the caller's thread), then waiting on it
        # (on the listener's thread only).
        self._q = NvmlQuery()
        self._by_handle: dict[int | None, int] = {}
        self._events: list[XidEvent] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.unsupported: set[int] = set()  # devices that cannot report XIDs
        self.error: str | None = None  # listening broke off (the events so far stand)

    def start(self, *, register: bool = True) -> None:
        self._set = self._q("nvmlEventSetCreate")
        if self._set is None:
            self.error = f"NVML events unavailable: {_why(self._q)}"
            self.unsupported = set(range(self._source.count))
            return
        if not register:
            self._thread = threading.Thread(target=self._run, name="gputui-events",
                                            daemon=True)
            self._thread.start()
            return
        xid = pynvml.nvmlEventTypeXidCriticalError
        for index in range(self._source.count):
            self._register(index, xid)
        self._thread = threading.Thread(target=self._run, name="gputui-xid", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        """Every `poll_ms`, take the events that arrived (each with a wait of 0 ms, until
        none is left), and at once when stopped. A wait that blocks until an event or its
        timeout would have to time out that often anyway to see whether to stop, and a
        stop would wait for it; this way the thread wakes once a poll, and a stop is
        immediate."""
        while self._drain() and not self._stop.wait(ms_to_s(self._poll_ms)):
            pass
        self._drain()  # what arrived before the stop (nothing more once listening failed)

    def _drain(self) -> bool:
        """Take every event waiting; False once listening has failed (said in `error`)."""
        if self.error is not None:
            return False
        q = self._q
        while True:
            data = q("nvmlEventSetWait_v2", self._set, 0)
            if data is None:
                if q.last_error == pynvml.NVML_ERROR_TIMEOUT:
                    return True  # none left
                self.error = f"listening for XID events failed: {_why(q)}"
                return False
            index = self._by_handle.get(ctypes.cast(data.device, ctypes.c_void_p).value)
            kind = EVENT_KINDS.get(int(data.eventType) & self._mask)
            if index is None or kind is None:
                continue
            event = XidEvent(gpu=index, xid=int(data.eventData) if kind == "xid" else 0,
                             at_s=time.monotonic(), kind=kind)
            self._events.append(event)
            if self._on_event is not None:
                self._on_event(event)

    def stop(self, timeout_s: float | None = None) -> tuple[XidEvent, ...]:
        """Stop listening (after reading what has arrived) and return every event seen
        and not handed out by `take`."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=timeout_s if timeout_s is not None else 5.0)
            if self._thread.is_alive():
                self.error = "the NVML event wait did not return"
        if self._set is not None and (self._thread is None or not self._thread.is_alive()):
            with contextlib.suppress(pynvml.NVMLError):
                pynvml.nvmlEventSetFree(self._set)
            self._set = None
        return tuple(self._events)

    def events(self) -> tuple[XidEvent, ...]:
        return tuple(self._events)

    def register(self, index: int) -> bool:
        """Listen on one more (just opened) device; False when it cannot report events."""
        return self._register(index, self._mask)

    def _register(self, index: int, mask: int) -> bool:
        handle = self._source.handle(index)
        if self._set is None or handle is None:
            self.unsupported.add(index)
            return False
        q = self._source.query(index)
        mask &= q("nvmlDeviceGetSupportedEventTypes", handle) or 0
        if not mask or not q.done("nvmlDeviceRegisterEvents", handle, mask, self._set):
            self.unsupported.add(index)
            return False
        self._by_handle[ctypes.cast(handle, ctypes.c_void_p).value] = index
        return True

    def take(self) -> tuple[XidEvent, ...]:
        """The events that arrived since the last take (one consumer: the sampler), which
        the watcher then forgets: a monitor listens for days, and a GPU that reports clock
        changes can send many (they live on in the snapshots and recordings)."""
        n = len(self._events)  # appended on the watcher's thread, only ever at the end
        new = tuple(self._events[:n])
        del self._events[:n]  # one list operation: an append meanwhile lands after it
        return new
