"""Notifications through the monitor's terminal: the bell, and a desktop notification.

A desktop notification is an escape sequence the terminal turns into a system
notification: OSC 9 (iTerm2, Windows Terminal, WezTerm, kitty, ghostty) or OSC 777
(urxvt, foot, and VTE terminals such as GNOME Terminal). Being plain output, it travels
over ssh to the laptop the terminal runs on. Inside tmux it is wrapped in tmux's
passthrough (`\\ePtmux;...\\e\\\\`), which tmux 3.3+ forwards with
`set -g allow-passthrough on`.

Textual owns the terminal: everything goes through its driver's writer (a queue served by
its output thread, so writing from the notifier's thread cannot interleave with a frame's
bytes). The driver is private to Textual: this module gets it from
`textual_adapter.app_driver`, and without it only the bell (a public App method) sounds.
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from gputui.notify.events import Event

if TYPE_CHECKING:
    from gputui.notify.notifier import Notifier

MAX_TEXT = 240  # desktop notifications cut long text anyway
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def _clean(text: str) -> str:
    """Text safe inside an OSC string: no control characters (an ESC or BEL would end
    the sequence early and let the rest reach the terminal as commands)."""
    return _CONTROL.sub(" ", text)[:MAX_TEXT]


def uses_osc777(env: Mapping[str, str]) -> bool:
    """Whether this terminal shows OSC 777 rather than OSC 9 notifications."""
    term = env.get("TERM", "")
    return term.startswith(("rxvt", "foot")) or bool(env.get("VTE_VERSION"))


def notification_sequence(title: str, body: str, *, osc777: bool, tmux: bool) -> str:
    title, body = _clean(title), _clean(body)
    if osc777:
        seq = f"\x1b]777;notify;{title.replace(';', ',')};{body}\x07"
    else:
        seq = f"\x1b]9;{title}: {body}\x07"
    if tmux:
        seq = "\x1bPtmux;" + seq.replace("\x1b", "\x1b\x1b") + "\x1b\\"
    return seq


def event_title(event: Event) -> str:
    what = {"started": "", "ended": " ended", "occurred": ""}[event.event]
    return f"gputui {event.host}: {event.kind.replace('_', ' ')}{what}"


class TerminalSink:
    """Bell + desktop notification for each event, written through the app's terminal."""

    name = "terminal"

    def __init__(self, app: Any, env: Mapping[str, str] | None = None) -> None:
        env = os.environ if env is None else env
        self._app = app
        self._osc777 = uses_osc777(env)
        self._tmux = bool(env.get("TMUX"))

    def send(self, event: Event, stop: threading.Event) -> None:
        from gputui.ui.textual_adapter import app_driver

        app = self._app
        if app.is_headless or not app.is_running:
            return  # no terminal to write to (tests, or the app is closing)
        driver = app_driver(app)
        if driver is not None:
            driver.write(notification_sequence(event_title(event), event.text,
                                               osc777=self._osc777, tmux=self._tmux))
        app.bell()


def attach_notifier(app: Any, notifier: Notifier, *, terminal: bool) -> None:
    """Notify through `app`'s terminal too (`terminal`), and show failures as its toasts.
    (The monitor's feed hands the notifier its frames.)"""
    if terminal:
        notifier.add_sink(TerminalSink(app))

    def report(line: str) -> None:
        # App.notify is thread-safe (it posts a message); markup off: the line quotes
        # a command's error output.
        app.notify(line, title="Notification failed", severity="warning", timeout=10,
                   markup=False)

    notifier.set_report(report)
