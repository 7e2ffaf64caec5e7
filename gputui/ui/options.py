"""What the CLI hands the Textual app, and the monitor's feed made of it (kept free of
textual so the CLI can build them cheaply)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from gputui.telemetry.feed import FeedView, MonitorFeed
from gputui.telemetry.sampler_opener import SamplerOpener

if TYPE_CHECKING:
    from gputui.notify.notifier import Notifier
    from gputui.telemetry.record import Recording
    from gputui.telemetry.sampler import Sampler


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


def live_feed(options: AppOptions, view: FeedView, *, sampler: Sampler | None = None,
              opener: SamplerOpener | None = None) -> MonitorFeed:
    """The live monitor's feed: over `sampler` when its caller feeds it by hand (tests),
    else over NVML opening (`opener`, started by the command; else one made here, which
    opens when the view is ready); with the recording (--record) and the notifier.
    Raises UsageError (one line, exit 2) for a recording it cannot write."""
    recorder = None
    if options.record_path:
        # Imported only to record: the monitor starts without the recordings' modules.
        from gputui.telemetry.record import Recorder

        recorder = Recorder(options.record_path, interval=options.interval)
    if sampler is None and opener is None:
        opener = SamplerOpener(interval=options.interval,
                               profile="record" if recorder is not None else "monitor")
    supply = sampler if sampler is not None else opener
    assert supply is not None
    return MonitorFeed(supply, view, recorder=recorder, notifier=options.notifier)
