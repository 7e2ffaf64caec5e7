"""Messages between background threads, the app and its screens/widgets."""

from __future__ import annotations

from textual.message import Message

from gputui.telemetry.frame import Frame
from gputui.telemetry.history import TickBuckets
from gputui.telemetry.model import Snapshot


class FrameReady(Message):
    """Posted by the sampler thread (never blocking on the UI): frames wait to be taken
    in (the app's queue of them; one such message waits at a time)."""


class SnapshotShown(Message):
    """Posted to a screen other than the main one after the app took in a frame, so
    screens that show live data (alerts, benchmarks) can refresh themselves from it;
    with the view's history buckets and window for screens that draw sparklines."""

    def __init__(self, snapshot: Snapshot, frame: Frame | None = None,
                 history: TickBuckets | None = None, window_s: float = 300.0) -> None:
        super().__init__()
        self.snapshot = snapshot
        self.frame = frame
        self.history = history
        self.window_s = window_s


class MonitorReady(Message):
    """The monitor screen's widgets exist: the app may start feeding them."""


class FramesTaken(Message):
    """Frames were taken on the event loop (a hand-fed sampler: a replay, tests): draw the
    newest. Queued back to back, these merge into one draw (Textual drops a message that
    `can_replace` says the next one replaces), however many frames came at once."""

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, FramesTaken)


class DetailFieldsWanted(Message):
    """A screen that shows the GPU detail fields (energy, in-tick min/max, PCIe
    throughput, per-link NVLink rates) opened (`on`) or closed: the app has the sampler
    read them only meanwhile."""

    def __init__(self, on: bool) -> None:
        super().__init__()
        self.on = on
