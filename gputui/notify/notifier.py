"""The Notifier: a frame listener that hands events to sinks without ever waiting for them.

Subscribed to the sampler's frames (`sampler.subscribe_frames(notifier)`), it turns each
frame into events on the sampler's thread (bookkeeping only) and puts them on each
sink's own bounded queue; each sink has its own worker thread, so a webhook that never
answers delays nothing: not a tick, not a redraw, not a `watch` row, not another sink.
An event that could not be delivered (failed after its retries, or no room left in the
queue, or still waiting when gputui exits) is counted, and said in one line: when a sink
starts failing, and in the summary at the end.
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

    def __init__(self, sink: Sink, report: Report, queue_size: int) -> None:
        self.sink = sink
        self._report = report
        self._queue: queue.Queue[Event | None] = queue.Queue(queue_size)
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self.delivered = self.failed = self.dropped = 0
        self.last_error: str | None = None
        self._failing = False  # the last delivery failed (said once, until one succeeds)
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
                first = not self._failing
                self._failing = True
                self.last_error = "queue full (the sink is not keeping up)"
            if first:
                self._say(f"{self.sink.name}: queue full, events are counted as not "
                          "delivered")

    def _run(self) -> None:
        while True:
            event = self._queue.get()
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
                return  # already counted as not delivered when the notifier closed
            self._in_flight = False
            if error is None:
                self.delivered += 1
                self._failing = False
                return
            self.failed += 1
            self.last_error = error
            first = not self._failing
            self._failing = True
        if first:
            self._say(f"{self.sink.name}: event not delivered ({error}); further failures "
                      "are counted")

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

    def stats(self) -> SinkStats:
        with self._lock:
            return SinkStats(self.sink.name, self.delivered, self.failed, self.dropped,
                             self.last_error)


class Notifier:
    """Frames in (call it with each Frame), events out to every sink."""

    def __init__(self, tracker: EventTracker, sinks: Sequence[Sink] = (), *,
                 report: Report | None = None, queue_size: int = QUEUE_SIZE) -> None:
        self.tracker = tracker
        self._report: Report = report or (lambda line: None)
        self._queue_size = queue_size
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
        ch = _Channel(sink, lambda line: self._report(line), self._queue_size)
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
        """Let queued events go out for up to `drain_s`, then stop; returns the counts."""
        self._closed = True
        if self._started:
            self.wait_idle(drain_s)
        for ch in self._channels:
            ch.stop()
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
