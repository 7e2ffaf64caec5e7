"""The live monitor: the Textual app that `gputui` opens (and `gputui replay` reuses).

Data flow: a Sampler thread reads NVML (one reader thread per GPU) and psutil and
hands each tick's immutable Frame to `_frame_listener`, which posts it to the event
loop (`post_message`: the sampler never waits for a redraw, and the recorder, called
before it on the sampler thread, never waits behind one). On the loop the frame goes
into the view's History, its new alerts become toasts, and the screens redraw
themselves from it. In replay mode there is no thread: a timer advances a
ReplayPlayer that feeds the same kind of Sampler on the event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import os
import threading
import time
from collections.abc import Iterable
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from textual.app import App, SystemCommand
from textual.binding import Binding, BindingType
from textual.css.query import NoMatches
from textual.screen import Screen

from gputui.telemetry.alerts import Alert, toasts
from gputui.telemetry.frame import Frame
from gputui.telemetry.history import History, TickBuckets, history_capacity
from gputui.telemetry.model import Snapshot
from gputui.telemetry.sampler import Sampler
from gputui.ui.messages import (
    DetailFieldsWanted,
    FrameReady,
    MonitorReady,
    SamplerOpened,
    SnapshotShown,
)
from gputui.ui.options import AppOptions
from gputui.ui.sampler_opener import SamplerOpener
from gputui.ui.screens.monitor import FirstShow, MonitorScreen
from gputui.ui.terminal_writer import DiffingDriver, diffing_driver
from gputui.ui.textual_adapter import app_driver
from gputui.ui.themes import DEFAULT_THEME, load_themes, pick_theme, resolve_theme
from gputui.ui.widgets.gpu_panel import window_label
from gputui.ui.widgets.header import HeaderInfo
from gputui.ui.widgets.process_table import COLUMNS

if TYPE_CHECKING:
    from gputui.telemetry.record import Recorder
    from gputui.telemetry.replay import ReplayPlayer
    from gputui.ui.bench_messages import RunEvent, RunFinished
    from gputui.ui.bench_session import BenchSession

DEFAULT_WINDOW_S = 300.0
WINDOWS_S = (60.0, 300.0, 900.0)
GC_PAUSE_MAX_S = 5.0
REPLAY_TICK_S = 0.1


class GputuiApp(App[int]):
    CSS_PATH = "app.tcss"
    TITLE = "gputui"
    ENABLE_COMMAND_PALETTE = True

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("q", "quit", "Quit"),
        # As in top, htop, nvtop and nvitop (Textual's default only says "press ctrl+q").
        # Not a priority binding: a focused text field keeps ctrl+c for copying.
        Binding("ctrl+c", "quit", "Quit", show=False),
        # As in less, vim and shells: repaint after another program wrote over the screen.
        Binding("ctrl+l", "redraw", "Redraw", show=False),
        Binding("question_mark", "help", "Help"),
        Binding("a", "alerts", "Alerts"),
        Binding("b", "benchmarks", "Benchmarks"),
        Binding("d", "doctor", "Doctor"),
        Binding("c", "toggle_compact", "Compact"),
        Binding("w", "cycle_window", "Window"),
        Binding("t", "cycle_theme", "Theme"),
        Binding("s", "sort", "Sort"),
        Binding("S", "sort_reverse", "Reverse sort", show=False),
        Binding("k", "signal('TERM')", "Terminate"),
        Binding("K", "signal('KILL')", "Kill", show=False),
        Binding("i", "gpu_detail", "GPU info"),
        Binding("h", "history", "History"),  # last in the footer: the first cut when narrow
        # Replay only (check_action hides them live). Priority: the process table
        # would otherwise take the arrows and home/end for its cursor.
        Binding("space", "replay_toggle", "Play/Pause", priority=True),
        Binding("full_stop", "replay_step(1)", "Step", show=False),
        Binding("comma", "replay_step(-1)", "Step back", show=False),
        Binding("right", "replay_seek(10)", "+10s", priority=True),
        Binding("left", "replay_seek(-10)", "-10s", priority=True),
        Binding("right_square_bracket", "replay_speed(2.0)", "Faster"),
        Binding("left_square_bracket", "replay_speed(0.5)", "Slower", show=False),
        Binding("home", "replay_jump('start')", "Start", show=False, priority=True),
        Binding("end", "replay_jump('end')", "End", show=False, priority=True),
    ]

    # Actions about what the main screen shows; on the alerts screen these keys (and
    # the arrows) belong to that screen's table.
    MAIN_ONLY: ClassVar[frozenset[str]] = frozenset({
        "signal", "sort", "sort_reverse", "toggle_compact", "cycle_window", "replay_seek",
        "replay_jump"})

    def __init__(self, options: AppOptions | None = None, *, sampler: Sampler | None = None,
                 start_sampler: bool = True, recorder: Recorder | None = None,
                 handle_sighup: bool = False, theme_dirs: list[Path] | None = None,
                 opener: SamplerOpener | None = None) -> None:
        """`sampler`: a sampler to show (tests, replay); else `opener` (started by the
        command, so NVML opens while Textual starts), else one opened when the
        monitor screen is up."""
        super().__init__(driver_class=diffing_driver())  # only the cells that changed
        self.options = options or AppOptions()
        self.main: MonitorScreen | None = None  # made by get_default_screen
        self.sampler: Sampler | None = sampler
        self.own_sampler = sampler is None  # we close what we opened, not what we were given
        self._opener = opener
        self._start_sampler = start_sampler
        self.recorder = recorder
        self._record_error_shown = False
        if self.recorder is None and self.options.record_path and self.options.replay is None:
            # Imported only to record: the monitor starts without the recordings' modules.
            from gputui.telemetry.record import Recorder

            # Raises UsageError (one line, exit 2) before the app starts.
            self.recorder = Recorder(self.options.record_path, interval=self.options.interval)
        self._handle_sighup = handle_sighup
        self.player: ReplayPlayer | None = None
        self.window_s = DEFAULT_WINDOW_S
        # The view's own history (fed from frames on the event loop; never shared with
        # the sampler thread), bucketed once per tick for every sparkline.
        self.history = History(history_capacity(self.options.interval))
        self.buckets = TickBuckets(self.history)
        self.latest_frame: Frame | None = None
        self._quitting = False
        self._loop_thread: int | None = None
        self._draw_pending = False
        self._read_first = False  # the first reading was taken before the screen was built
        self._replay_clock = 0.0
        self._detail_fields = False  # the GPU detail screen is open
        self._bench: BenchSession | None = None  # made when first asked for (`bench`)
        themes, self._theme_warnings = load_themes(theme_dirs)
        for theme in themes:
            self.register_theme(theme)
        self.theme_names = [t.name for t in themes]
        # The theme is set before the first screen is built, so its widgets are styled
        # once with it: set in on_mount, the CSS was parsed and applied a second time
        # (~10 ms of the first frame). Its warning is a toast once the app runs.
        name, warning = resolve_theme(pick_theme(self.options.theme, os.environ),
                                      self.available_themes)
        if warning:
            self._theme_warnings.append(warning)
        # Shipped themes missing: Textual's default.
        self.theme = name if name in self.available_themes else "textual-dark"

    @property
    def latest(self) -> Snapshot | None:
        return self.latest_frame.snapshot if self.latest_frame is not None else None

    @property
    def bench(self) -> BenchSession:
        """The benchmarks started from this app, made on first use: until then the bench
        modules are not even imported."""
        if self._bench is None:
            from gputui.ui.bench_session import BenchSession

            self._bench = BenchSession(post=self.post_message, notify=self.notify,
                                       latest_frame=lambda: self.latest_frame,
                                       sampler=lambda: self.sampler)
        return self._bench

    @property
    def compact(self) -> bool:
        return self.main.gpus.compact

    @property
    def _compact_override(self) -> bool | None:
        return self.main.compact_override

    # --- layout ---------------------------------------------------------------------------

    def get_default_screen(self) -> MonitorScreen:
        self.main = MonitorScreen(self._first_reading())
        return self.main

    def _first_reading(self) -> FirstShow | None:
        """When NVML is open already (`gputui` opens it while Textual starts), its first
        reading, taken here: the screen is built with its GPUs and its first paint shows
        them. One paint instead of three (empty, GPUs mounted, GPUs filled in), ~8 % of
        the time to the first frame (docs/performance.md). NVML not open yet: the sampler
        is taken when it is, and the GPUs come with its first frame."""
        if self.options.replay is not None or self.sampler is not None or \
                self._opener is None:
            return None
        sampler = self._opener.take_if_open()
        if sampler is None:
            return None
        self.sampler = sampler
        self._subscribe(sampler)  # the recorder and the notifier see this reading too
        first: list[Frame] = []
        sampler.subscribe_frames(first.append)
        try:
            sampler.tick()  # on this thread: ~10 ms for 4 GPUs; a hung GPU: its deadline
        except Exception:  # as on the sampler's thread: logged, and the next tick is due
            logging.getLogger("gputui").exception("sampler tick failed")
        sampler.unsubscribe_frames(first.append)
        sampler.subscribe_frames(self._frame_listener)
        self._read_first = True
        if not first:
            return None
        frame = first[0]
        self.history.take(frame)
        self.latest_frame = frame
        self.buckets.next_tick()
        return FirstShow(frame, self.buckets, self.window_s, self._header_info())

    def on_mount(self) -> None:
        self._loop_thread = threading.get_ident()
        for w in self._theme_warnings:
            self.notify(w, severity="warning", timeout=8)
        # Garbage collection is paused while the monitor starts (commands/tui.py): on
        # again once the first reading is drawn (`_draw`), or after this long without one.
        self.set_timer(GC_PAUSE_MAX_S, _collect_garbage_again)

    def on_monitor_ready(self, message: MonitorReady) -> None:
        """The monitor screen's widgets exist: start feeding them."""
        self._loop_thread = threading.get_ident()
        if self.options.replay is not None:
            self._start_replay()
        elif self._read_first and self.sampler is not None:
            frame = self.latest_frame  # the screen showed it; its alerts are raised here
            if frame is not None:
                for alert in toasts(frame.raised, frame.alerts):
                    self._toast(alert)
                self.call_after_refresh(_collect_garbage_again)
            self._show_source(self.sampler)
            if self._start_sampler:
                self.sampler.start(first_in=self.sampler.interval if frame else 0.0)
        elif self.sampler is not None:
            self._attach_sampler(self.sampler)
        else:
            if self._opener is None:  # not started by the command: open it now
                profile = "record" if self.recorder is not None else "monitor"
                self._opener = SamplerOpener(interval=self.options.interval, profile=profile)
            self._opener.deliver_to(self._sampler_opened)

    def relayout(self) -> None:
        self.main.relayout()

    def on_hangup(self) -> None:
        """The terminal is gone (ssh dropped, tmux killed): close what matters (the
        recording, NVML) and leave at once. A normal Textual shutdown writes terminal
        reset sequences, and with the pty gone that write can block forever."""
        self._quitting = True
        with contextlib.suppress(Exception):
            if self.sampler is not None:
                self.sampler.stop(timeout=0.5)
            if self.recorder is not None:
                self.recorder.close()  # every line was flushed as written; this ends it
        os._exit(0)

    # --- the sampler ----------------------------------------------------------------------

    def _sampler_opened(self, sampler: Sampler) -> bool:
        """Hand the sampler to the loop, never waiting for it (False: the app is
        quitting; the opener closes the sampler). Already open when the screen came up
        (called on the loop): taken at once, without a message round trip."""
        if self._quitting:
            return False
        if threading.get_ident() == self._loop_thread:
            self._take_sampler(sampler)
            return True
        return self.post_message(SamplerOpened(sampler))

    def on_sampler_opened(self, message: SamplerOpened) -> None:
        sampler = message.sampler
        assert isinstance(sampler, Sampler)
        self._take_sampler(sampler)

    def _take_sampler(self, sampler: Sampler) -> None:
        if self._opener is not None:
            self._opener.taken(sampler)
        if self._quitting:
            sampler.close()
            return
        self.sampler = sampler
        self._attach_sampler(sampler)

    def _attach_sampler(self, sampler: Sampler) -> None:
        # Not `_attach`: that is Textual's own (MessagePump._attach), which this would hide.
        self._subscribe(sampler)
        sampler.subscribe_frames(self._frame_listener)
        self._show_source(sampler)
        if self._start_sampler:
            sampler.start()  # its first tick at once

    def _subscribe(self, sampler: Sampler) -> None:
        """Everything but the screen that takes the sampler's readings."""
        if self.recorder is not None:
            sampler.subscribe(self.recorder.write)  # written and flushed on the sampler thread
        sampler.enable_alerts()
        if self._detail_fields:
            sampler.want_detail_fields(True)
        if self.options.notifier is not None and self.options.replay is None:
            from gputui.ui.terminal_notify import attach_notifier

            attach_notifier(self, sampler, self.options.notifier,
                            terminal=self.options.notify_terminal)

    def _show_source(self, sampler: Sampler) -> None:
        if sampler.source is None and sampler.nvml_error:
            self.main.set_host_only(sampler.nvml_error)
        else:
            self.main.set_notice(None)

    def _frame_listener(self, frame: Frame) -> None:
        """Called on whichever thread ingested the snapshot; never blocks."""
        if self._quitting:
            return
        if threading.get_ident() == self._loop_thread:
            # Fed on the event loop (replay, tests): take it now, draw once queued work ran.
            self._take(frame)
            if self.player is None and not self._draw_pending:
                self._draw_pending = True
                self.call_later(self._draw)
            return
        self.post_message(FrameReady(frame))

    def on_detail_fields_wanted(self, message: DetailFieldsWanted) -> None:
        if self.sampler is not None:
            self.sampler.want_detail_fields(message.on)
        self._detail_fields = message.on  # a sampler opened later is asked too

    async def on_frame_ready(self, message: FrameReady) -> None:
        self._take(message.frame)
        await self._draw()

    def _take(self, frame: Frame) -> None:
        """Every frame goes into the history and raises its toasts, drawn or not."""
        self.history.take(frame)
        self.main.take(frame)
        self.latest_frame = frame
        for alert in toasts(frame.raised, frame.alerts):  # one toast per event
            self._toast(alert)

    def exit(self, *args: object, **kwargs: object) -> None:  # type: ignore[override]
        self._quitting = True
        if self.sampler is not None:
            # Unsubscribe first so nothing is posted to a closing loop.
            self.sampler.unsubscribe_frames(self._frame_listener)
        super().exit(*args, **kwargs)  # type: ignore[arg-type]

    async def on_unmount(self) -> None:
        self._quitting = True
        # A benchmark worker must not outlive the app (SIGTERM, then SIGKILL; off the loop).
        # No session, nothing to stop: the bench modules are not even imported then.
        if self._bench is not None:
            await asyncio.to_thread(self._bench.shutdown)
        await asyncio.to_thread(self._stop_background)

    def _stop_background(self) -> None:
        if self._opener is not None:  # opened (or opening), but the app quit before taking it
            self._opener.cancel()
        sampler = self.sampler
        if sampler is not None:
            sampler.unsubscribe_frames(self._frame_listener)
            if self.options.notifier is not None:
                sampler.unsubscribe_frames(self.options.notifier)
            if self.own_sampler:
                sampler.close()
            elif self._start_sampler:
                sampler.stop()
            if self.recorder is not None:
                sampler.unsubscribe(self.recorder.write)
        if self.recorder is not None:
            self.recorder.close()

    # --- drawing --------------------------------------------------------------------------

    async def _draw(self) -> None:
        self._draw_pending = False
        frame = self.latest_frame
        if frame is None or self._quitting or not self.is_running:
            return
        if self.recorder is not None and self.recorder.error and not self._record_error_shown:
            self._record_error_shown = True
            self.notify(self.recorder.error, title="Recording stopped", severity="error",
                        timeout=30, markup=False)
        self.buckets.next_tick()
        try:
            await self.main.show(frame, self.buckets, self.window_s, self._header_info(),
                                 replaying=self.player is not None)
        except NoMatches:  # shutting down while a frame was in flight
            return
        if not gc.isenabled():
            self.call_after_refresh(_collect_garbage_again)
        if self.screen is not self.main:
            self.screen.post_message(SnapshotShown(frame.snapshot, frame, self.buckets,
                                                   self.window_s))

    def _toast(self, alert: Alert) -> None:
        title = "GPU alert" if alert.severity == "warning" else "GPU error"
        # Messages carry device names from the driver: never markup.
        self.notify(alert.message, title=title, severity=alert.severity,
                    timeout=10 if alert.severity == "error" else 6, markup=False)

    def _header_info(self) -> HeaderInfo:
        frame = self.latest_frame
        snap = frame.snapshot if frame else None
        active = frame.alerts if frame else ()
        # The interval the sampler really runs at (replay: the recording's).
        interval = self.sampler.interval if self.sampler is not None else self.options.interval
        info = HeaderInfo(
            hostname=snap.host.hostname if snap else "",
            driver=snap.system.driver_version if snap else None,
            cuda=snap.system.cuda_driver_version if snap else None,
            amd_driver=snap.system.amd_driver_version if snap else None,
            time=snap.time if snap else None,
            interval_s=interval,
            alerts=len(active),
            errors=sum(a.severity == "error" for a in active),
            skipped_ticks=snap.skipped_ticks if snap else 0,
            stale=len(frame.stale_gpus) if frame else 0,
        )
        bench = self._bench_header()
        if bench:
            info = replace(info, bench=bench)
        if self.player is not None:
            p = self.player
            assert self.options.replay is not None
            info = replace(info, replay=self.options.replay.path.name, playing=p.playing,
                           speed=p.speed, elapsed_s=p.elapsed_s, duration_s=p.duration_s)
        return info

    def _update_header(self) -> None:
        self.main.header.set_info(self._header_info())

    def _bench_header(self) -> str | None:
        """"cnn-train 42%" while a benchmark runs (started from the bench screen)."""
        live = self._bench.current if self._bench is not None else None
        if live is None or live.finished:
            return None
        frac = live.fraction
        name = live.request.benchmark
        if live.stage == "cancelling":
            return f"{name} cancelling"
        return name if frac is None else f"{name} {100 * frac:.0f}%"

    def bench_changed(self) -> None:
        """A run started, moved or ended: the header's run indicator follows."""
        if self.main is not None and self.main.is_mounted:
            self._update_header()

    # Benchmark runs post these from the runner's threads; the session owns their state.
    def on_run_event(self, message: RunEvent) -> None:
        self.bench.apply_event(message)
        self.bench_changed()

    def on_run_finished(self, message: RunFinished) -> None:
        self.bench.apply_finished(message)
        self.bench_changed()

    # --- keys ---------------------------------------------------------------------------
    # Screens update their own widgets; these only ask them to. A screen opened by a key
    # is imported when first opened, and handed what it draws (then frames, by message).

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action in self.MAIN_ONLY and self.screen is not self.main:
            return False
        if action.startswith("replay_"):
            return self.player is not None
        if action == "signal":
            return self.player is None  # a recorded PID is not a process to kill now
        return True

    def action_redraw(self) -> None:
        """ctrl+l: the terminal may not show what the writer believes it does (another
        program wrote to it): forget that, and paint every cell of the screen again."""
        driver = app_driver(self)
        if isinstance(driver, DiffingDriver):
            driver.forget_screen()
        self.screen.refresh(repaint=True)

    def action_benchmarks(self) -> None:
        if self.player is not None:
            self.notify("benchmarks are not available in replay", severity="warning",
                        timeout=4)
            return
        from gputui.ui.screens.bench import toggle_bench_screen

        toggle_bench_screen(self, self.bench, self.latest)

    def action_doctor(self) -> None:
        if self.player is not None:
            self.notify("doctor checks the live GPUs: not available in replay",
                        severity="warning", timeout=4)
            return
        from gputui.ui.screens.doctor import DoctorScreen

        if isinstance(self.screen, DoctorScreen):
            self.screen.action_close()
            return
        self.push_screen(DoctorScreen(frame=self.latest_frame, history=self.buckets,
                                      window_s=self.window_s))

    def action_help(self) -> None:
        from gputui.ui.screens.help import HelpScreen

        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen(replay=self.player is not None))

    def action_alerts(self) -> None:
        from gputui.ui.screens.alerts import AlertsScreen

        if isinstance(self.screen, AlertsScreen):
            self.pop_screen()
            return
        self.push_screen(AlertsScreen(self.latest_frame))

    def action_history(self) -> None:
        """`h`: line charts of one GPU's history (the first GPU shown)."""
        from gputui.ui.screens.history import HistoryScreen

        if isinstance(self.screen, HistoryScreen):
            self.pop_screen()
            return
        snap = self.latest
        gpus = [g.index for g in snap.gpus] if snap is not None else []
        interval = self.sampler.interval if self.sampler is not None else self.options.interval
        self.push_screen(HistoryScreen(self.history, gpus[0] if gpus else 0, self.window_s,
                                       kept_s=self.history.capacity * interval, snapshot=snap))

    def action_gpu_detail(self) -> None:
        """`i`: everything about one GPU (the selected process's GPU, else the first)."""
        from gputui.ui.screens.gpu_detail import GpuDetailScreen

        if isinstance(self.screen, GpuDetailScreen):
            self.pop_screen()
            return
        snap = self.latest
        selected = self.main.procs.selected_process()
        gpus = [g.index for g in snap.gpus] if snap is not None else []
        index = selected.gpu_index if selected is not None and selected.gpu_index in gpus \
            else (gpus[0] if gpus else 0)
        self.push_screen(GpuDetailScreen(snap, index))

    def action_toggle_compact(self) -> None:
        self.main.toggle_compact()

    def action_cycle_window(self) -> None:
        i = WINDOWS_S.index(self.window_s) if self.window_s in WINDOWS_S else 0
        self.set_window(WINDOWS_S[(i + 1) % len(WINDOWS_S)])

    def set_window(self, seconds: float) -> None:
        self.window_s = seconds
        self.main.show_gpus(window_s=seconds)
        self.notify(f"History window: {window_label(seconds)}", timeout=2)

    def action_cycle_theme(self) -> None:
        names = self.theme_names or list(self.available_themes)
        i = names.index(self.theme) if self.theme in names else -1
        self.theme = names[(i + 1) % len(names)]
        self.notify(f"Theme: {self.theme}", timeout=2)

    def action_sort(self) -> None:
        self.main.procs.cycle_sort()

    def action_sort_reverse(self) -> None:
        self.main.procs.reverse_sort()

    def action_signal(self, name: str) -> None:
        from gputui.ui.process_signal import SignalRequest
        from gputui.ui.screens.confirm import ConfirmScreen

        proc = self.main.procs.selected_process()
        if proc is None:
            self.notify("No process selected", severity="warning")
            return
        request = SignalRequest(proc, name)
        refused = request.refused()
        if refused is not None:
            self.notify(refused, title="Not sent", severity="error", markup=False)
            return

        def answered(yes: bool | None) -> None:
            if not yes:
                return
            text, sent = request.send()
            if sent:
                self.notify(text, markup=False)
            else:
                self.notify(text, title="Not sent", severity="error", markup=False)

        self.push_screen(ConfirmScreen(request.question(), yes_label=f"Send {request.signame}",
                                       no_message=request.cancelled()), answered)

    def get_system_commands(self, screen: Screen) -> Iterable[SystemCommand]:
        yield from super().get_system_commands(screen)
        yield SystemCommand("Alerts", "Throttle episodes and active alerts (a)",
                            self.action_alerts)
        yield SystemCommand("Benchmarks", "Run, queue and compare benchmarks (b)",
                            self.action_benchmarks)
        yield SystemCommand("Doctor", "Check every GPU's configuration and health (d)",
                            self.action_doctor)
        yield SystemCommand("Help: keys", "Every key gputui understands (?)", self.action_help)
        yield SystemCommand("Compact mode: toggle", "One line per GPU, or full panels (c)",
                            self.action_toggle_compact)
        for seconds in WINDOWS_S:
            yield SystemCommand(f"History window: {window_label(seconds)}",
                                "Time span of the sparklines (w cycles)",
                                lambda s=seconds: self.set_window(s))
        for name in self.theme_names:
            yield SystemCommand(f"Theme: {name}", "Switch the colour theme (t cycles)",
                                lambda n=name: setattr(self, "theme", n))
        for col in COLUMNS:
            yield SystemCommand(f"Sort processes by {col.label}", "s cycles, S reverses",
                                lambda k=col.key: self.main.procs.set_sort(k))

    # --- replay: a timer advances the player on the event loop -----------------------------

    def _start_replay(self) -> None:
        from gputui.telemetry.limits import MIN_INTERVAL_S
        from gputui.telemetry.replay import ReplayPlayer

        rec = self.options.replay
        assert rec is not None
        sampler = self.sampler or Sampler(interval=max(MIN_INTERVAL_S, rec.interval_s or 1.0),
                                          nvml=None)
        self.sampler = sampler
        self.own_sampler = False
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

    async def _replay_tick(self) -> None:
        now = time.monotonic()
        dt, self._replay_clock = now - self._replay_clock, now
        if self.player is not None and self.player.advance(dt):
            await self._draw()
        elif self.player is not None:
            self._update_header()  # elapsed time moves between snapshots

    async def _after_replay_move(self, changed: bool) -> None:
        if changed:
            await self._draw()
        else:
            self._update_header()

    async def action_replay_toggle(self) -> None:
        if self.player is not None:
            self.player.toggle()
            self._replay_clock = time.monotonic()
            self._update_header()

    async def action_replay_step(self, n: int) -> None:
        if self.player is not None:
            await self._after_replay_move(self.player.step(n))

    async def action_replay_seek(self, seconds: float) -> None:
        if self.player is not None:
            await self._after_replay_move(self.player.seek_relative(seconds))

    async def action_replay_speed(self, factor: float) -> None:
        if self.player is not None:
            self.player.speed = self.player.speed * factor
            self._update_header()

    async def action_replay_jump(self, where: str) -> None:
        if self.player is not None:
            target = 0.0 if where == "start" else self.player.duration_s
            await self._after_replay_move(self.player.seek(target))



def _collect_garbage_again() -> None:
    """The monitor is up: garbage collection on again."""
    gc.enable()


def run_app(options: AppOptions, opener: SamplerOpener | None = None) -> int:
    """Run the monitor in this terminal; returns the exit code. `opener`: NVML already
    opening (the command started it), closed here if the app cannot start."""
    from gputui.ui.run import run_monitor

    try:
        app = GputuiApp(options, handle_sighup=True, opener=opener)
    except BaseException:
        if opener is not None:
            opener.cancel()
        raise
    return run_monitor(app)


__all__ = ["DEFAULT_THEME", "WINDOWS_S", "GputuiApp", "run_app"]
