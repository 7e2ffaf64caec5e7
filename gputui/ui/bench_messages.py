"""Messages that carry benchmark runs to the UI. The runner's threads post them (never
blocking on a redraw); the app hands them to its BenchSession on the event loop, and the
session tells the screens that show it with BenchChanged."""

from __future__ import annotations

from datetime import datetime

from textual.message import Message

from gputui.bench import events
from gputui.bench.attribution import ThroughputPoint
from gputui.bench.run_queue import Finished


class RunEvent(Message):
    """One worker event of run `run_id`, with the progress window it closed (if any),
    stamped when the runner received it."""

    def __init__(self, run_id: str, event: events.Event, point: ThroughputPoint | None) -> None:
        super().__init__()
        self.run_id = run_id
        self.event = event
        self.point = point


class RunFinished(Message):
    """Run `finished.planned.id` has its final result, saved (or deliberately not)."""

    def __init__(self, finished: Finished, ended: datetime) -> None:
        super().__init__()
        self.finished = finished
        self.ended = ended


class BenchChanged(Message):
    """The session changed: `what` is "queue", "start", "live" or "done"."""

    def __init__(self, what: str) -> None:
        super().__init__()
        self.what = what
