"""The monitor's keys and command-palette entries (mixed into GputuiApp)."""

from __future__ import annotations

import signal
from collections.abc import Iterable
from typing import TYPE_CHECKING, ClassVar

from textual.app import SystemCommand
from textual.screen import Screen

from gputui.safe_text import printable
from gputui.telemetry import procctl
from gputui.ui.screens.alerts import AlertsScreen
from gputui.ui.screens.confirm import ConfirmScreen
from gputui.ui.screens.help import HelpScreen
from gputui.ui.widgets.gpu_panel import window_label
from gputui.ui.widgets.process_table import COLUMNS

if TYPE_CHECKING:
    from gputui.ui.app import GputuiApp

WINDOWS_S = (60.0, 300.0, 900.0)
SIGNALS = {"TERM": signal.SIGTERM, "KILL": signal.SIGKILL}


class MonitorActions:
    """What the keys do. Screens update their own widgets; these only ask them to."""

    # Actions about what the main screen shows; on the alerts screen these keys (and
    # the arrows) belong to that screen's table.
    MAIN_ONLY: ClassVar[frozenset[str]] = frozenset({
        "signal", "sort", "sort_reverse", "toggle_compact", "cycle_window", "replay_seek",
        "replay_jump"})

    def check_action(self: GputuiApp, action: str,
                     parameters: tuple[object, ...]) -> bool | None:
        if action in self.MAIN_ONLY and self.screen is not getattr(self, "main", None):
            return False
        if action.startswith("replay_"):
            return self.player is not None
        if action == "signal":
            return self.player is None  # a recorded PID is not a process to kill now
        return True

    def action_benchmarks(self: GputuiApp) -> None:
        if self.player is not None:
            self.notify("benchmarks are not available in replay", severity="warning",
                        timeout=4)
            return
        from gputui.ui.screens.bench import toggle_bench_screen  # imported when first used

        toggle_bench_screen(self)

    def action_doctor(self: GputuiApp) -> None:
        if self.player is not None:
            self.notify("doctor checks the live GPUs: not available in replay",
                        severity="warning", timeout=4)
            return
        from gputui.ui.screens.doctor import toggle_doctor_screen  # imported when first used

        toggle_doctor_screen(self)

    def action_help(self: GputuiApp) -> None:
        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen(replay=self.player is not None))

    def action_alerts(self: GputuiApp) -> None:
        if isinstance(self.screen, AlertsScreen):
            self.pop_screen()
            return
        self.push_screen(AlertsScreen(self.alerts_data, self.job_slowdowns_data))

    def action_history(self: GputuiApp) -> None:
        """`h`: line charts of one GPU's history (the first GPU shown)."""
        from gputui.ui.screens.history import HistoryScreen

        if isinstance(self.screen, HistoryScreen):
            self.pop_screen()
            return
        snap = getattr(self, "latest", None)
        gpus = [g.index for g in snap.gpus] if snap is not None else []
        interval = self.sampler.interval if self.sampler is not None else self.options.interval
        self.push_screen(HistoryScreen(self.history, gpus[0] if gpus else 0, self.window_s,
                                       kept_s=self.history.capacity * interval))

    def action_gpu_detail(self: GputuiApp) -> None:
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

    def action_toggle_compact(self: GputuiApp) -> None:
        self.main.toggle_compact()

    def action_cycle_window(self: GputuiApp) -> None:
        i = WINDOWS_S.index(self.window_s) if self.window_s in WINDOWS_S else 0
        self.set_window(WINDOWS_S[(i + 1) % len(WINDOWS_S)])

    def set_window(self: GputuiApp, seconds: float) -> None:
        self.window_s = seconds
        self.main.show_gpus(window_s=seconds)
        self.notify(f"History window: {window_label(seconds)}", timeout=2)

    def action_cycle_theme(self: GputuiApp) -> None:
        names = self.theme_names or list(self.available_themes)
        i = names.index(self.theme) if self.theme in names else -1
        self.theme = names[(i + 1) % len(names)]
        self.notify(f"Theme: {self.theme}", timeout=2)

    def action_sort(self: GputuiApp) -> None:
        self.main.procs.cycle_sort()

    def action_sort_reverse(self: GputuiApp) -> None:
        self.main.procs.reverse_sort()

    def action_signal(self: GputuiApp, name: str) -> None:
        sig = SIGNALS[name]
        signame = f"SIG{name}"
        proc = self.main.procs.selected_process()
        if proc is None:
            self.notify("No process selected", severity="warning")
            return
        reason = procctl.check_signal(proc.pid, expected_start=proc.started)
        if reason is not None:
            self.notify(f"Cannot send {signame} to PID {proc.pid}: {reason}",
                        title="Not sent", severity="error", markup=False)
            return
        # The command line and user are anyone's: escaped, and never read as markup.
        command = printable((proc.command or "?")[:200])
        user = printable(proc.user or "unknown user")
        question = (f"Send {signame} to PID {proc.pid} ({user}) "
                    f"on GPU {proc.gpu_index}?\n\n{command}")

        def answered(yes: bool | None) -> None:
            if not yes:
                return
            error = procctl.send_signal(proc.pid, sig, expected_start=proc.started)
            if error is not None:
                self.notify(f"{signame} to PID {proc.pid} failed: {error}", title="Not sent",
                            severity="error", markup=False)
            else:
                self.notify(f"Sent {signame} to PID {proc.pid}")

        self.push_screen(ConfirmScreen(question, yes_label=f"Send {signame}",
                                       no_message=f"Cancelled: {signame} not sent to PID "
                                                  f"{proc.pid}"), answered)

    def get_system_commands(self: GputuiApp, screen: Screen) -> Iterable[SystemCommand]:
        yield from super().get_system_commands(screen)  # type: ignore[misc]
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
