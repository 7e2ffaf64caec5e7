"""The live monitor: the Textual app that `gputui` opens (and `gputui replay` reuses).

The app composes and draws. Where its readings come from is its feed's business
(gputui/telemetry/feed.py: opening NVML, the sampler, the recorder, the notifier); the
feed hands it each frame — queued from the sampler's thread (one `FrameReady` waits at a
time, so the sampler never waits for a redraw and a UI that is behind takes every frame
waiting and draws once), or on the event loop when the sampler is fed by hand (a
replay, tests). On the loop the frame goes into the view's History, its new alerts
become toasts, and the monitor screen redraws itself from it; a screen on top is told
(`SnapshotShown`). In replay mode a `ReplayController` plays the recording into the
feed's sampler from a timer. Keys that act on what the monitor shows are the monitor
screen's own; the app's open screens and move the replay.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import os
import threading
from collections import deque
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, ClassVar

from textual.app import App, SystemCommand
from textual.binding import BindingType
from textual.css.query import NoMatches
from textual.screen import Screen

from gputui.telemetry.alerts import toasts
from gputui.telemetry.feed import FeedState, MonitorFeed
from gputui.telemetry.frame import Frame
from gputui.telemetry.history import History, TickBuckets, history_capacity
from gputui.telemetry.model import Snapshot
from gputui.telemetry.sampler import Sampler
from gputui.telemetry.sampler_opener import SamplerOpener
from gputui.ui import keys
from gputui.ui.messages import (
    DetailFieldsWanted,
    FrameReady,
    FramesTaken,
    MonitorReady,
    SnapshotShown,
)
from gputui.ui.options import AppOptions, live_feed
from gputui.ui.screens.monitor import FirstShow, MonitorScreen
from gputui.ui.terminal_writer import DiffingDriver, diffing_driver
from gputui.ui.textual_adapter import FORGET_REMOVED_EVERY_S, app_driver, forget_removed_widgets
from gputui.ui.themes import DEFAULT_THEME, install_themes
from gputui.ui.widgets.header import HeaderInfo, header_info

if TYPE_CHECKING:
    from gputui.ui.bench_messages import RunEvent, RunFinished
    from gputui.ui.bench_session import BenchSession
    from gputui.ui.replay_control import ReplayController

GC_PAUSE_MAX_S = 5.0
# How long a hang-up waits for the sampler to stop and the recording to end.
HANG_UP_WAIT_S = 1.0
# Frames that wait for a UI that is behind (~11 KB each with 8 GPUs); past this the
# oldest are dropped: ten minutes of ticks at 1 s.
MAX_WAITING_FRAMES = 600


class GputuiApp(App[int]):
    CSS_PATH = "app.tcss"
    TITLE = "gputui"
    ENABLE_COMMAND_PALETTE = True
    BINDINGS: ClassVar[list[BindingType]] = list(keys.EVERY_SCREEN)

    def __init__(self, options: AppOptions | None = None, *, sampler: Sampler | None = None,
                 opener: SamplerOpener | None = None) -> None:
        """`sampler`: one its caller feeds by hand (tests); else `opener` (started by the
        command, so NVML opens while Textual starts), else an opener of the app's own.
        A replay (`options.replay`) plays into a sampler of its own."""
        super().__init__(driver_class=diffing_driver())  # only the cells that changed
        self.options = options or AppOptions()
        self.replay: ReplayController | None = None
        if self.options.replay is not None:
            # Imported only to replay: the monitor starts without the recordings' modules.
            from gputui.ui.replay_control import ReplayController

            self.replay = ReplayController(self.options.replay, speed=self.options.replay_speed)
            self.feed = MonitorFeed(self.replay.sampler, self)
        else:
            self.feed = live_feed(self.options, self, sampler=sampler, opener=opener)
            if self.options.notifier is not None:  # fed by the feed, shown by the app
                from gputui.ui.terminal_notify import attach_notifier

                attach_notifier(self, self.options.notifier,
                                terminal=self.options.notify_terminal)
        self.main: MonitorScreen | None = None  # made by get_default_screen
        # The view's own history (fed from frames on the event loop; never shared with
        # the sampler thread), bucketed once per tick for every sparkline.
        self.history = History(history_capacity(self.options.interval))
        self.buckets = TickBuckets(self.history)
        self.latest_frame: Frame | None = None
        # Frames from the sampler's thread not yet taken in (see frame_posted); a UI held
        # up for longer than MAX_WAITING_FRAMES ticks loses the oldest, not its memory.
        self._waiting: deque[Frame] = deque(maxlen=MAX_WAITING_FRAMES)
        self._frame_posted = False
        self._bench: BenchSession | None = None  # made when first asked for (`bench`)
        # The theme is set before the first screen is built, so its widgets are styled
        # once with it: set in on_mount, the CSS was parsed and applied a second time
        # (~10 ms of the first frame). Its warnings are toasts once the app runs.
        self.theme_names, self._theme_warnings = install_themes(self, self.options.theme)

    @property
    def bench(self) -> BenchSession:
        """The benchmarks started from this app, made on first use: until then the bench
        modules are not even imported."""
        if self._bench is None:
            from gputui.ui.bench_session import BenchSession

            self._bench = BenchSession(post=self.post_message, notify=self.notify,
                                       latest_frame=lambda: self.latest_frame,
                                       sampler=lambda: self.feed.sampler)
        return self._bench

    # --- starting and stopping --------------------------------------------------------------

    def get_default_screen(self) -> MonitorScreen:
        """The monitor screen, built with the GPUs of the first reading when NVML is open
        already (`gputui` opens it while Textual starts): one paint instead of three
        (empty, GPUs mounted, GPUs filled in), ~8 % of the time to the first frame
        (docs/performance.md). Not open yet: the GPUs come with the first frame."""
        first = None
        frame = self.feed.first_reading()
        if frame is not None:
            self.history.take(frame)
            self.latest_frame = frame
            self.buckets.next_tick()
            first = FirstShow(frame, self.buckets, self._header_info())
        self.main = MonitorScreen(first, replay=self.replay is not None)
        return self.main

    def on_mount(self) -> None:
        for w in self._theme_warnings:
            self.notify(w, severity="warning", timeout=8)
        # Garbage collection is paused while the monitor starts (commands/tui.py): on
        # again once the first reading is drawn (`_draw`), or after this long without one.
        self.set_timer(GC_PAUSE_MAX_S, _collect_garbage_again)
        # Toasts, dialogs and screens come and go for as long as the monitor runs.
        self.set_interval(FORGET_REMOVED_EVERY_S, forget_removed_widgets)

    def on_monitor_ready(self, message: MonitorReady) -> None:
        """The monitor screen's widgets exist: frames may come."""
        first = self.latest_frame  # the first reading, on screen already: its toasts now
        if first is not None:
            self._raise_toasts(first)
            self.call_after_refresh(_collect_garbage_again)
        self.feed.go()
        if self.replay is not None:
            from gputui.ui.replay_control import TICK_S

            self.replay.start(warn=lambda w: self.notify(w, severity="warning", timeout=8,
                                                         markup=False))
            self.set_interval(TICK_S, self._replay_tick)

    def on_hangup(self) -> None:
        """The terminal is gone (ssh dropped, tmux killed): close what matters (the
        recording, NVML) and leave at once. A normal Textual shutdown writes terminal
        reset sequences, and with the pty gone that write can block forever."""
        # On a thread of its own, waited for a second at most: whatever it meets (a
        # recording on a stuck disk, a lock a stuck thread holds), the process leaves.
        closing = threading.Thread(target=self._hang_up_feed, daemon=True)
        closing.start()
        closing.join(HANG_UP_WAIT_S)
        os._exit(0)

    def _hang_up_feed(self) -> None:
        with contextlib.suppress(Exception):
            self.feed.hang_up()

    def exit(self, *args: object, **kwargs: object) -> None:  # type: ignore[override]
        self.feed.quit()  # nothing more is posted to a closing loop
        super().exit(*args, **kwargs)  # type: ignore[arg-type]

    async def on_unmount(self) -> None:
        self.feed.quit()
        # A benchmark worker must not outlive the app (SIGTERM, then SIGKILL; off the loop).
        # No session, nothing to stop: the bench modules are not even imported then.
        if self._bench is not None:
            await asyncio.to_thread(self._bench.shutdown)
        await asyncio.to_thread(self.feed.close)

    # --- frames in (gputui.telemetry.feed.FeedView) ------------------------------------------

    def frame_posted(self, frame: Frame) -> None:
        # On the sampler's thread. One FrameReady waits at a time, whatever the number of
        # frames: a UI that falls behind (a starved box, a short --interval) takes every
        # frame waiting and draws once. A message per frame would wait in Textual's queue,
        # ~11 KB a frame, for as long as the UI stays behind.
        self._waiting.append(frame)
        if not self._frame_posted:
            self._frame_posted = True
            if not self.post_message(FrameReady()):  # closing: the next frame tries again
                self._frame_posted = False

    def frame_here(self, frame: Frame) -> None:
        self._take(frame)
        self.post_message(FramesTaken())

    def feed_problem(self, title: str, text: str) -> None:
        self.notify(text, title=title, severity="error", timeout=30, markup=False)

    async def on_frame_ready(self, message: FrameReady) -> None:
        self._frame_posted = False  # first: a frame posted from now on posts again
        waiting = self._waiting
        if self.feed.state is not FeedState.LIVE:
            waiting.clear()
            return
        if not waiting:
            return
        while waiting:
            self._take(waiting.popleft())
        await self._draw()

    async def on_frames_taken(self, message: FramesTaken) -> None:
        await self._draw()

    def on_detail_fields_wanted(self, message: DetailFieldsWanted) -> None:
        self.feed.want_detail_fields(message.on)

    def _take(self, frame: Frame) -> None:
        """Every frame goes into the history and raises its toasts, drawn or not."""
        self.history.take(frame)
        self.main.take(frame)
        self.latest_frame = frame
        self._raise_toasts(frame)

    def _raise_toasts(self, frame: Frame) -> None:
        for alert in toasts(frame.raised, frame.alerts):  # one toast per event
            title = "GPU alert" if alert.severity == "warning" else "GPU error"
            # Messages carry device names from the driver: never markup.
            self.notify(alert.message, title=title, severity=alert.severity,
                        timeout=10 if alert.severity == "error" else 6, markup=False)

    # --- drawing --------------------------------------------------------------------------

    async def _draw(self) -> None:
        frame = self.latest_frame
        if frame is None or not self.is_running:
            return
        self.buckets.next_tick()
        try:
            await self.main.show(frame, self.buckets, self._header_info())
        except NoMatches:  # shutting down while a frame was in flight
            return
        if not gc.isenabled():
            self.call_after_refresh(_collect_garbage_again)
        if self.screen is not self.main:
            self.screen.post_message(SnapshotShown(frame.snapshot, frame, self.buckets,
                                                   self.main.window_s))

    def _header_info(self) -> HeaderInfo:
        return header_info(self.latest_frame, interval_s=self.feed.interval,
                           bench=self._bench.header_text() if self._bench else None,
                           replay=self.replay.position() if self.replay else None)

    def _update_header(self) -> None:
        """Between frames: a replay moved, a benchmark run started, moved or ended."""
        if self.main is not None and self.main.is_mounted:
            self.main.set_header(self._header_info())

    # Benchmark runs post these from the runner's threads; the session owns their state.
    def on_run_event(self, message: RunEvent) -> None:
        self.bench.apply_event(message)
        self._update_header()

    def on_run_finished(self, message: RunFinished) -> None:
        self.bench.apply_finished(message)
        self._update_header()

    # --- keys that work on every screen ----------------------------------------------------
    # A screen opened by a key is imported when first opened, and handed what it draws
    # (then frames, by message).

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "replay":
            return self.replay is not None
        return True

    def _toggle(self, kind: type[Screen[object]], make: Callable[[], Screen[object]]) -> None:
        """Close the screen of `kind` if it is on top, else open the one `make` builds."""
        if isinstance(self.screen, kind):
            self.pop_screen()
        else:
            self.push_screen(make())

    @property
    def _latest(self) -> Snapshot | None:
        return self.latest_frame.snapshot if self.latest_frame is not None else None

    def action_redraw(self) -> None:
        """ctrl+l: the terminal may not show what the writer believes it does (another
        program wrote to it): forget that, and paint every cell of the screen again."""
        driver = app_driver(self)
        if isinstance(driver, DiffingDriver):
            driver.forget_screen()
        self.screen.refresh(repaint=True)

    def action_benchmarks(self) -> None:
        if self.replay is not None:
            self.notify("benchmarks are not available in replay", severity="warning",
                        timeout=4)
            return
        from gputui.ui.screens.bench import toggle_bench_screen

        toggle_bench_screen(self, self.bench, self._latest)

    def action_doctor(self) -> None:
        if self.replay is not None:
            self.notify("doctor checks the live GPUs: not available in replay",
                        severity="warning", timeout=4)
            return
        from gputui.ui.screens.doctor import DoctorScreen

        if isinstance(self.screen, DoctorScreen):
            self.screen.action_close()
            return
        self.push_screen(DoctorScreen(frame=self.latest_frame, history=self.buckets,
                                      window_s=self.main.window_s))

    def action_help(self) -> None:
        from gputui.ui.screens.help import HelpScreen

        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen(replay=self.replay is not None))

    def action_alerts(self) -> None:
        from gputui.ui.screens.alerts import AlertsScreen

        self._toggle(AlertsScreen, lambda: AlertsScreen(self.latest_frame))

    def action_history(self) -> None:
        """`h`: line charts of one GPU's history (the first GPU shown)."""
        from gputui.ui.screens.history import HistoryScreen

        snap = self._latest
        first = snap.gpus[0].index if snap is not None and snap.gpus else 0
        kept_s = self.history.capacity * self.feed.interval
        self._toggle(HistoryScreen, lambda: HistoryScreen(
            self.history, first, self.main.window_s, kept_s=kept_s, snapshot=snap))

    def action_gpu_detail(self) -> None:
        """`i`: everything about one GPU (the one the monitor screen chooses)."""
        from gputui.ui.screens.gpu_detail import GpuDetailScreen

        self._toggle(GpuDetailScreen,
                     lambda: GpuDetailScreen(self._latest, self.main.chosen_gpu()))

    def action_cycle_theme(self) -> None:
        names = self.theme_names or list(self.available_themes)
        i = names.index(self.theme) if self.theme in names else -1
        self.theme = names[(i + 1) % len(names)]
        self.notify(f"Theme: {self.theme}", timeout=2)

    def get_system_commands(self, screen: Screen) -> Iterable[SystemCommand]:
        yield from super().get_system_commands(screen)
        yield SystemCommand("Alerts", "Throttle episodes and active alerts (a)",
                            self.action_alerts)
        yield SystemCommand("Benchmarks", "Run, queue and compare benchmarks (b)",
                            self.action_benchmarks)
        yield SystemCommand("Doctor", "Check every GPU's configuration and health (d)",
                            self.action_doctor)
        yield SystemCommand("Help: keys", "Every key gputui understands (?)", self.action_help)
        for name in self.theme_names:
            yield SystemCommand(f"Theme: {name}", "Switch the colour theme (t cycles)",
                                lambda n=name: setattr(self, "theme", n))
        if isinstance(screen, MonitorScreen):
            yield from screen.system_commands()

    # --- replay: its controller moves; a snapshot played draws itself (FramesTaken) ------

    def _replay_tick(self) -> None:
        assert self.replay is not None
        if not self.replay.tick():
            self._update_header()  # elapsed time moves between snapshots

    def action_replay(self, move: str, amount: float = 0.0) -> None:
        """A replay key (keys.py): move it, and say where it is now."""
        assert self.replay is not None
        self.replay.move(move, amount)
        self._update_header()


def _collect_garbage_again() -> None:
    """The monitor is up: garbage collection on again. (Not `gc.enable` itself: Textual
    counts a callback's parameters, and cannot count a builtin's.)"""
    gc.enable()


def run_app(options: AppOptions, opener: SamplerOpener | None = None) -> int:
    """Run the monitor in this terminal; returns the exit code. `opener`: NVML already
    opening (the command started it), closed here if the app cannot start."""
    from gputui.ui.run import run_monitor

    try:
        app = GputuiApp(options, opener=opener)
    except BaseException:
        if opener is not None:
            opener.cancel()
        raise
    return run_monitor(app)


__all__ = ["DEFAULT_THEME", "GputuiApp", "run_app"]
