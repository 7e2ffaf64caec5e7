"""Frame: what the sampler hands a view for one tick, complete and immutable.

A view (the TUI) reads only frames: the snapshot, the throttle episodes (ongoing
and the log), and the alerts, all computed on the sampler's side. It never calls
back into the sampler, so it never holds the sampler's locks or shares a buffer
the sampler thread is writing.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from gputui.telemetry.alert import Alert
from gputui.telemetry.job_alerts import JobState
from gputui.telemetry.model import Snapshot
from gputui.telemetry.throttle import ThrottleEpisode

_EMPTY: Mapping[int, ThrottleEpisode] = MappingProxyType({})


@dataclass(frozen=True, slots=True)
class Frame:
    """One snapshot with what the sampler worked out from it: what a view receives."""

    snapshot: Snapshot
    ongoing: Mapping[int, ThrottleEpisode] = field(default_factory=lambda: _EMPTY)  # by GPU
    episodes: tuple[ThrottleEpisode, ...] = ()  # closed then ongoing, oldest first
    alerts: tuple[Alert, ...] = ()  # active now, errors first
    raised: tuple[Alert, ...] = ()  # raised by this very snapshot (toasts)
    # A replay that jumped: the view forgets its history and first takes in these
    # earlier snapshots (the history window before `snapshot`), quietly.
    reset: bool = False
    catch_up: tuple[Snapshot, ...] = field(default=())
    # Alerts that became inactive with this very snapshot (notifications say "ended").
    cleared: tuple[Alert, ...] = ()
    # How each training job in the snapshot does against its own median (alerts on).
    jobs: tuple[JobState, ...] = ()
    # Each job_slowdown as it stands (ongoing and ended), oldest first: the alerts screen
    # shows them beside the throttle episodes.
    job_slowdowns: tuple[Alert, ...] = ()

    @property
    def stale_gpus(self) -> tuple[int, ...]:
        return tuple(g.index for g in self.snapshot.gpus if g.stale)


def frozen_map(d: Mapping[int, ThrottleEpisode]) -> Mapping[int, ThrottleEpisode]:
    return MappingProxyType(dict(d)) if d else _EMPTY
