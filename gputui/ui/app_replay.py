"""Replay controls of the monitor app: a timer advances the player on the event loop."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from gputui.telemetry.sampler import Sampler

if TYPE_CHECKING:
    from gputui.ui.app import GputuiApp

REPLAY_TICK_S = 0.1


class ReplayControls:
    """Mixed into GputuiApp: starting a replay and the replay keys."""

    def _start_replay(self: GputuiApp) -> None:
        from gputui.telemetry.replay import ReplayPlayer

        rec = self.options.replay
        assert rec is not None
        sampler = self.sampler or Sampler(interval=max(0.1, rec.interval_s or 1.0), nvml=None)
        self.sampler = sampler
        self._own_sampler = False
        self._start_sampler = False
        sampler.enable_alerts()
        # The player runs on the event loop: every frame goes into the history at once;
        # the screen is drawn once per timer tick, not per snapshot.
        sampler.subscribe_frames(self._frame_listener)
        self.player = ReplayPlayer(rec, sampler, speed=self.options.replay_speed)
        for w in rec.warnings:
            self.notify(w, severity="warning", timeout=8, markup=False)
        # A damaged line met while playing: said once, and the replay goes on.
        rec.on_warning = lambda w: self.notify(w, severity="warning", timeout=8,
                                               markup=False)
        self.main.set_notice(None)
        self._replay_clock = time.monotonic()
        self.set_interval(REPLAY_TICK_S, self._replay_tick)
        self.call_later(self._draw)

    async def _replay_tick(self: GputuiApp) -> None:
        now = time.monotonic()
        dt, self._replay_clock = now - self._replay_clock, now
        if self.player is not None and self.player.advance(dt):
            await self._draw()
        elif self.player is not None:
            self._update_header()  # elapsed time moves between snapshots

    async def _after_replay_move(self: GputuiApp, changed: bool) -> None:
        if changed:
            await self._draw()
        else:
            self._update_header()

    async def action_replay_toggle(self: GputuiApp) -> None:
        if self.player is not None:
            self.player.toggle()
            self._replay_clock = time.monotonic()
            self._update_header()

    async def action_replay_step(self: GputuiApp, n: int) -> None:
        if self.player is not None:
            await self._after_replay_move(self.player.step(n))

    async def action_replay_seek(self: GputuiApp, seconds: float) -> None:
        if self.player is not None:
            await self._after_replay_move(self.player.seek_relative(seconds))

    async def action_replay_speed(self: GputuiApp, factor: float) -> None:
        if self.player is not None:
            self.player.speed = self.player.speed * factor
            self._update_header()

    async def action_replay_jump(self: GputuiApp, where: str) -> None:
        if self.player is not None:
            target = 0.0 if where == "start" else self.player.duration_s
            await self._after_replay_move(self.player.seek(target))
