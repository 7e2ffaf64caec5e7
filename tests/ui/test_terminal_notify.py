"""Notifications through the monitor: the terminal's bell and desktop notification
(OSC 9 / OSC 777, wrapped for tmux), and the app feeding its notifier live frames."""

from __future__ import annotations

import threading

from gputui.notify.events import Event, EventTracker
from gputui.notify.notifier import Notifier
from gputui.notify.sinks import DeliveryError
from gputui.telemetry.sampler import Sampler
from gputui.ui.app import GputuiApp
from gputui.ui.options import AppOptions
from gputui.ui.terminal_notify import TerminalSink, notification_sequence, uses_osc777
from tests.ui.helpers import T0, feed, gpu, snap, spy_notifications, throttled

EVENT = Event(event="started", kind="throttle", gpu=0, uuid="GPU-0", host="trainbox",
              time=T0, started=T0, text="GPU 0: HW thermal slowdown, SM clock 1980→945 MHz")


def test_osc9_and_osc777() -> None:
    assert notification_sequence("gputui trainbox: throttle", "GPU 0: hot", osc777=False,
                                 tmux=False) == "\x1b]9;gputui trainbox: throttle: GPU 0: hot\x07"
    assert notification_sequence("gputui a;b", "GPU 0: hot; slow", osc777=True,
                                 tmux=False) == "\x1b]777;notify;gputui a,b;GPU 0: hot; slow\x07"


def test_inside_tmux_it_is_wrapped_for_passthrough() -> None:
    seq = notification_sequence("t", "b", osc777=False, tmux=True)
    assert seq == "\x1bPtmux;\x1b\x1b]9;t: b\x07\x1b\\"


def test_text_cannot_end_the_sequence_early() -> None:
    # A device or process name is driver/user text: an ESC or BEL in it would let the
    # rest reach the terminal as commands.
    seq = notification_sequence("t", "GPU 0: \x1b]0;owned\x07\x9b31m", osc777=False, tmux=False)
    assert seq.count("\x1b") == 1 and seq.count("\x07") == 1 and "\x9b" not in seq
    assert seq.endswith("GPU 0:  ]0;owned  31m\x07")


def test_which_terminals_get_osc777() -> None:
    assert uses_osc777({"TERM": "foot"}) and uses_osc777({"TERM": "rxvt-unicode-256color"})
    assert uses_osc777({"TERM": "xterm-256color", "VTE_VERSION": "7600"})
    assert not uses_osc777({"TERM": "xterm-256color"})
    assert not uses_osc777({"TERM": "tmux-256color"})


class FakeDriver:
    def __init__(self) -> None:
        self.written: list[str] = []

    def write(self, data: str) -> None:
        self.written.append(data)


class FakeApp:
    is_headless = False
    is_running = True

    def __init__(self) -> None:
        self._driver = FakeDriver()
        self.bells = 0

    def bell(self) -> None:
        self.bells += 1


def test_the_sink_writes_through_the_apps_terminal_and_rings() -> None:
    app = FakeApp()
    TerminalSink(app, env={"TERM": "xterm-256color", "TMUX": "/tmp/tmux-0/default,1,0"}).send(
        EVENT, threading.Event())
    assert app._driver.written == [
        "\x1bPtmux;\x1b\x1b]9;gputui trainbox: throttle: GPU 0: HW thermal slowdown, SM clock "
        "1980→945 MHz\x07\x1b\\"]
    assert app.bells == 1


class Recording:
    def __init__(self, fail: bool = False) -> None:
        self.name = "failing" if fail else "recording"
        self.fail = fail
        self.events: list[Event] = []

    def send(self, event: Event, stop: threading.Event) -> None:
        if self.fail:
            raise DeliveryError("exit status 1")
        self.events.append(event)


async def test_the_monitor_feeds_its_notifier_and_toasts_a_failure() -> None:
    sink, broken = Recording(), Recording(fail=True)
    notifier = Notifier(EventTracker(), [sink, broken])
    sampler = Sampler(interval=1.0, nvml=None)
    app = GputuiApp(AppOptions(notifier=notifier, notify_terminal=True), sampler=sampler)
    async with app.run_test(size=(100, 30)) as pilot:
        seen = spy_notifications(app)
        assert [s.name for s in notifier.sinks] == ["recording", "failing", "terminal"]
        feed(sampler, 0, 2, lambda t: snap(t, [gpu(0, t), gpu(1, t)]))
        feed(sampler, 2, 6, lambda t: snap(t, [throttled(0, t), gpu(1, t)]))
        feed(sampler, 6, 8, lambda t: snap(t, [gpu(0, t), gpu(1, t)]))
        assert notifier.wait_idle(30)
        await pilot.pause()
        # 88 °C is past the slowdown temperature too: a temperature event beside it.
        assert sorted((e.kind, e.event, e.gpu) for e in sink.events) == [
            ("temperature", "ended", 0), ("temperature", "started", 0),
            ("throttle", "ended", 0), ("throttle", "started", 0)]
        assert ("warning", "failing: event not delivered (exit status 1); further failures "
                "are said at most once every 60 s") in seen
    notifier.close(0)
