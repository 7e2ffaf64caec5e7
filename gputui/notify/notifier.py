"""The Notifier: a frame listener that hands events to sinks without ever waiting for them.

Subscribed to the sampler's frames (`sampler.subscribe_frames(notifier)`), it turns each
frame into events on the sampler's thread (bookkeeping only) and puts them on each
sink's own bounded queue; each sink has its own worker thread, so a webhook that never
answers delays nothing: not a tick, not a redraw, not a `watch` row, not another sink.
An event that could not be delivered (failed after its retries, or no room left in the
queue, or still waiting when gputui exits) is counted, and said in one line while gputui
runs: at once for a sink's first failure, then at most once a minute per sink, each line
with the number not delivered since the last one (a dead webhook is not a line per
event); and in the summary at the end. Closing the notifier ends what its sinks started
(a webhook's connection, a command's process group) before it returns.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from gputui.notify.events import Event, EventTracker
from gputui.notify.sinks import DeliveryError, Sink
from gputui.telemetry.frame import Frame

QUEUE_SIZE = 100  # events waiting per sink; beyond that they are counted as dropped
DRAIN_S = 3.0  # how long `close` lets queued events go out before giving up on them
REPORT_EVERY_S = 60.0  # a sink's failure lines: the first at once, then at most this often
# How long `close` waits for the sinks to end what they started (a command's group gets
# SIGTERM, then SIGKILL after GROUP_GRACE_S): a hung name lookup must not hold the exit.
STOP_WAIT_S = 3.0

Report = Callable[[str], None]


@dataclass(frozen=True, slots=True)
class SinkStats:
    name: str
    delivered: int
    failed: int  # gave up on after the retries
    dropped: int  # no room in the queue, or still queued at close
    last_error: str | None

    @property
    def undelivered(self) -> int:
        return self.failed + self.dropped


class _Channel:
    """One sink, its queue and its worker thread."""

    def __init__(self, sink: Sink, report: Report, queue_size: int, *,
                 report_every_s: float, clock: Callable[[], float]) -> None:
        self.sink = sink
        self._report = report
        self._queue: queue.Queue[Event | None] = queue.Queue(queue_size)
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self.delivered = self.failed = self.dropped = 0
        self.last_error: str | None = None
        self._every_s = report_every_s
        self._clock = clock
        self._said_at: float | None = None  # when the last failure line was said
        self._unsaid = 0  # events not delivered since that line
        self._in_flight = False
        self._thread = threading.Thread(target=self._run, name=f"gputui-notify-{sink.name}",
                                        daemon=True)

    def start(self) -> None:
        self._thread.start()

    def put(self, event: Event) -> None:
        try:
            self._queue.put_nowait(event)
        except queue.Full:
            with self._lock:
                self.dropped += 1
                line = self._undelivered("queue full, the sink is not keeping up")
            if line:
                self._say(line)

    def _run(self) -> None:
        while True:
            try:
                event = self._queue.get(timeout=self._next_line_in())
            except queue.Empty:  # failures not said yet, and a line is due
                self._say_unsaid()
                continue
            if event is None or self._stop.is_set():
                self._queue.task_done()
                return
            with self._lock:
                self._in_flight = True
            try:
                self.sink.send(event, self._stop)
            except DeliveryError as exc:
                self._done(str(exc))
            except Exception as exc:  # a sink's bug must not end the worker
                logging.getLogger("gputui").exception("notification sink failed")
                self._done(type(exc).__name__)
            else:
                self._done(None)
            finally:
                self._queue.task_done()

    def _done(self, error: str | None) -> None:
        with self._lock:
            if self._stop.is_set():
                # Counted as not delivered when the notifier closed; a send that still
                # succeeded (a command whose shell had exited) is delivered after all.
                if error is None and self._in_flight:
                    self.dropped -= 1
                    self.delivered += 1
                self._in_flight = False
                return
            self._in_flight = False
            if error is None:
                self.delivered += 1
                return
            self.failed += 1
            line = self._undelivered(error)
        if line:
            self._say(line)

    def _undelivered(self, why: str) -> str | None:
        """Count one event not delivered (the lock held); the line to say now, if one is
        due: the sink's first failure at once, then at most one line per interval."""
        self.last_error = why
        self._unsaid += 1
        said = self._said_at
        if said is not None and self._clock() - said < self._every_s:
            return None
        return self._line(first=said is None)

    def _line(self, first: bool) -> str:
        n, self._unsaid, self._said_at = self._unsaid, 0, self._clock()
        what = "event" if n == 1 else f"{n} events"
        line = f"{self.sink.name}: {what} not delivered ({self.last_error})"
        if first:
            line += f"; further failures are said at most once every {self._every_s:g} s"
        return line

    def _next_line_in(self) -> float | None:
        """How long the worker may wait for an event before failures not yet said are
        due (None: nothing to say)."""
        with self._lock:
            if not self._unsaid or self._said_at is None:
                return None
            return max(0.0, self._said_at + self._every_s - self._clock())

    def _say_unsaid(self) -> None:
        with self._lock:
            said = self._said_at
            due = self._unsaid > 0 and said is not None and self._clock() - said >= self._every_s
            line = self._line(first=False) if due else None
        if line:
            self._say(line)

    def _say(self, line: str) -> None:
        try:
            self._report(line)
        except Exception:
            logging.getLogger("gputui").exception("notification report failed")

    def idle(self) -> bool:
        return self._queue.unfinished_tasks == 0

    def stop(self) -> None:
        """Give up on what is still queued or being sent (counted as dropped) and end the
        worker."""
        with self._lock:
            self._stop.set()
            left = 1 if self._in_flight else 0
        while True:
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                break
            if item is not None:
                left += 1
            self._queue.task_done()
        with self._lock:
            self.dropped += left
            if left and self.last_error is None:
                self.last_error = "still being sent at exit"
        try:
            self._queue.put_nowait(None)
        except queue.Full:
            pass

    def join(self, timeout_s: float) -> None:
        """Wait (up to `timeout_s`) for the worker to end what its sink started."""
        if self._thread.is_alive():
            self._thread.join(max(0.0, timeout_s))

    def stats(self) -> SinkStats:
        with self._lock:
            return SinkStats(self.sink.name, self.delivered, self.failed, self.dropped,
                             self.last_error)


class Notifier:
    """Frames in (call it with each Frame), events out to every sink."""

    def __init__(self, tracker: EventTracker, sinks: Sequence[Sink] = (), *,
                 report: Report | None = None, queue_size: int = QUEUE_SIZE,
                 report_every_s: float = REPORT_EVERY_S,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.tracker = tracker
        self._report: Report = report or (lambda line: None)
        self._queue_size = queue_size
        self._report_every_s = report_every_s
        self._clock = clock
        self._channels: list[_Channel] = []
        self._lock = threading.Lock()
        self._started = False
        self._closed = False
        self.sent = 0  # events handed to the sinks
        for sink in sinks:
            self.add_sink(sink)

    def set_report(self, report: Report) -> None:
        """Where the one-line failure reports go (the TUI shows them as toasts)."""
        self._report = report  # the channels call it through this notifier

    def add_sink(self, sink: Sink) -> None:
        ch = _Channel(sink, lambda line: self._report(line), self._queue_size,
                      report_every_s=self._report_every_s, clock=self._clock)
        with self._lock:
            self._channels.append(ch)
            if self._started:
                ch.start()

    @property
    def sinks(self) -> list[Sink]:
        return [ch.sink for ch in self._channels]

    def start(self) -> None:
        with self._lock:
            if self._started:
                return
            self._started = True
            for ch in self._channels:
                ch.start()

    def __call__(self, frame: Frame) -> None:
        """A frame listener: called on the sampler's thread, never blocks."""
        events = self.tracker.update(frame)
        if events:
            self.publish(events)

    def publish(self, events: Sequence[Event]) -> None:
        if self._closed:
            return
        self.start()
        for event in events:
            self.sent += 1
            for ch in self._channels:
                ch.put(event)

    def wait_idle(self, timeout_s: float) -> bool:
        """Wait (up to `timeout_s`) until every queued event was delivered or given up."""
        deadline = time.monotonic() + timeout_s
        while not all(ch.idle() for ch in self._channels):
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.02)
        return True

    def close(self, drain_s: float = DRAIN_S) -> list[SinkStats]:
        """Let queued events go out for up to `drain_s`, then stop: what a sink is still
        doing is given up (counted) and ended — a webhook's connection closed, a command's
        process group sent SIGTERM, then SIGKILL — before this returns. Returns the
        counts."""
        self._closed = True
        if self._started:
            self.wait_idle(drain_s)
        for ch in self._channels:
            ch.stop()
        end = time.monotonic() + STOP_WAIT_S
        for ch in self._channels:
            ch.join(end - time.monotonic())
        return self.stats()

    def stats(self) -> list[SinkStats]:
        return [ch.stats() for ch in self._channels]


def summary_lines(stats: Sequence[SinkStats], sent: int) -> list[str]:
    """One line per sink that did not deliver everything (none when all went out)."""
    lines = []
    for s in stats:
        if s.undelivered:
            why = f" (last error: {s.last_error})" if s.last_error else ""
            lines.append(f"notify: {s.name}: {s.undelivered} of {sent} event"
                         f"{'s' if sent != 1 else ''} not delivered{why}")
    return lines
