"""The main screen: header, GPUs, host, processes, footer — how a frame is shown, and the
keys that act on what it shows (compact, history window, sort, signal a process).

The app hands each frame to `show`; this screen updates its own widgets from it
(and from the view's history buckets), so nothing reaches back into the sampler.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import ClassVar

from textual import events
from textual.app import ComposeResult, SystemCommand
from textual.binding import Binding, BindingType
from textual.containers import Horizontal
from textual.screen import Screen
from textual.timer import Timer

from gputui.safe_text import printable
from gputui.telemetry.frame import Frame
from gputui.telemetry.history import TickBuckets
from gputui.telemetry.model import Snapshot
from gputui.ui import keys
from gputui.ui.layout import NARROW_COLUMNS, TALL_ROWS, WIDE_COLUMNS, Layout, layout_for
from gputui.ui.memory import SETTLE_S, release_memory
from gputui.ui.messages import MonitorReady
from gputui.ui.widgets.footer import KeyFooter
from gputui.ui.widgets.gpu_area import GpuArea
from gputui.ui.widgets.gpu_panel import GpuFrame, TextLine, window_label
from gputui.ui.widgets.gpu_view import HISTORY_METRICS, metric_scale
from gputui.ui.widgets.header import AppHeader, HeaderInfo
from gputui.ui.widgets.host_panel import HostPanel
from gputui.ui.widgets.jobs_box import JobsBox
from gputui.ui.widgets.process_table import COLUMNS, ProcessTable

PROCESS_REFRESH_S = 3.0
WINDOWS_S = (60.0, 300.0, 900.0)  # the sparklines' history windows, `w` cycles them
DEFAULT_WINDOW_S = 300.0
OPENING = "Opening NVML…"  # the notice until the first frame


@dataclass(frozen=True)
class FirstShow:
    """What the screen shows in its first paint, when the app has a reading before the
    screen is built (`show`'s arguments)."""

    frame: Frame
    buckets: TickBuckets
    header: HeaderInfo


class MonitorScreen(Screen[None]):
    # The monitor's keys in its footer's order: the app's (they work on every screen) and
    # its own. The replay's seek and jump are priority bindings (the process table would
    # take the arrows and home/end) that only the app's check_action enables, in replay.
    BINDINGS: ClassVar[list[BindingType]] = [
        keys.QUIT, keys.HELP, keys.ALERTS, keys.BENCHMARKS, keys.DOCTOR,
        Binding("c", "toggle_compact", "Compact"),
        Binding("w", "cycle_window", "Window"),
        keys.THEME,
        Binding("s", "sort", "Sort"),
        Binding("S", "sort_reverse", "Reverse sort", show=False),
        Binding("k", "signal('TERM')", "Terminate"),
        Binding("K", "signal('KILL')", "Kill", show=False),
        keys.GPU_INFO, keys.HISTORY,
        keys.PLAY_PAUSE, keys.STEP, keys.STEP_BACK,
        Binding("right", "app.replay('seek', 10)", "+10s", priority=True),
        Binding("left", "app.replay('seek', -10)", "-10s", priority=True),
        keys.FASTER, keys.SLOWER,
        Binding("home", "app.replay('start')", "Start", show=False, priority=True),
        Binding("end", "app.replay('end')", "End", show=False, priority=True),
    ]

    def __init__(self, first: FirstShow | None = None, *, replay: bool = False) -> None:
        """`first`: a reading to build the GPUs' widgets for and show in the first paint
        (else they are mounted when the first frame comes). `replay`: the frames are a
        recording's (its PIDs are no processes to signal now)."""
        super().__init__()
        self._first = first
        self.replay = replay
        self.window_s = DEFAULT_WINDOW_S  # the sparklines' history window
        self.gpus: GpuArea | None = None  # found once mounted
        self.host_only_reason: str | None = None
        self.compact_override: bool | None = None
        self._mount_lock = asyncio.Lock()
        self._procs_shown_at = -1e18
        self._frame: Frame | None = None
        self._buckets: TickBuckets | None = None
        # GPU index → metric → the last known top of its sparkline (see GpuFrame.scales).
        self._scales: dict[int, dict[str, float]] = {}
        self._release_timer: Timer | None = None
        self._notice: str | None = OPENING  # what the notice line says (None: hidden)
        self._resumed = False

    def on_screen_resume(self, event: events.ScreenResume) -> None:
        # Shown for the first time, its widgets were styled as they were mounted, with the
        # theme already set: Textual would restyle them all once more (~12 ms of the first
        # frame). Later resumes (back from another screen) restyle as usual.
        if not self._resumed:
            event.refresh_styles = False
            self._resumed = True

    def compose(self) -> ComposeResult:
        width, height = self.app.size
        self._size_classes(width, height)  # now, not with the first resize: one layout
        yield AppHeader(id="header")
        yield TextLine(OPENING, id="notice")
        if self._first is not None and self._first.frame.snapshot.gpus:
            infos = tuple(g.info for g in self._first.frame.snapshot.gpus)
            yield GpuArea(id="gpus", devices=infos, layout=self._layout(len(infos)))
        else:
            yield GpuArea(id="gpus")
        yield JobsBox(id="jobs")
        with Horizontal(id="bottom"):
            yield HostPanel(id="host")
            yield ProcessTable(id="procs")
        yield KeyFooter()

    async def on_mount(self) -> None:
        self.header = self.query_one(AppHeader)
        self.notice = self.query_one("#notice", TextLine)
        self.gpus = self.query_one(GpuArea)
        self.host = self.query_one(HostPanel)
        self.procs = self.query_one(ProcessTable)
        self.jobs = self.query_one(JobsBox)
        self.procs.focus()
        first, self._first = self._first, None
        if first is not None:  # before the first paint, which comes after on_mount
            self.take(first.frame)
            await self.show(first.frame, first.buckets, first.header)
        self.post_message(MonitorReady())  # bubbles to the app

    def on_resize(self, event: events.Resize) -> None:
        # The terminal changed size: panels or compact rows, and how many columns.
        self.relayout()
        # Once the size settles, give back what rendering at every passing width took.
        if self._release_timer is not None:
            self._release_timer.stop()
        self._release_timer = self.set_timer(SETTLE_S, release_memory)

    # --- showing a frame ------------------------------------------------------------------

    def take(self, frame: Frame) -> None:
        """Every frame (drawn or not) updates the sparkline scales."""
        self.jobs.take(frame)
        for snap in (*frame.catch_up, frame.snapshot):
            for g in snap.gpus:
                known = self._scales.setdefault(g.index, {})
                for metric, _label in HISTORY_METRICS:
                    scale = metric_scale(g, metric)
                    if scale:
                        known[metric] = scale

    async def show(self, frame: Frame, buckets: TickBuckets, header: HeaderInfo) -> None:
        snap = frame.snapshot
        if snap.nvml_error and not snap.gpus:
            self.set_host_only(snap.nvml_error)
        elif self.host_only_reason is not None and snap.gpus:
            self.set_host_only(None)
        if self.host_only_reason is None:
            self.show_gpm_note(snap)  # and "Opening NVML…" goes with the first frame
        infos = tuple(g.info for g in snap.gpus)
        if tuple(i.index for i in infos) != self.gpus.indices:
            async with self._mount_lock:  # two frames must not both mount panels
                self.relayout(len(infos))  # first: mount only the kind that will be shown
                await self.gpus.set_devices(infos)
            self.relayout()
        self.show_gpus(frame, buckets)
        self.host.update_host(snap.host)
        self.jobs.show(frame)
        self.update_processes(snap)
        self.set_header(header)

    def set_header(self, header: HeaderInfo) -> None:
        self.header.set_info(header)

    def show_gpus(self, frame: Frame | None = None, buckets: TickBuckets | None = None) -> None:
        """Redraw the GPUs (from the last frame when called without one)."""
        self._frame = frame or self._frame
        self._buckets = buckets or self._buckets
        f, b = self._frame, self._buckets
        if f is None or b is None:
            return
        snap = f.snapshot
        self.gpus.update_frames([GpuFrame(g, f.ongoing.get(g.index), snap.time, b,
                                          self.window_s, self._scales.get(g.index, {}))
                                 for g in snap.gpus])

    def update_processes(self, snap: Snapshot) -> None:
        """A DataTable repaints whole on any cell change: when only CPU% and running
        times moved, repaint at most every PROCESS_REFRESH_S of snapshot time (a replay
        moves in jumps: every frame)."""
        listed = {f"{p.gpu_index}:{p.pid}" for p in snap.processes}
        now = snap.time.timestamp()
        if (listed == set(self.procs.processes) and not self.replay
                and abs(now - self._procs_shown_at) < PROCESS_REFRESH_S):
            return
        self._procs_shown_at = now
        self.procs.update_processes(snap.processes, now)

    def show_gpm_note(self, snap: Snapshot) -> None:
        """Why SM active is missing (another profiler holds the counters): one line for
        all the GPUs it concerns, shown while it lasts — not a toast per GPU and tick."""
        notes: dict[str, list[int]] = {}
        for g in snap.gpus:
            if g.gpm_note:
                notes.setdefault(g.gpm_note, []).append(g.index)
        text = None
        if notes:
            note, gpus = next(iter(notes.items()))
            which = "GPU " + ", ".join(map(str, gpus))
            text = f"ⓘ {which}: {printable(note)}"
        if text != self._notice:
            self.set_notice(text, "warning")

    def set_notice(self, text: str | None, severity: str | None = None) -> None:
        self._notice = text
        self.notice.display = text is not None
        if text is not None:
            self.notice.set_text(text, severity)

    def set_host_only(self, reason: str | None) -> None:
        if reason == self.host_only_reason:
            return
        self.host_only_reason = reason
        self.set_class(reason is not None, "-host-only")
        self.set_notice(None if reason is None else f"⚠ No GPU monitoring: {reason}",
                        "warning")

    # --- sizing ---------------------------------------------------------------------------

    def relayout(self, n: int | None = None) -> None:
        """Choose panels or compact rows, and panel columns, for this size and GPU count
        (`n`: the count about to be shown; default, the GPUs mounted now)."""
        area = self.gpus
        if area is None:  # not mounted yet
            return
        width, height = self.app.size
        self._size_classes(width, height)
        lay = self._layout(len(area.indices) if n is None else n)
        was = area.compact
        area.set_layout(lay.compact, lay.columns, lay.spark_rows, lay.row_lines)
        if lay.compact != was:
            self.show_gpus()  # the other kind of widget was not kept up to date

    def _size_classes(self, width: int, height: int) -> None:
        self.set_class(width < NARROW_COLUMNS, "-narrow")
        self.set_class(width >= WIDE_COLUMNS, "-wide")
        self.set_class(height >= TALL_ROWS, "-tall")

    def _layout(self, n: int) -> Layout:
        """The layout for `n` GPUs at this size (compact as the user forced it, if so)."""
        lay = layout_for(*self.app.size, n)
        if self.compact_override is not None:
            lay = replace(lay, compact=self.compact_override)
        return lay

    def toggle_compact(self) -> None:
        want = not self.gpus.compact
        auto = layout_for(*self.app.size, len(self.gpus.indices)).compact
        # Pressing c again to get back to what the size suggests returns to automatic.
        self.compact_override = None if want == auto else want
        self.relayout()

    # --- keys -----------------------------------------------------------------------------

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "signal":
            return not self.replay  # a recorded PID is not a process to signal now
        return True

    def action_toggle_compact(self) -> None:
        self.toggle_compact()

    def action_cycle_window(self) -> None:
        i = WINDOWS_S.index(self.window_s) if self.window_s in WINDOWS_S else 0
        self.set_window(WINDOWS_S[(i + 1) % len(WINDOWS_S)])

    def set_window(self, seconds: float) -> None:
        self.window_s = seconds
        self.show_gpus()
        self.notify(f"History window: {window_label(seconds)}", timeout=2)

    def action_sort(self) -> None:
        self.procs.cycle_sort()

    def action_sort_reverse(self) -> None:
        self.procs.reverse_sort()

    def action_signal(self, name: str) -> None:
        from gputui.ui.process_signal import SignalRequest
        from gputui.ui.screens.confirm import ConfirmScreen

        proc = self.procs.selected_process()
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

        self.app.push_screen(ConfirmScreen(request.question(),
                                           yes_label=f"Send {request.signame}",
                                           no_message=request.cancelled()), answered)

    def chosen_gpu(self) -> int:
        """The GPU `i` shows: the selected process's, else the first shown (0 before any)."""
        gpus = [g.index for g in self._frame.snapshot.gpus] if self._frame is not None else []
        selected = self.procs.selected_process()
        if selected is not None and selected.gpu_index in gpus:
            return selected.gpu_index
        return gpus[0] if gpus else 0

    def system_commands(self) -> Iterator[SystemCommand]:
        """The command palette's entries for what this screen shows."""
        yield SystemCommand("Compact mode: toggle", "One line per GPU, or full panels (c)",
                            self.toggle_compact)
        for seconds in WINDOWS_S:
            yield SystemCommand(f"History window: {window_label(seconds)}",
                                "Time span of the sparklines (w cycles)",
                                lambda s=seconds: self.set_window(s))
        for col in COLUMNS:
            yield SystemCommand(f"Sort processes by {col.label}", "s cycles, S reverses",
                                lambda k=col.key: self.procs.set_sort(k))
