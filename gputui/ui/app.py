"""The live monitor: the Textual app that `gputui` opens (and `gputui replay` reuses).

Data flow: a Sampler thread reads NVML and psutil and hands each immutable
Snapshot to `_listener`, which hops onto the event loop with `call_from_thread`.
`_on_snapshot` then updates only the widgets whose data changed. In replay mode
there is no thread: a timer advances a ReplayPlayer that feeds the same kind of
Sampler on the event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import os
import signal
import threading
import time
from collections.abc import Iterable
from dataclasses import replace
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from textual.app import App, SystemCommand
from textual.binding import Binding, BindingType
from textual.css.query import NoMatches
from textual.screen import Screen

from gputui.telemetry import procctl
from gputui.telemetry.alerts import Alert, AlertEngine
from gputui.telemetry.model import Snapshot
from gputui.telemetry.record import Recorder
from gputui.telemetry.sampler import Sampler
from gputui.telemetry.throttle import ThrottleEpisode
from gputui.ui.messages import SamplerOpened, SnapshotShown
from gputui.ui.options import AppOptions
from gputui.ui.screens.alerts import AlertsScreen
from gputui.ui.screens.confirm import ConfirmScreen
from gputui.ui.screens.help import HelpScreen
from gputui.ui.screens.monitor import MonitorScreen
from gputui.ui.terminal_watch import watch_terminal
from gputui.ui.themes import DEFAULT_THEME, load_themes, pick_theme, resolve_theme
from gputui.ui.widgets.gpu_panel import (
    PANEL_HEIGHT,
    PANEL_MIN_WIDTH,
    SPARK_ROWS_MAX,
    GpuFrame,
    panel_height,
    window_label,
)
from gputui.ui.widgets.header import HeaderInfo
from gputui.ui.widgets.process_table import COLUMNS

if TYPE_CHECKING:
    from gputui.telemetry.replay import ReplayPlayer

WINDOWS_S = (60.0, 300.0, 900.0)
DEFAULT_WINDOW_S = 300.0
BOTTOM_MIN_ROWS = 10  # host panel + a few process rows must stay visible under the GPUs
BOTTOM_ROOMY_ROWS = 20  # taller sparklines only if the bottom keeps at least this much
WIDE_COLUMNS = 180  # from here the host panel is wider (per-core bars in more columns)
TALL_ROWS = 60  # from here the host is a strip above a full-width process table
REPLAY_TICK_S = 0.1
PROCESS_REFRESH_S = 3.0
SIGNALS = {"TERM": signal.SIGTERM, "KILL": signal.SIGKILL}


class GputuiApp(App[int]):
    CSS_PATH = "app.tcss"
    TITLE = "gputui"
    ENABLE_COMMAND_PALETTE = True

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("q", "quit", "Quit"),
        Binding("question_mark", "help", "Help"),
        Binding("a", "alerts", "Alerts"),
        Binding("b", "benchmarks", "Benchmarks"),
        Binding("c", "toggle_compact", "Compact"),
        Binding("w", "cycle_window", "Window"),
        Binding("t", "cycle_theme", "Theme"),
        Binding("s", "sort", "Sort"),
        Binding("S", "sort_reverse", "Reverse sort", show=False),
        Binding("k", "signal('TERM')", "Terminate"),
        Binding("K", "signal('KILL')", "Kill", show=False),
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

    def __init__(self, options: AppOptions | None = None, *, sampler: Sampler | None = None,
                 start_sampler: bool = True, recorder: Recorder | None = None,
                 handle_sighup: bool = False, theme_dirs: list[Path] | None = None) -> None:
        super().__init__()
        self.options = options or AppOptions()
        self.sampler: Sampler | None = sampler
        self._own_sampler = sampler is None  # we close what we opened, not what we were given
        self._start_sampler = start_sampler
        self.recorder = recorder
        self._record_error_shown = False
        if self.recorder is None and self.options.record_path and self.options.replay is None:
            # Raises UsageError (one line, exit 2) before the app starts.
            self.recorder = Recorder(self.options.record_path, interval=self.options.interval)
        self._handle_sighup = handle_sighup
        self.player: ReplayPlayer | None = None
        self.alert_engine = AlertEngine()
        self.window_s = DEFAULT_WINDOW_S
        self.latest: Snapshot | None = None
        self.host_only_reason: str | None = None
        self._compact_override: bool | None = None
        self._quitting = False
        self._loop_thread: int | None = None
        self._replay_clock = 0.0
        self._replay_pos = -1
        self._mount_lock = asyncio.Lock()
        self._procs_shown_at = -1e18
        self._handoff_lock = threading.Lock()
        self._pending_sampler: Sampler | None = None
        themes, self._theme_warnings = load_themes(theme_dirs)
        for theme in themes:
            self.register_theme(theme)
        self.theme_names = [t.name for t in themes]

    # --- layout ---------------------------------------------------------------------------

    def get_default_screen(self) -> MonitorScreen:
        self.main = MonitorScreen()
        return self.main

    def on_mount(self) -> None:
        self._loop_thread = threading.get_ident()
        requested = pick_theme(self.options.theme, os.environ)
        name, warning = resolve_theme(requested, self.available_themes)
        if name not in self.available_themes:  # shipped themes missing: Textual's default
            name = "textual-dark"
        self.theme = name
        for w in self._theme_warnings:
            self.notify(w, severity="warning", timeout=8)
        if warning:
            self.notify(warning, severity="warning", timeout=8)

    def monitor_ready(self) -> None:
        """Called by MonitorScreen once its widgets exist: start feeding them."""
        self._loop_thread = threading.get_ident()
        if self.options.replay is not None:
            self._start_replay()
        elif self.sampler is not None:
            self._attach(self.sampler)
        else:
            self._open_sampler()

    def _on_hangup(self, signum: int = signal.SIGHUP, frame: object = None) -> None:
        """The terminal is gone (ssh dropped, tmux killed).

        Close what matters (the recording, NVML) and leave at once: a normal Textual
        shutdown writes terminal-reset sequences, and with the pty gone that write can
        block forever (seen with tmux kill-server during start-up), leaving an orphan.
        """
        self._quitting = True
        with contextlib.suppress(Exception):
            if self.sampler is not None:
                # Short: its thread may be waiting on the (blocked) event loop.
                self.sampler.stop(timeout=0.5)
            if self.recorder is not None:
                self.recorder.close()  # every line was flushed as written; this ends it
        os._exit(0)

    # --- the sampler ----------------------------------------------------------------------

    def _open_sampler(self) -> None:
        """NVML init can take seconds on a big machine: never on the event loop.

        A plain daemon thread, and a non-blocking hand-off (post_message): if the user
        quits (or the terminal hangs up) while NVML is opening, nothing at exit waits
        for this thread, and this thread never waits for a loop that is shutting down.
        """
        threading.Thread(target=self._open_sampler_thread, name="gputui-nvml-open",
                         daemon=True).start()

    def _open_sampler_thread(self) -> None:
        from gputui.telemetry.nvml import ALL_FIELDS, MONITOR_FIELDS

        # Ask NVML only for what the screen shows; a recording keeps everything but PCIe
        # throughput, which costs ~20 ms of driver time per GPU per call.
        fields = (ALL_FIELDS - {"pcie_throughput"}) if self.recorder is not None \
            else MONITOR_FIELDS
        sampler = Sampler.open(interval=self.options.interval, fields=fields)
        with self._handoff_lock:
            if self._quitting or not self.post_message(SamplerOpened(sampler)):
                sampler.close()
                return
            self._pending_sampler = sampler

    def on_sampler_opened(self, message: SamplerOpened) -> None:
        with self._handoff_lock:
            self._pending_sampler = None
        sampler = message.sampler
        assert isinstance(sampler, Sampler)
        if self._quitting:
            sampler.close()
            return
        self.sampler = sampler
        self._attach(sampler)

    def _attach(self, sampler: Sampler) -> None:
        if self.recorder is not None:
            sampler.subscribe(self.recorder.write)  # written and flushed on the sampler thread
        sampler.subscribe(self._listener)
        if sampler.nvml is None and sampler.nvml_error:
            self._set_host_only(sampler.nvml_error)
        else:
            self._set_notice(None)
        if self._start_sampler:
            sampler.start()

    def _listener(self, snap: Snapshot) -> None:
        """Called on whichever thread ingested the snapshot."""
        if self._quitting:
            return
        if threading.get_ident() == self._loop_thread:
            # Fed on the event loop (tests, replay): queue it behind pending work.
            self.call_later(self._on_snapshot, snap)
            return
        with contextlib.suppress(RuntimeError):  # app closing: nothing left to draw on
            self.call_from_thread(self._on_snapshot, snap)

    def exit(self, *args: object, **kwargs: object) -> None:  # type: ignore[override]
        self._quitting = True
        if self.sampler is not None:
            # Unsubscribe first so the sampler thread never waits on a closing loop.
            self.sampler.unsubscribe(self._listener)
        super().exit(*args, **kwargs)  # type: ignore[arg-type]

    async def on_unmount(self) -> None:
        self._quitting = True
        # A benchmark worker must not outlive the app (SIGTERM, then SIGKILL; off the loop).
        from gputui.ui.bench_session import stop_benchmarks

        await stop_benchmarks(self)
        await asyncio.to_thread(self._stop_background)

    def _stop_background(self) -> None:
        with self._handoff_lock:
            pending, self._pending_sampler = self._pending_sampler, None
        if pending is not None:  # opened, but the app quit before taking it
            pending.close()
        sampler = self.sampler
        if sampler is not None:
            sampler.unsubscribe(self._listener)
            if self._own_sampler:
                sampler.close()
            elif self._start_sampler:
                sampler.stop()
            if self.recorder is not None:
                sampler.unsubscribe(self.recorder.write)
        if self.recorder is not None:
            self.recorder.close()

    # --- taking in a snapshot -------------------------------------------------------------

    async def _on_snapshot(self, snap: Snapshot) -> None:
        if self._quitting or not self.is_running:
            return
        if self.player is None:
            self._run_alerts(snap)
        if self.recorder is not None and self.recorder.error and not self._record_error_shown:
            self._record_error_shown = True
            self.notify(self.recorder.error, title="Recording stopped", severity="error",
                        timeout=30)
        try:
            await self._show(snap)
        except NoMatches:  # shutting down while a snapshot was in flight
            return

    def _run_alerts(self, snap: Snapshot) -> None:
        ongoing = self.sampler.ongoing() if self.sampler is not None else {}
        for alert in self.alert_engine.update(snap, ongoing):
            self._toast(alert)

    def _toast(self, alert: Alert) -> None:
        title = "GPU alert" if alert.severity == "warning" else "GPU error"
        self.notify(alert.message, title=title, severity=alert.severity,
                    timeout=10 if alert.severity == "error" else 6)

    async def _show(self, snap: Snapshot) -> None:
        self.latest = snap
        if snap.nvml_error and not snap.gpus:
            self._set_host_only(snap.nvml_error)
        elif self.host_only_reason is not None and snap.gpus:
            self._set_host_only(None)
        area = self.main.gpus
        infos = tuple(g.info for g in snap.gpus)
        if tuple(i.index for i in infos) != area.indices:
            async with self._mount_lock:  # two snapshots must not both mount panels
                self.relayout(len(infos))  # first: mount only the kind that will be shown
                await area.set_devices(infos)
            self.relayout()
        self._update_gpus()
        self.main.host.update_host(snap.host)
        self._update_processes(snap)
        self._update_header()
        if self.screen is not self.main:
            self.screen.post_message(SnapshotShown(snap))

    def _update_processes(self, snap: Snapshot) -> None:
        """A DataTable repaints whole on any cell change: when only CPU% and running
        times moved, repaint at most every PROCESS_REFRESH_S of snapshot time."""
        table = self.main.procs
        keys = {f"{p.gpu_index}:{p.pid}" for p in snap.processes}
        now = snap.time.timestamp()
        if (keys == set(table.processes) and self.player is None
                and abs(now - self._procs_shown_at) < PROCESS_REFRESH_S):
            return
        self._procs_shown_at = now
        table.update_processes(snap.processes, now)

    def _update_gpus(self) -> None:
        snap = self.latest
        if snap is None or self.sampler is None:
            return
        ongoing = self.sampler.ongoing()
        history = self.sampler.history
        frames = [GpuFrame(g, ongoing.get(g.index), snap.time, history, self.window_s)
                  for g in snap.gpus]
        self.main.gpus.update_frames(frames)

    def _update_header(self) -> None:
        snap = self.latest
        active = self.alert_engine.active()
        info = HeaderInfo(
            hostname=snap.host.hostname if snap else "",
            driver=snap.system.driver_version if snap else None,
            cuda=snap.system.cuda_driver_version if snap else None,
            time=snap.time if snap else None,
            interval_s=self.options.interval,
            alerts=len(active),
            errors=sum(a.severity == "error" for a in active),
            skipped_ticks=snap.skipped_ticks if snap else 0,
        )
        bench = self._bench_header()
        if bench:
            info = replace(info, bench=bench)
        if self.player is not None:
            p = self.player
            assert self.options.replay is not None
            info = replace(info, replay=self.options.replay.path.name, playing=p.playing,
                           speed=p.speed, elapsed_s=p.elapsed_s, duration_s=p.duration_s)
        self.main.header.set_info(info)

    def _bench_header(self) -> str | None:
        """"cnn-train 42%" while a benchmark runs (started from the bench screen)."""
        from gputui.ui.bench_session import SESSION_ATTR

        session = getattr(self, SESSION_ATTR, None)
        live = session.current if session is not None else None
        if live is None or live.finished:
            return None
        frac = live.fraction
        name = str(live.spec.get("benchmark"))
        if live.stage == "cancelling":
            return f"{name} cancelling"
        return name if frac is None else f"{name} {100 * frac:.0f}%"

    def bench_changed(self) -> None:
        """Called by the BenchSession (on the event loop) when a run starts, moves, ends."""
        if getattr(self, "main", None) is not None and self.main.is_mounted:
            self._update_header()

    def _set_notice(self, text: str | None, severity: str | None = None) -> None:
        notice = self.main.notice
        notice.display = text is not None
        if text is not None:
            notice.set_text(text, severity)

    def _set_host_only(self, reason: str | None) -> None:
        if reason == self.host_only_reason:
            return
        self.host_only_reason = reason
        self.main.set_class(reason is not None, "-host-only")
        self._set_notice(None if reason is None else f"⚠ No GPU monitoring: {reason}",
                         "warning")

    # --- sizing ---------------------------------------------------------------------------

    def _layout_for(self, width: int, height: int, n: int) -> tuple[bool, int, int]:
        """(auto compact?, panel columns, sparkline rows) for a terminal size and GPU
        count. Sparklines grow (up to SPARK_ROWS_MAX rows) only when the panels still
        leave BOTTOM_ROOMY_ROWS for the host and the processes."""
        if n == 0:
            return False, 1, 1
        cols = max(1, min(n, width // PANEL_MIN_WIDTH))
        rows = math.ceil(n / cols)
        room = height - 2 - BOTTOM_MIN_ROWS  # header, footer
        spark = next((h for h in range(SPARK_ROWS_MAX, 1, -1)
                      if rows * panel_height(h) <= height - 2 - BOTTOM_ROOMY_ROWS), 1)
        return rows * PANEL_HEIGHT > room, cols, spark

    @property
    def compact(self) -> bool:
        return self.main.gpus.compact

    def relayout(self, n: int | None = None) -> None:
        """Choose panels or compact rows, and panel columns, for this size and GPU count
        (`n`: the count about to be shown; default, the GPUs mounted now)."""
        area = getattr(self.main, "gpus", None)
        if area is None:  # not mounted yet
            return
        width, height = self.size
        self.main.set_class(width < 100, "-narrow")
        self.main.set_class(width >= WIDE_COLUMNS, "-wide")
        self.main.set_class(height >= TALL_ROWS, "-tall")
        auto, cols, spark = self._layout_for(width, height,
                                             len(area.indices) if n is None else n)
        compact = auto if self._compact_override is None else self._compact_override
        was = area.compact
        area.set_layout(compact, cols, spark)
        if compact != was:
            self._update_gpus()  # the other kind of widget was not kept up to date

    # --- actions --------------------------------------------------------------------------

    # Actions about what the main screen shows; on the alerts screen these keys (and
    # the arrows) belong to that screen's table.
    MAIN_ONLY: ClassVar[frozenset[str]] = frozenset({
        "signal", "sort", "sort_reverse", "toggle_compact", "cycle_window", "replay_seek",
        "replay_jump"})

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action in self.MAIN_ONLY and self.screen is not getattr(self, "main", None):
            return False
        if action.startswith("replay_"):
            return self.player is not None
        if action == "signal":
            return self.player is None  # a recorded PID is not a process to kill now
        return True

    def action_benchmarks(self) -> None:
        if self.player is not None:
            self.notify("benchmarks are not available in replay", severity="warning",
                        timeout=4)
            return
        from gputui.ui.screens.bench import toggle_bench_screen  # imported when first used

        toggle_bench_screen(self)

    def action_help(self) -> None:
        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen(replay=self.player is not None))

    def action_alerts(self) -> None:
        if isinstance(self.screen, AlertsScreen):
            self.pop_screen()
            return
        self.push_screen(AlertsScreen(self.alerts_data))

    def alerts_data(self) -> tuple[tuple[ThrottleEpisode, ...], list[Alert], datetime | None]:
        """What the alerts screen shows: episodes, active alerts, and "now" for durations."""
        episodes = self.sampler.episodes() if self.sampler is not None else ()
        now = self.latest.time if self.latest else None
        return episodes, self.alert_engine.active(), now

    def action_toggle_compact(self) -> None:
        area = self.main.gpus
        want = not area.compact
        auto, _, _ = self._layout_for(*self.size, len(area.indices))
        # Pressing c again to get back to what the size suggests returns to automatic.
        self._compact_override = None if want == auto else want
        self.relayout()

    def action_cycle_window(self) -> None:
        i = WINDOWS_S.index(self.window_s) if self.window_s in WINDOWS_S else 0
        self.set_window(WINDOWS_S[(i + 1) % len(WINDOWS_S)])

    def set_window(self, seconds: float) -> None:
        self.window_s = seconds
        self._update_gpus()
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
        sig = SIGNALS[name]
        signame = f"SIG{name}"
        proc = self.main.procs.selected_process()
        if proc is None:
            self.notify("No process selected", severity="warning")
            return
        reason = procctl.check_signal(proc.pid, expected_start=proc.started)
        if reason is not None:
            self.notify(f"Cannot send {signame} to PID {proc.pid}: {reason}",
                        title="Not sent", severity="error")
            return
        command = (proc.command or "?")[:200]
        question = (f"Send {signame} to PID {proc.pid} ({proc.user or 'unknown user'}) "
                    f"on GPU {proc.gpu_index}?\n\n{command}")

        def answered(yes: bool | None) -> None:
            if not yes:
                return
            error = procctl.send_signal(proc.pid, sig, expected_start=proc.started)
            if error is not None:
                self.notify(f"{signame} to PID {proc.pid} failed: {error}", title="Not sent",
                            severity="error")
            else:
                self.notify(f"Sent {signame} to PID {proc.pid}")

        self.push_screen(ConfirmScreen(question, yes_label=f"Send {signame}"), answered)

    # --- replay ---------------------------------------------------------------------------

    def _start_replay(self) -> None:
        from gputui.telemetry.replay import ReplayPlayer

        rec = self.options.replay
        assert rec is not None
        sampler = self.sampler or Sampler(interval=max(0.1, rec.interval_s or 1.0), nvml=None)
        self.sampler = sampler
        self._own_sampler = False
        self._start_sampler = False
        # The player runs on the event loop: its listener only runs the alert rules on
        # every snapshot; the screen is drawn once per timer tick, not per snapshot.
        sampler.subscribe(self._replay_listener)
        self.player = ReplayPlayer(rec, sampler, speed=self.options.replay_speed)
        for w in rec.warnings:
            self.notify(w, severity="warning", timeout=8)
        self._set_notice(None)
        self._replay_clock = time.monotonic()
        self.set_interval(REPLAY_TICK_S, self._replay_tick)
        self.call_later(self._replay_draw)

    def _replay_listener(self, snap: Snapshot) -> None:
        # The player ingests its first snapshot while being constructed (player unset).
        pos = self.player.position if self.player is not None else 0
        if pos < self._replay_pos:
            self.alert_engine.reset()  # a seek backwards starts the story over
        self._replay_pos = pos
        self._run_alerts(snap)

    async def _replay_tick(self) -> None:
        now = time.monotonic()
        dt, self._replay_clock = now - self._replay_clock, now
        if self.player is not None and self.player.advance(dt):
            await self._replay_draw()
        elif self.player is not None:
            self._update_header()  # elapsed time moves between snapshots

    async def _replay_draw(self) -> None:
        if self.sampler is None or self.sampler.latest is None or self._quitting:
            return
        with contextlib.suppress(NoMatches):
            await self._show(self.sampler.latest)

    async def _after_replay_move(self, changed: bool) -> None:
        if changed:
            await self._replay_draw()
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

    # --- command palette ------------------------------------------------------------------

    def get_system_commands(self, screen: Screen) -> Iterable[SystemCommand]:
        yield from super().get_system_commands(screen)
        yield SystemCommand("Alerts", "Throttle episodes and active alerts (a)",
                            self.action_alerts)
        yield SystemCommand("Benchmarks", "Run, queue and compare benchmarks (b)",
                            self.action_benchmarks)
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


def run_app(options: AppOptions) -> int:
    """Run the monitor in this terminal; returns the exit code."""
    app = GputuiApp(options, handle_sighup=True)  # may raise UsageError (bad --record path)
    # A plain signal handler, not the event loop's: when the pty is gone, Textual's
    # writer can block the loop thread in a queue put, and a loop callback would never
    # run; a Python-level handler still does (blocking lock waits are interruptible).
    previous = signal.signal(signal.SIGHUP, app._on_hangup)
    # No SIGHUP at all (tmux server SIGKILLed, SIGHUP ignored): Textual then reads EOF
    # in a loop at 100 % CPU forever. A watcher thread notices the dead tty instead.
    stop_watch = watch_terminal(app._on_hangup)
    try:
        result = app.run()
    finally:
        stop_watch.set()
        signal.signal(signal.SIGHUP, previous)
        if app.recorder is not None:
            app.recorder.close()
        if app.sampler is not None and app._own_sampler:
            app.sampler.close()
    if app.return_code not in (None, 0):
        return app.return_code
    return int(result or 0)


__all__ = ["DEFAULT_THEME", "GputuiApp", "run_app"]
