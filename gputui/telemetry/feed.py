"""The monitor's feed: where its sampler comes from, what else reads it, and how each frame
reaches the view. No Textual: the view is anything with the three methods of `FeedView`.

A feed is made over one of two things, and that decides who owns the sampler:

- an opener (`SamplerOpener`: NVML opening on a thread since the command started): the
  sampler is the feed's; it ticks on its own thread and is closed with the feed;
- a sampler its owner feeds on the view's thread (a replay's player, a test's `ingest`):
  never started, never closed here.

Either way the feed subscribes the recorder (every snapshot, on the sampler's thread),
the notifier (every frame) and the view, and turns the alert rules on. Training jobs come
in the snapshots (`Snapshot.jobs`, `Frame.jobs`): nothing of the feed's own.

One state at a time (`FeedState`):

    OPENING ── first_reading(): NVML open already ──▶ FIRST_READ ── go() ──▶ LIVE
       └──── go(): the opener hands the sampler over once it is open ─────────┘
    HAND_FED (go() subscribes the view; frames come on the view's thread)
    any ── quit() ──▶ QUITTING ── close() ──▶ CLOSED

Only LIVE and HAND_FED deliver frames: LIVE ones come on the sampler's thread and go to
`FeedView.frame_posted` (which must not wait), HAND_FED ones to `FeedView.frame_here`.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from enum import Enum
from typing import TYPE_CHECKING, Protocol

from gputui.telemetry.frame import Frame
from gputui.telemetry.sampler import FrameListener, Sampler

if TYPE_CHECKING:
    from gputui.telemetry.model import Snapshot
    from gputui.telemetry.record import Recorder


class FeedState(Enum):
    OPENING = "opening"  # no sampler yet: NVML is opening
    FIRST_READ = "first read"  # the first reading taken here; the sampler's thread not yet
    LIVE = "live"  # the sampler ticks on its own thread
    HAND_FED = "hand-fed"  # its owner feeds the sampler on the view's thread
    QUITTING = "quitting"  # the view is going: no frames; a sampler handed over is closed
    CLOSED = "closed"  # what the feed opened is closed, the recording ended


class FeedView(Protocol):
    """Where the feed delivers."""

    def frame_posted(self, frame: Frame) -> None:
        """A frame, on the sampler's thread: hand it to the view's thread, never waiting."""

    def frame_here(self, frame: Frame) -> None:
        """A frame, on the view's own thread (a hand-fed sampler): take it now."""

    def feed_problem(self, title: str, text: str) -> None:
        """Something the user must know (the recording stopped); any thread."""


class Opening(Protocol):
    """What the feed needs of an opener (`gputui.telemetry.sampler_opener.SamplerOpener`)."""

    interval: float

    def take_if_open(self) -> Sampler | None: ...

    def deliver_to(self, deliver: Callable[[Sampler], bool]) -> None: ...

    def taken(self, sampler: Sampler) -> None: ...

    def cancel(self) -> None: ...



class MonitorFeed:
    def __init__(self, supply: Opening | Sampler, view: FeedView, *,
                 recorder: Recorder | None = None, notifier: FrameListener | None = None) -> None:
        """`supply`: an opener (the feed owns what it opens) or a hand-fed sampler."""
        self.view = view
        self.recorder = recorder
        self.notifier = notifier
        self._lock = threading.Lock()  # state and sampler: the opener's thread hands over
        self._opener: Opening | None
        self._sampler: Sampler | None
        if isinstance(supply, Sampler):
            self._opener, self._sampler, self.state = None, supply, FeedState.HAND_FED
        else:
            self._opener, self._sampler, self.state = supply, None, FeedState.OPENING
        self._detail_fields = False  # a screen showing them is open: asked of every sampler
        self._first_in = 0.0  # FIRST_READ: when the sampler's own first tick is due

    @property
    def sampler(self) -> Sampler | None:
        """The sampler once there is one: what the app hands its benchmark runs."""
        return self._sampler

    @property
    def interval(self) -> float:
        """The interval the readings come at (a replay's: the recording's)."""
        sampler = self._sampler
        if sampler is not None:
            return sampler.interval
        assert self._opener is not None
        return self._opener.interval

    def first_reading(self) -> Frame | None:
        """If NVML is open already, take the sampler and read it once, here on the
        caller's thread (~10 ms for 4 GPUs; a hung GPU costs its read deadline), so the
        view's first paint can show the GPUs. The recorder and the notifier see this
        reading as any other; the view gets it as the return value. None: not open yet
        (or no reading came), and the view waits for `go()`'s frames."""
        if self.state is not FeedState.OPENING:
            return None
        assert self._opener is not None
        sampler = self._opener.take_if_open()
        if sampler is None:
            return None
        with self._lock:
            self._sampler = sampler
            self._subscribe(sampler)
            self.state = FeedState.FIRST_READ
        first: list[Frame] = []
        sampler.subscribe_frames(first.append)
        try:
            sampler.tick()
        except Exception:  # as on the sampler's thread: logged, and the next tick is due
            logging.getLogger("gputui").exception("sampler tick failed")
        sampler.unsubscribe_frames(first.append)
        # The sampler's own ticks start an interval after this reading (at once if none).
        self._first_in = sampler.interval if first else 0.0
        return first[0] if first else None

    def go(self) -> None:
        """The view is ready for frames: start the sampler, or have it handed over once it
        is open (at once, on this thread, if it is open already), or subscribe the view to
        the sampler its owner feeds."""
        with self._lock:
            state = self.state
            if state is FeedState.HAND_FED:
                assert self._sampler is not None
                self._subscribe(self._sampler)
            elif state is FeedState.FIRST_READ:
                assert self._sampler is not None
                self.state = FeedState.LIVE
                self._sampler.start(first_in=self._first_in)
        if state is FeedState.OPENING:
            assert self._opener is not None
            self._opener.deliver_to(self._handed)  # may call back at once: not under the lock

    def _handed(self, sampler: Sampler) -> bool:
        """The opener's hand-over, on its thread (or the view's, if NVML opened first).
        False: the view is gone, and the opener closes the sampler."""
        assert self._opener is not None
        with self._lock:
            if self.state is not FeedState.OPENING:
                return False
            self._opener.taken(sampler)  # the feed's to close from now on
            self._sampler = sampler
            self._subscribe(sampler)
            self.state = FeedState.LIVE
            sampler.start()  # its first tick at once
        return True

    def _subscribe(self, sampler: Sampler) -> None:
        """Everything that reads the sampler (under the lock)."""
        if self.recorder is not None:
            sampler.subscribe(self._record)  # written and flushed on the sampler's thread
        sampler.enable_alerts()
        if self._detail_fields:
            sampler.want_detail_fields(True)
        if self.notifier is not None:
            sampler.subscribe_frames(self.notifier)
        sampler.subscribe_frames(self._deliver)

    def _deliver(self, frame: Frame) -> None:
        # The state is read without the lock: a frame that races quit() is dropped by the
        # view as it closes, as any frame already posted is.
        state = self.state
        if state is FeedState.LIVE:
            self.view.frame_posted(frame)
        elif state is FeedState.HAND_FED:
            self.view.frame_here(frame)

    def _record(self, snap: Snapshot) -> None:
        recorder = self.recorder
        assert recorder is not None
        failed_before = recorder.error is not None
        recorder.write(snap)
        if recorder.error is not None and not failed_before:  # said once: it stops there
            self.view.feed_problem("Recording stopped", recorder.error)

    def want_detail_fields(self, on: bool) -> None:
        """A screen that shows the detail fields opened (or closed): the sampler reads
        them meanwhile, also one handed over later."""
        with self._lock:
            self._detail_fields = on
            if self._sampler is not None:
                self._sampler.want_detail_fields(on)

    def quit(self) -> None:
        """The view is going: no more frames, and a sampler handed over from now on is
        closed by the opener. Never waits."""
        with self._lock:
            if self.state is not FeedState.CLOSED:
                self.state = FeedState.QUITTING

    def close(self) -> None:
        """Close what the feed opened (a sampler nobody took yet included) and end the
        recording; a hand-fed sampler is only unsubscribed. Off the view's thread: a tick
        in flight is waited for (at most its read deadline). Closing twice does nothing."""
        with self._lock:
            if self.state is FeedState.CLOSED:
                return
            self.state = FeedState.CLOSED
            sampler = self._sampler
        if self._opener is not None:
            self._opener.cancel()  # opened (or opening) but never taken: closed there
        if sampler is not None:
            sampler.unsubscribe_frames(self._deliver)
            if self.notifier is not None:
                sampler.unsubscribe_frames(self.notifier)
            if self.recorder is not None:
                sampler.unsubscribe(self._record)
            if self._opener is not None:
                sampler.close()  # never blocks on a hung driver call
        if self.recorder is not None:
            self.recorder.close()

    def hang_up(self) -> None:
        """The terminal is gone and the process leaves at once: stop the sampler (within
        0.5 s) and end the recording; nothing else is waited for.

        No lock: this runs from SIGHUP's handler, which Python runs on the main thread
        between two bytecodes — possibly inside `go()` or `close()` with the lock held —
        and from the terminal watcher while the main thread may hold it, stuck. (With the
        lock, a hang-up during start-up deadlocked and left the process spinning.)"""
        self.state = FeedState.CLOSED
        sampler = self._sampler
        if sampler is not None:
            sampler.stop(timeout=0.5)
        if self.recorder is not None:
            self.recorder.close()  # every line was flushed as written; this ends it
