"""The replay's transport: a recording played into the monitor's sampler, and the keys that
move it (pause, step, seek, speed, jump). The app owns one in replay mode, calls `tick`
from a timer on its event loop, and hands its sampler to the monitor's feed as a hand-fed
one: every snapshot the player plays reaches the view as a frame on the event loop.

No Textual here: the app's replay keys call `move`; a snapshot played reaches the view
through the sampler, and the app then shows the new position in the header.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from gputui.telemetry.limits import MIN_INTERVAL_S
from gputui.telemetry.replay import ReplayPlayer
from gputui.telemetry.sampler import Sampler

if TYPE_CHECKING:
    from gputui.telemetry.record import Recording

TICK_S = 0.1  # how often the timer advances the player


@dataclass(frozen=True, slots=True)
class ReplayPosition:
    """Where a replay is: what the header says of it."""

    name: str  # the recording's file name
    playing: bool
    speed: float
    elapsed_s: float
    duration_s: float


class ReplayController:
    def __init__(self, recording: Recording, *, speed: float = 1.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.recording = recording
        self.sampler = Sampler(interval=max(MIN_INTERVAL_S, recording.interval_s or 1.0),
                               nvml=None)
        self.player: ReplayPlayer | None = None  # made by start()
        self._speed = speed
        self._clock = clock
        self._last = 0.0  # the clock at the last tick (or pause toggle)

    def start(self, warn: Callable[[str], None]) -> None:
        """Play from the start: the first snapshot reaches the sampler's subscribers now
        (subscribe the view first). The recording's warnings go to `warn`: those met
        loading it now, a damaged line met while playing when it is met."""
        for w in self.recording.warnings:
            warn(w)
        self.recording.on_warning = warn
        self.player = ReplayPlayer(self.recording, self.sampler, speed=self._speed)
        self._last = self._clock()

    def _playing(self) -> ReplayPlayer:
        assert self.player is not None, "start() first"
        return self.player

    def tick(self) -> bool:
        """Advance by the time since the last tick; True: a snapshot was played."""
        now = self._clock()
        dt, self._last = now - self._last, now
        return self.player is not None and self.player.advance(dt)

    def toggle(self) -> None:
        self._playing().toggle()
        self._last = self._clock()

    def step(self, n: int) -> bool:
        return self._playing().step(n)

    def seek(self, seconds: float) -> bool:
        """`seconds` forward (negative: back) from where it is."""
        return self._playing().seek_relative(seconds)

    def jump(self, where: str) -> bool:
        """To the "start" or the "end"."""
        player = self._playing()
        return player.seek(0.0 if where == "start" else player.duration_s)

    def speed_by(self, factor: float) -> None:
        player = self._playing()
        player.speed = player.speed * factor

    def move(self, how: str, amount: float = 0.0) -> None:
        """A replay key's move (gputui/ui/keys.py): "toggle", "step" `amount` snapshots,
        "seek" `amount` seconds, "speed" times `amount`, to the "start" or the "end"."""
        if how == "toggle":
            self.toggle()
        elif how == "step":
            self.step(int(amount))
        elif how == "seek":
            self.seek(amount)
        elif how == "speed":
            self.speed_by(amount)
        elif how in ("start", "end"):
            self.jump(how)
        else:
            raise ValueError(f"no replay move {how!r}")

    def position(self) -> ReplayPosition | None:
        """What the header says of the replay (None before it started)."""
        p = self.player
        if p is None:
            return None
        return ReplayPosition(name=self.recording.path.name, playing=p.playing, speed=p.speed,
                              elapsed_s=p.elapsed_s, duration_s=p.duration_s)
