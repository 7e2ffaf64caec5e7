"""The monitor's feed without Textual: where its sampler comes from (NVML opened before
or after the view is ready, or a sampler fed by hand), what reads it beside the view (the
recorder, the notifier), how frames reach the view (posted from the sampler's thread, or
taken on the view's own), and what is closed at the end. Time is injected: the sampler's
wait records what it was asked to wait and returns at once."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest

from gputui.telemetry.feed import FeedState, MonitorFeed
from gputui.telemetry.frame import Frame
from gputui.telemetry.record import Recorder
from gputui.telemetry.sampler import Sampler
from tests.factories import HandSource, device, gpu, snapshot


class View:
    """What the app is to the feed (feed.FeedView): it keeps what it was handed, and
    notes each posted frame in `timeline` (beside the sampler's waits)."""

    def __init__(self, timeline: list[tuple[str, float]] | None = None) -> None:
        self.posted: list[Frame] = []  # from the sampler's thread
        self.here: list[Frame] = []  # on the view's thread
        self.problems: list[tuple[str, str]] = []
        self.timeline = timeline if timeline is not None else []
        self.first_posted = threading.Event()

    def frame_posted(self, frame: Frame) -> None:
        self.posted.append(frame)
        self.timeline.append(("frame", frame.snapshot.seq))
        self.first_posted.set()

    def frame_here(self, frame: Frame) -> None:
        self.here.append(frame)

    def feed_problem(self, title: str, text: str) -> None:
        self.problems.append((title, text))


class Opener:
    """An opener (feed.Opening) that the test opens by hand: `open(sampler)`."""

    def __init__(self, interval: float) -> None:
        self.interval = interval
        self.ready: Sampler | None = None  # open, not asked for yet
        self.deliver = None
        self.taken_ones: list[Sampler] = []
        self.closed: list[Sampler] = []  # refused by the receiver: the opener closes them
        self.cancelled = False

    def open(self, sampler: Sampler) -> None:
        if self.deliver is None:
            self.ready = sampler
        elif not self.deliver(sampler):
            self.closed.append(sampler)

    def take_if_open(self) -> Sampler | None:
        sampler, self.ready = self.ready, None
        return sampler

    def deliver_to(self, deliver) -> None:  # type: ignore[no-untyped-def]
        self.deliver = deliver
        if self.ready is not None:
            self.open(self.take_if_open())  # type: ignore[arg-type]

    def taken(self, sampler: Sampler) -> None:
        self.taken_ones.append(sampler)

    def cancel(self) -> None:
        self.cancelled = True


class Source(HandSource):
    """One GPU; it remembers whether the detail fields were asked for."""

    def __init__(self) -> None:
        super().__init__((device(0),))
        self.detail_asked: list[bool] = []

    def want_detail_fields(self, on: bool) -> None:
        self.detail_asked.append(on)


def live_sampler(interval: float = 2.0) -> tuple[Sampler, list[tuple[str, float]]]:
    """A sampler over one hand-made GPU whose thread never sleeps: each wait is noted in
    the timeline it returns (the first few return at once; then it waits for its stop)."""
    timeline: list[tuple[str, float]] = []

    def wait(stop: threading.Event, seconds: float) -> bool:
        timeline.append(("wait", seconds))
        if len(timeline) > 6:
            stop.wait(30)
        return stop.is_set()

    return Sampler(interval=interval, source=Source(), wait=wait), timeline


def sampler_threads() -> int:
    return sum(t.name == "gputui-sampler" for t in threading.enumerate())


def test_a_hand_fed_sampler_reaches_the_view_on_its_own_thread(tmp_path: Path) -> None:
    sampler = Sampler(interval=1.0, nvml=None)
    view, notified = View(), []
    recording = tmp_path / "rec.jsonl"
    feed = MonitorFeed(sampler, view, recorder=Recorder(recording), notifier=notified.append)
    assert feed.state is FeedState.HAND_FED and feed.sampler is sampler
    assert feed.first_reading() is None  # its owner feeds it: nothing to read here
    sampler.ingest(snapshot(0, [gpu(0)]))  # before the view is ready: nobody is told
    assert view.here == [] and notified == []
    feed.go()
    for t in (1, 2):
        sampler.ingest(snapshot(t, [gpu(0)]))
    assert [f.snapshot.time for f in view.here] == [snapshot(t, []).time for t in (1, 2)]
    assert view.posted == [] and notified == view.here  # the notifier saw the same frames
    feed.close()
    assert feed.state is FeedState.CLOSED
    sampler.ingest(snapshot(3, [gpu(0)]))  # still its owner's to use, and nobody listens
    assert len(view.here) == 2 and len(notified) == 2
    header, *lines = recording.read_text().splitlines()
    assert "gputui_recording" in json.loads(header) and len(lines) == 2


def test_nvml_open_before_the_view_gives_the_first_reading_then_ticks_an_interval_later(
        ) -> None:
    sampler, timeline = live_sampler(interval=2.0)
    source = sampler.source
    assert isinstance(source, Source)
    opener, view, notified = Opener(interval=2.0), View(timeline), []
    opener.open(sampler)  # NVML opened while the view was being built
    feed = MonitorFeed(opener, view, notifier=notified.append)
    assert feed.state is FeedState.OPENING and feed.interval == 2.0

    first = feed.first_reading()
    assert first is not None and first.snapshot.seq == 1 and len(first.snapshot.gpus) == 1
    assert feed.state is FeedState.FIRST_READ
    assert notified == [first] and view.posted == view.here == []  # the view got it returned

    feed.go()
    assert feed.state is FeedState.LIVE
    assert view.first_posted.wait(30), "the sampler's thread never ticked"
    # Its own first tick one interval after the first reading.
    assert timeline[:2] == [("wait", 2.0), ("frame", 2)] and view.here == []
    threads = sampler_threads()
    feed.close()
    assert feed.state is FeedState.CLOSED and source.closed  # what it opened, it closes
    assert sampler_threads() == threads - 1
    assert feed.first_reading() is None


def test_nvml_open_after_the_view_is_handed_over_and_ticks_at_once() -> None:
    sampler, timeline = live_sampler()
    opener, view = Opener(interval=2.0), View(timeline)
    feed = MonitorFeed(opener, view)
    assert feed.first_reading() is None and feed.state is FeedState.OPENING  # not open yet
    feed.go()
    assert feed.state is FeedState.OPENING and feed.sampler is None
    done = threading.Thread(target=opener.open, args=(sampler,))  # the opener's thread
    done.start()
    done.join(30)
    assert feed.state is FeedState.LIVE and feed.sampler is sampler
    assert opener.taken_ones == [sampler] and opener.closed == []
    assert view.first_posted.wait(30)
    assert timeline[0] == ("frame", 1)  # read at once, no wait before
    threads = sampler_threads()
    feed.close()
    assert opener.cancelled and sampler_threads() == threads - 1


def test_a_sampler_that_opens_after_the_view_quit_is_left_to_the_opener_to_close() -> None:
    sampler, _ = live_sampler()
    opener, view = Opener(interval=2.0), View()
    feed = MonitorFeed(opener, view)
    feed.go()
    feed.quit()
    assert feed.state is FeedState.QUITTING
    threads = sampler_threads()
    opener.open(sampler)
    assert opener.closed == [sampler] and opener.taken_ones == []
    assert feed.sampler is None and sampler_threads() == threads and view.posted == []
    feed.close()
    feed.close()  # twice: nothing more
    assert opener.cancelled and feed.state is FeedState.CLOSED


def test_detail_fields_asked_before_the_sampler_came_are_asked_of_it() -> None:
    sampler, _ = live_sampler()
    source = sampler.source
    assert isinstance(source, Source)
    opener = Opener(interval=2.0)
    feed = MonitorFeed(opener, View())
    feed.want_detail_fields(True)  # the detail screen opened while NVML was opening
    feed.go()
    opener.open(sampler)
    assert source.detail_asked == [True]
    feed.want_detail_fields(False)
    assert source.detail_asked == [True, False]
    feed.close()


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
def test_a_recording_that_stops_is_said_once() -> None:
    sampler = Sampler(interval=1.0, nvml=None)
    view = View()
    feed = MonitorFeed(sampler, view, recorder=Recorder("/dev/full"))  # every write: ENOSPC
    feed.go()
    for t in range(3):
        sampler.ingest(snapshot(t, [gpu(0)]))
    assert len(view.here) == 3  # the monitor goes on
    assert view.problems == [("Recording stopped", "recording to /dev/full stopped after 0 "
                                                   "snapshots: No space left on device")]
    feed.close()


def test_a_hang_up_during_start_up_returns_on_the_same_thread() -> None:
    """SIGHUP's handler runs on the main thread between two bytecodes: here, as the
    sampler starts inside `go()`. The hang-up must return (the process then leaves),
    not wait for what that thread holds."""
    feed: MonitorFeed | None = None
    hung_up: list[bool] = []

    class HangUpAsItStarts(Sampler):
        def start(self, first_in: float | None = None) -> None:  # type: ignore[override]
            assert feed is not None
            done = threading.Event()

            def hang_up() -> None:
                feed.hang_up()
                done.set()
            # On this thread, as a signal handler would; a thread keeps a deadlock
            # from hanging the test run, and the join on this thread is what blocks.
            t = threading.Thread(target=hang_up, daemon=True)
            t.start()
            hung_up.append(done.wait(5.0))

    opener = Opener(1.0)
    feed = MonitorFeed(opener, View())
    opener.open(HangUpAsItStarts(interval=1.0, source=Source()))
    assert feed.first_reading() is not None
    feed.go()
    assert hung_up == [True] and feed.state is FeedState.CLOSED
