"""What the CLI hands the Textual app (kept free of textual so the CLI can build it cheaply)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from gputui.notify.notifier import Notifier
    from gputui.telemetry.record import Recording


@dataclass
class AppOptions:
    """What the command line asked of the monitor."""

    interval: float = 1.0
    theme: str | None = None  # None: GPUTUI_THEME, else the default theme
    record_path: str | None = None
    replay: Recording | None = None
    replay_speed: float = 1.0
    notifier: Notifier | None = None  # fed the live sampler's frames (gputui.notify)
    notify_terminal: bool = False  # bell + desktop notification through this terminal
