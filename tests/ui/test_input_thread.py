"""The terminal driver's input thread (textual_adapter.QuietInputDriver): asleep until
there is input, a lone ESC still reported, and awake at once when the app leaves."""

from __future__ import annotations

import os
import selectors
import signal
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import pytest
from textual import constants, events
from textual.app import App
from textual.message import Message

from gputui.ui.textual_adapter import QuietInputDriver


def _until(done: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + 10
    while not done():
        assert time.monotonic() < deadline, what
        time.sleep(0.01)


@contextmanager
def quiet_driver() -> Iterator[QuietInputDriver]:
    handlers = {s: signal.getsignal(s) for s in (signal.SIGTSTP, signal.SIGCONT)}
    made = QuietInputDriver(App())  # (puts its own ctrl+z handlers in place)
    try:
        yield made
    finally:
        made.close()
        for sig, handler in handlers.items():
            signal.signal(sig, handler)


async def test_input_thread_sleeps_until_a_key_and_reports_a_lone_escape(
        monkeypatch: pytest.MonkeyPatch) -> None:
    with quiet_driver() as driver:
        _type_into(driver, monkeypatch)


def _type_into(driver: QuietInputDriver, monkeypatch: pytest.MonkeyPatch) -> None:
    keyboard, typing = os.pipe()
    driver.fileno = keyboard
    got: list[Message] = []
    monkeypatch.setattr(driver, "process_message", got.append)
    timeouts: list[float | None] = []
    select = selectors.SelectSelector.select

    def watched(self: selectors.SelectSelector,
                timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        timeouts.append(timeout)
        return select(self, timeout)

    monkeypatch.setattr(selectors.SelectSelector, "select", watched)
    thread = threading.Thread(target=driver.run_input_thread)
    thread.start()
    try:
        _until(lambda: timeouts == [None], "the thread waits for input with no timeout")
        os.write(typing, b"\x1b")
        _until(lambda: [m.key for m in got if isinstance(m, events.Key)] == ["escape"],
               "a lone ESC is reported as the escape key")
        _until(lambda: len(timeouts) > 2 and timeouts[-1] is None, "asleep again")
        # It looked again at the parser's escape delay (that is what reports the ESC),
        # and only until it found nothing twice.
        assert timeouts == [None, constants.ESCAPE_DELAY, constants.ESCAPE_DELAY, None]
        os.write(typing, b"q")
        _until(lambda: [m.key for m in got if isinstance(m, events.Key)] == ["escape", "q"],
               "a key is reported")
    finally:
        driver.exit_event.set()  # what leaving the app does
        thread.join(timeout=10)
        os.close(keyboard)
        os.close(typing)
    assert not thread.is_alive()


async def test_input_thread_stops_reading_a_terminal_that_is_gone(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """At the end of its input (a hung-up terminal reads EOF) the thread waits for the
    app to leave, where Textual's reads EOF again and again at full speed."""
    with quiet_driver() as driver:
        keyboard, typing = os.pipe()
        driver.fileno = keyboard
        monkeypatch.setattr(driver, "process_message", lambda message: None)
        looks = [0]
        select = selectors.SelectSelector.select

        def counted(self: selectors.SelectSelector,
                    timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
            looks[0] += 1
            return select(self, timeout)

        monkeypatch.setattr(selectors.SelectSelector, "select", counted)
        thread = threading.Thread(target=driver.run_input_thread)
        thread.start()
        try:
            os.close(typing)  # the far side is gone: EOF
            _until(lambda: looks[0] >= 2, "the thread read the end")
            time.sleep(0.3)
            assert looks[0] <= 4  # asleep, not reading EOF in a loop
        finally:
            driver.exit_event.set()
            thread.join(timeout=10)
            os.close(keyboard)
        assert not thread.is_alive()
