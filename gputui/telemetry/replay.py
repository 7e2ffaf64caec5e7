"""ReplayPlayer: plays a Recording into a Sampler as if it were live.

The UI drives it from one thread (its event loop: a timer calls `advance(dt)`),
so the sampler's history, throttle episodes and listeners behave exactly as in
the live monitor. Replay time is seconds from the first snapshot, taken from the
snapshots' wall-clock times (a recording has no other clock).

Seeking backwards, or jumping far ahead, rebuilds the sampler's state from the
snapshots of the history window before the target (15 minutes, the view's
history length), so sparklines and throttle episodes are right after a seek
without replaying a whole day. The catch-up snapshots go into the throttle
tracker directly and reach views inside the target's frame; only the target
snapshot is announced to listeners, so a UI is not flooded with hundreds of
frames it would never show.
"""

from __future__ import annotations

import bisect
from dataclasses import replace
from datetime import datetime, timedelta

from gputui.telemetry.limits import MAX_SPEED, MIN_SPEED
from gputui.telemetry.model import Snapshot
from gputui.telemetry.record import Recording
from gputui.telemetry.sampler import Sampler

# A seek rebuilds the sparklines' longest window (15 min), not all the history keeps
# (60 min): a long jump stays quick; older points fill in as the replay plays on.
REBUILD_WINDOW_S = 15 * 60.0


def clamp_speed(speed: float) -> float:
    if not speed == speed:  # NaN
        return 1.0
    return min(MAX_SPEED, max(MIN_SPEED, float(speed)))


class ReplayPlayer:
    """Plays `recording` into `sampler` (which must not be running its own thread)."""

    def __init__(self, recording: Recording, sampler: Sampler, *, speed: float = 1.0,
                 playing: bool = True) -> None:
        if not recording.snapshots:
            raise ValueError("a recording without snapshots cannot be replayed")
        self.recording = recording
        self.sampler = sampler
        # Times only: a file's snapshots are parsed when the play head reaches them.
        times = recording.times()
        t0 = times[0]
        offsets: list[float] = []
        last = 0.0
        for t in times:
            # A wall clock stepped backwards while recording must not make replay time
            # run backwards: clamp to non-decreasing.
            last = max(last, (t - t0).total_seconds())
            offsets.append(last)
        self._t0 = t0
        self._offsets = offsets
        self._source = recording.snapshots
        self._recent: dict[int, Snapshot] = {}
        self._speed = clamp_speed(speed)
        self._t = 0.0
        self._pos = 0
        self.playing = playing
        # How many times the sampler was reset and refilled (seeks back or far ahead):
        # consumers with their own state (an AlertEngine) compare it to start over too.
        self.rebuilds = 0
        sampler.rebuild((), self._snap(0))

    # --- state ---------------------------------------------------------------------------

    @property
    def speed(self) -> float:
        return self._speed

    @speed.setter
    def speed(self, value: float) -> None:
        self._speed = clamp_speed(value)

    def faster(self) -> float:
        self.speed = self._speed * 2
        return self._speed

    def slower(self) -> float:
        self.speed = self._speed / 2
        return self._speed

    @property
    def position(self) -> int:
        """Index of the current snapshot in the recording."""
        return self._pos

    def __len__(self) -> int:
        return len(self._offsets)

    def _snap(self, i: int) -> Snapshot:
        # History windows are measured on `mono`: make it replay time, whatever the
        # snapshot carried (hand-built ones may all say 0). The last few are kept, so
        # `current` is the very object listeners were handed.
        got = self._recent.get(i)
        if got is None:
            s = self._source[i]
            off = self._offsets[i]
            got = s if s.mono == off else replace(s, mono=off)
            self._recent[i] = got
            if len(self._recent) > 8:
                del self._recent[next(iter(self._recent))]
        return got

    @property
    def current(self) -> Snapshot:
        return self._snap(self._pos)

    @property
    def duration_s(self) -> float:
        return self._offsets[-1]

    @property
    def elapsed_s(self) -> float:
        return self._t

    @property
    def time(self) -> datetime:
        """The recording's wall-clock time at the play head."""
        return self._t0 + timedelta(seconds=self._t)

    @property
    def at_end(self) -> bool:
        return self._pos == len(self._offsets) - 1 and self._t >= self.duration_s

    # --- controls ------------------------------------------------------------------------

    def play(self) -> None:
        if self.at_end:
            self.seek(0.0)  # play after the end starts over, like any media player
        self.playing = True

    def pause(self) -> None:
        self.playing = False

    def toggle(self) -> bool:
        """Play/pause; returns whether it is playing now."""
        if self.playing:
            self.pause()
        else:
            self.play()
        return self.playing

    def advance(self, wall_dt: float) -> bool:
        """Move replay time by wall_dt × speed; ingest every snapshot now due.

        Returns True if the position changed. Pauses at the end.
        """
        if not self.playing or wall_dt <= 0:
            return False
        self._t = min(self.duration_s, self._t + wall_dt * self._speed)
        target = bisect.bisect_right(self._offsets, self._t) - 1
        changed = target > self._pos
        if changed:
            self._go_to(target)
        if self._t >= self.duration_s:
            self.playing = False
        return changed

    def step(self, n: int = 1) -> bool:
        """Move n snapshots (negative: back) and pause. True if the position changed."""
        self.playing = False
        target = min(len(self._offsets) - 1, max(0, self._pos + n))
        changed = target != self._pos
        if changed:
            self._go_to(target)
        self._t = self._offsets[self._pos]
        return changed

    def seek(self, seconds_from_start: float) -> bool:
        """Jump to a replay time (clamped to the recording). True if the position changed."""
        t = min(self.duration_s, max(0.0, float(seconds_from_start)))
        target = bisect.bisect_right(self._offsets, t) - 1
        changed = target != self._pos
        if changed:
            self._go_to(target)
        self._t = t
        return changed

    def seek_relative(self, seconds: float) -> bool:
        return self.seek(self._t + seconds)

    # --- feeding the sampler -------------------------------------------------------------

    def _go_to(self, target: int) -> None:
        # `_pos` moves before each ingest so that a listener sees `position`/`current`
        # describe the snapshot it is being handed (and can tell a rewind: it goes down).
        gap = self._offsets[target] - self._offsets[self._pos]
        if target > self._pos and gap <= REBUILD_WINDOW_S:
            for i in range(self._pos + 1, target + 1):
                self._pos = i
                self.sampler.ingest(self._snap(i))
        else:
            self._rebuild(target)

    def _rebuild(self, target: int) -> None:
        self.rebuilds += 1
        start = bisect.bisect_left(self._offsets, self._offsets[target] - REBUILD_WINDOW_S)
        # Quiet catch-up: the tracker and alerts take the window in, and views get it in
        # the target's frame (reset + catch_up), so a UI is not flooded with frames.
        self._pos = target
        self.sampler.rebuild([self._snap(i) for i in range(start, target)],
                             self._snap(target))
