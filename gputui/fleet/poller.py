"""Polling many targets: each on its own schedule, so one target never holds up another.

Two ways to drive it. `poll()` is one blocking round over the targets that are due (or
all of them, forced), back within about `timeout` seconds: `fleet --once` uses it.
`start(notify)` gives each target a daemon thread of its own that reads it every
`interval` seconds (backing off while it is down) and calls `notify()` after each change;
the view then takes `snapshot()`, which never waits for the network. A hung host costs
only its own thread: the good host next to it keeps its 2 s refresh. At most
`MAX_IN_FLIGHT` requests run at once (the others wait their turn within their own
timeout), so a long target list cannot flood the machine or starve the screen of the
interpreter; past `ADVICE_PAST_TARGETS` targets, `direct_mode_advice` says Prometheus is
the way.

Every request runs on a daemon thread and ends by its own deadline (which covers
parsing); a request still running when the poller gives up on it is reported as timed
out once, and whatever it returns later is discarded. Daemon threads, not a
ThreadPoolExecutor: its workers are joined when the interpreter exits, so one request
stuck in a host name lookup would keep `fleet --once` (or the TUI after `q`) alive.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from concurrent.futures import Future
from concurrent.futures import wait as wait_futures
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Protocol

from gputui.fleet.errors import ScrapeError
from gputui.fleet.fetch import DEFAULT_TIMEOUT_S
from gputui.fleet.model import (
    HOT_TEMP_C,
    FleetHost,
    FleetSnapshot,
    HostReading,
    HostState,
    problems_first,
)
from gputui.fleet.scrape import scrape
from gputui.fleet.summary import IDLE_BELOW_PCT, IDLE_WINDOW_S, holds_memory, summarize
from gputui.fleet.targets import Target

MAX_BACKOFF_S = 60.0
MAX_IN_FLIGHT = 32  # requests at once
# Past this many targets, reading each host directly is the wrong tool: say so once.
ADVICE_PAST_TARGETS = 50


def direct_mode_advice(targets: int) -> str | None:
    """What the view and `fleet --once` say once when given many targets."""
    if targets <= ADVICE_PAST_TARGETS:
        return None
    return (f"{targets} targets read directly: past {ADVICE_PAST_TARGETS}, let Prometheus "
            "scrape them and point the view at it (--prometheus URL): it does the "
            "aggregating, and the view reads one row per host")
# How long past its deadline a request's own timeout error may take to arrive.
_GRACE_S = 0.2


class Poller(Protocol):
    """What the CLI and the Textual view need from a source of fleet snapshots."""

    def poll(self, force: bool = False) -> FleetSnapshot:
        """One blocking round (not to be mixed with `start`)."""
        ...

    def start(self, notify: Callable[[], object]) -> None:
        """Poll on background threads from now on; `notify()` (on those threads) after news."""
        ...

    def snapshot(self) -> FleetSnapshot | None:
        """What is known now (None: nothing yet); never waits for the network."""
        ...

    def refresh(self) -> None:
        """Ask every host again now (the view's `r`)."""
        ...

    def open(self, target: str | None) -> None:
        """The view shows this host's GPUs from now on (None: the hosts only)."""
        ...

    def close(self) -> None: ...


def backoff_s(failures: int, interval: float, cap: float = MAX_BACKOFF_S) -> float:
    """Wait before retrying a host that failed `failures` times in a row: interval, 2×, 4×…"""
    if failures <= 0:
        return 0.0
    return min(max(cap, interval), interval * 2 ** min(failures - 1, 16))


def run_in_daemon_thread(fn: Callable[..., HostReading], *args: object) -> Future[HostReading]:
    """Run fn(*args) on a new daemon thread; its Future carries the result."""
    fut: Future[HostReading] = Future()

    def run() -> None:
        if not fut.set_running_or_notify_cancel():
            return
        try:
            result = fn(*args)
        except BaseException as exc:  # handed to whoever reads the future
            fut.set_exception(exc)
        else:
            fut.set_result(result)

    threading.Thread(target=run, name="gputui-scrape", daemon=True).start()
    return fut


@dataclass(slots=True)
class _TargetState:
    """One target's schedule and request (mutable; only touched under the poller's lock)."""

    target: Target
    host: FleetHost
    next_at: float = 0.0  # (injected) clock time of the next attempt
    started_at: float = 0.0  # (injected) clock time the last attempt started
    inflight: Future[HostReading] | None = None
    wait_until: float = 0.0  # time.monotonic() after which nobody waits for it any longer
    reported: bool = False  # the in-flight attempt was already reported as timed out
    wake: threading.Event = field(default_factory=threading.Event)
    # Each GPU's utilisation over the last IDLE_WINDOW_S, (clock time, %), by UUID.
    utils: dict[str, deque[tuple[float, float]]] = field(default_factory=dict)

    def note_utils(self, now: float) -> None:
        for g in self.host.gpus:
            if g.util_pct is None:
                continue
            window = self.utils.setdefault(g.uuid or g.gpu, deque())
            window.append((now, g.util_pct))
            while window and window[0][0] < now - IDLE_WINDOW_S:
                window.popleft()

    def idle_held(self) -> int:
        """GPUs that hold memory and were idle over the window (as far as it was read)."""
        n = 0
        for g in self.host.gpus:
            window = self.utils.get(g.uuid or g.gpu)
            if g.lost or g.stale or not window or not holds_memory(g):
                continue
            if sum(u for _, u in window) / len(window) < IDLE_BELOW_PCT:
                n += 1
        return n


class FleetPoller:
    def __init__(self, targets: Iterable[Target], *, interval: float = 2.0,
                 timeout: float = DEFAULT_TIMEOUT_S, hot_temp_c: float = HOT_TEMP_C,
                 clock: Callable[[], float] = time.monotonic,
                 scrape_fn: Callable[[Target, float], HostReading] = scrape,
                 max_in_flight: int = MAX_IN_FLIGHT) -> None:
        self.interval = interval
        self.timeout = timeout
        self.hot_temp_c = hot_temp_c
        self._clock = clock
        self._scrape = scrape_fn
        self.max_in_flight = max_in_flight
        self._slots = threading.BoundedSemaphore(max_in_flight)
        self._states = [_TargetState(t, FleetHost(target=t.name, url=t.url)) for t in targets]
        # Guards the states; held only to read or change them, never across a request.
        self._lock = threading.Lock()
        self._stop = threading.Event()

    # --- one round ---------------------------------------------------------------------

    def poll(self, force: bool = False) -> FleetSnapshot:
        with self._lock:
            now = self._clock()
            for st in self._states:
                self._begin(st, now, force)
            # Wait for the requests started now; one already reported as timed out (a
            # lookup that hangs) does not hold up the others any longer.
            waiting = [st for st in self._states if st.inflight is not None and not st.reported]
            futures = [st.inflight for st in waiting if st.inflight is not None]
            until = max((st.wait_until for st in waiting), default=0.0)
        if futures:
            wait_futures(futures, timeout=max(0.0, until - time.monotonic()))
        with self._lock:
            now = self._clock()
            for st in self._states:
                self._collect(st, now, give_up=True)
            return self._snapshot(now)

    # --- live: one thread per target -----------------------------------------------------

    def start(self, notify: Callable[[], object]) -> None:
        for st in self._states:
            threading.Thread(target=self._run, args=(st, notify), daemon=True,
                             name=f"gputui-fleet {st.target.name}").start()

    def _run(self, st: _TargetState, notify: Callable[[], object]) -> None:
        force = True  # the first read at once
        while not self._stop.is_set():
            with self._lock:
                self._begin(st, self._clock(), force)
                fut, until, reported = st.inflight, st.wait_until, st.reported
            force = False
            if fut is not None and not reported:
                wait_futures([fut], timeout=max(0.0, until - time.monotonic()))
            with self._lock:
                changed = self._collect(st, self._clock(),
                                        give_up=time.monotonic() >= st.wait_until)
                delay = st.next_at - self._clock()
                fut = st.inflight
            if changed:
                notify()
            if fut is not None:
                # A request that outlived its deadline: no second one beside it. It ends by
                # its own deadline; its answer will be discarded.
                wait_futures([fut], timeout=max(0.05, delay))
            elif st.wake.wait(max(0.0, delay)):  # refresh() or close()
                st.wake.clear()
                force = True

    def snapshot(self) -> FleetSnapshot:
        with self._lock:
            return self._snapshot(self._clock())

    def refresh(self) -> None:
        for st in self._states:
            st.wake.set()

    def open(self, target: str | None) -> None:
        pass  # every host's GPUs are read anyway

    def close(self) -> None:
        self._stop.set()
        for st in self._states:
            st.wake.set()
        # Requests still running are on daemon threads and end by their deadline.

    # --- state changes (under the lock) --------------------------------------------------

    def _begin(self, st: _TargetState, now: float, force: bool) -> None:
        if st.inflight is None and (force or st.next_at <= now):
            st.inflight = run_in_daemon_thread(self._scrape_in_turn, st.target, self.timeout)
            st.started_at = now
            st.wait_until = time.monotonic() + self.timeout + _GRACE_S
            st.reported = False

    def _scrape_in_turn(self, target: Target, timeout: float) -> HostReading:
        """Scrape once one of the `max_in_flight` slots is free, within `timeout` in all."""
        started = time.monotonic()
        if not self._slots.acquire(timeout=timeout):
            raise ScrapeError(f"timed out: {self.max_in_flight} other reads were in flight "
                              f"for {timeout:g} s", down=True)
        try:
            return self._scrape(target, max(0.001, timeout - (time.monotonic() - started)))
        finally:
            self._slots.release()

    def _collect(self, st: _TargetState, now: float, *, give_up: bool) -> bool:
        """Take the finished request's outcome into the host's state; True if it changed."""
        fut = st.inflight
        if fut is None:
            return False
        if not fut.done():
            if give_up and (not st.reported or now >= st.next_at):
                self._failed(st, ScrapeError(f"timed out: no complete answer within "
                                             f"{self.timeout:g} s", down=True), now)
                st.reported = True
                return True
            return False
        st.inflight = None
        reported, st.reported = st.reported, False
        if reported:
            return False  # late: counted as timed out already; its answer is discarded
        try:
            reading = fut.result()
        except ScrapeError as exc:
            self._failed(st, exc, now)
        except Exception as exc:  # a bug in parsing one page stays with that host
            self._failed(st, ScrapeError(f"{type(exc).__name__}: {exc}", down=False), now)
        else:
            st.host = FleetHost(target=st.target.name, url=st.target.url, state=HostState.UP,
                                reading=reading, last_seen=datetime.now(UTC),
                                reads=st.host.reads + 1)
            st.note_utils(now)
            st.next_at = st.started_at + self.interval
        return True

    def _failed(self, st: _TargetState, exc: ScrapeError, now: float) -> None:
        failures = st.host.failures + 1
        if exc.down:
            wait = backoff_s(failures, self.interval)
            st.next_at = now + wait
            state = HostState.DOWN
        else:
            # It answers: ask again at the next interval, no need to back off.
            st.next_at = st.started_at + self.interval
            state = HostState.ERROR
        last = st.host.reading
        st.host = FleetHost(target=st.target.name, url=st.target.url, state=state,
                            # No readings, but the name it last gave itself stays.
                            reading=HostReading(hostname=last.hostname, exporter=last.exporter),
                            error=str(exc), last_seen=st.host.last_seen, failures=failures,
                            retry_in_s=wait if exc.down else None, reads=st.host.reads)

    def _snapshot(self, now: float) -> FleetSnapshot:
        hosts = []
        summaries = []
        for st in self._states:
            h = st.host
            if h.state is HostState.DOWN and st.inflight is None:
                h = replace(h, retry_in_s=max(0.0, st.next_at - now))
            hosts.append(h)
            summaries.append(summarize(h, self.hot_temp_c, idle_held=st.idle_held()))
        return FleetSnapshot(time=datetime.now(UTC), source="targets", hosts=tuple(hosts),
                             hot_temp_c=self.hot_temp_c,
                             summaries=tuple(problems_first(summaries)))
