"""`b`: run benchmarks from the monitor and watch them beside the GPU that runs them.

Left: the form and the queue (gputui.ui.widgets.bench_form). Right: the run in progress,
or the last one (gputui.ui.widgets.bench_live). Bottom: saved results; mark two with space
and press c to compare them (gputui.ui.screens.bench_compare).

The runs themselves live in the app's BenchSession (gputui/ui/bench_session.py), so
leaving this screen does not stop a run; the session posts BenchChanged here and this
screen updates its own widgets.
"""

from __future__ import annotations

import contextlib
from datetime import UTC, datetime
from typing import Any, ClassVar

from textual import on
from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal
from textual.css.query import NoMatches
from textual.screen import Screen
from textual.widgets import Button, Input, Static

from gputui.bench.request import RunRequest
from gputui.telemetry.model import Snapshot
from gputui.ui.bench_messages import BenchChanged
from gputui.ui.bench_session import BenchSession, LiveRun
from gputui.ui.messages import SnapshotShown
from gputui.ui.screens.bench_compare import CompareScreen
from gputui.ui.widgets.bench_form import (
    BenchForm,
    CatalogList,
    QueueList,
    parse_form,
)
from gputui.ui.widgets.bench_live import LiveRunView, stderr_lines
from gputui.ui.widgets.bench_results import ResultsTable
from gputui.ui.widgets.footer import KeyFooter

__all__ = ["BenchScreen", "CatalogList", "CompareScreen", "QueueList", "ResultsTable",
           "parse_form", "stderr_lines", "toggle_bench_screen"]


class BenchScreen(Screen[None]):
    COMPONENT_CLASSES: ClassVar[set[str]] = {"status--ok", "status--cancelled",
                                              "status--failed"}
    DEFAULT_CSS = """
    BenchScreen { layout: vertical; }
    BenchScreen > .status--ok { color: $success; }
    BenchScreen > .status--cancelled { color: $warning; }
    BenchScreen > .status--failed { color: $error; }
    BenchScreen > .title { height: 1; padding: 0 1; background: $primary 30%;
                           text-style: bold; }
    BenchScreen #bench-top { height: 2fr; min-height: 14; }
    BenchScreen #bench-left { width: 46; border: round $primary 60%; padding: 0 1;
                              scrollbar-size-vertical: 1; }
    BenchScreen #bench-live { width: 1fr; border: round $primary 60%; padding: 0 1;
                              scrollbar-size-vertical: 1; }
    BenchScreen .section { color: $text-muted; text-style: bold; margin-top: 1; }
    BenchScreen #catalog { height: auto; max-height: 8; border: none; border-left: blank;
                           padding: 0; }
    BenchScreen #catalog-desc { color: $text-muted; height: auto; }
    BenchScreen .field { height: 1; margin-bottom: 0; }
    BenchScreen .field > Label { width: 12; color: $text-muted; }
    BenchScreen .field > Input { width: 1fr; }
    BenchScreen .field > Select { width: 1fr; }
    BenchScreen #form-error { color: $error; text-style: bold; height: auto; }
    BenchScreen #buttons { height: 1; margin-top: 1; }
    BenchScreen #buttons Button { margin-right: 1; min-width: 8; }
    BenchScreen #flags { height: auto; layout: grid; grid-size: 2; grid-rows: 1;
                         grid-columns: 1fr 1fr; }
    BenchScreen #flags Checkbox { height: 1; }
    BenchScreen #queue-title { height: 1; color: $text; }
    BenchScreen #queue-list { height: auto; max-height: 6; border: none; border-left: blank;
                              padding: 0; }
    BenchScreen #live-title { text-style: bold; height: auto; }
    BenchScreen #live-progress-row { height: 1; }
    BenchScreen #live-progress { height: 1; width: 1fr; }
    BenchScreen #live-progress Bar { width: 1fr; }
    BenchScreen #live-time { width: auto; margin-left: 1; color: $text-muted; }
    BenchScreen #tp-label { color: $text-muted; }
    BenchScreen #live-numbers { height: 3; }
    BenchScreen #tp-side { width: auto; padding-left: 2; }
    BenchScreen #tp-unit { width: auto; text-style: bold; }
    BenchScreen #tp-now { width: auto; color: $text-muted; }
    BenchScreen Digits { width: auto; }
    BenchScreen #callout { height: auto; color: $error; text-style: bold; }
    BenchScreen #callout.-ok { color: $success; text-style: none; }
    BenchScreen #live-stats { height: auto; }
    BenchScreen #telemetry { height: auto; color: $accent; }
    BenchScreen #live-error { height: auto; color: $error; border: round $error;
                              padding: 0 1; display: none; }
    BenchScreen #live-error.-shown { display: block; }
    BenchScreen #results { height: 1fr; min-height: 6; border: round $primary 60%; }
    BenchScreen.-narrow #bench-left { width: 38; }
    /* A short terminal (80×24): a few catalog rows and no description, so the settings
       start within the pane instead of below its fold. */
    BenchScreen.-short #catalog { max-height: 4; }
    BenchScreen.-short #catalog-desc { display: none; }
    /* Focus must be seen at a glance in every theme: a solid cursor-coloured background
       (the theme's block cursor, yellow in high contrast), reversed buttons, and a heavy
       accent border on the panes and the results table. */
    BenchScreen Input:focus { background: $block-cursor-background 45%; }
    BenchScreen Select:focus > SelectCurrent { background: $block-cursor-background 45%; }
    BenchScreen #catalog:focus, BenchScreen #queue-list:focus {
        border-left: thick $accent; background: $block-cursor-background 15%; }
    BenchScreen Button:focus { text-style: reverse bold; }
    BenchScreen #bench-left:focus-within { border: heavy $accent; }
    BenchScreen #bench-live:focus { border: heavy $accent; }
    BenchScreen #results:focus { border: heavy $accent; background: $block-cursor-background 15%; }
    """

    # The screen's letter keys (bench_form.SCREEN_LETTERS) are priority bindings, so a
    # focused text field does not swallow them: a FormField gives up every one it cannot
    # take (x, X, m never; c only where it continues "cpu"/"cuda" in the device field).
    # delete edits a text field, elsewhere it drops the highlighted queued run.
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "app.pop_screen", "Back"),
        Binding("ctrl+r", "run", "Run"),
        Binding("ctrl+n", "enqueue", "Queue"),
        Binding("x,ctrl+g", "cancel_run", "Cancel run", priority=True),
        Binding("X", "clear_queue", "Clear queue", show=False, priority=True),
        Binding("m", "mark", "Mark", show=False, priority=True),
        Binding("c", "compare", "Compare", priority=True),
        Binding("delete", "remove_queued", "Remove queued", show=False),
        # Priority, so focus moves when the app reads the key: as a plain binding, Tab is
        # handled only after the focused input has seen it, and keys typed right behind it
        # (one read from the terminal) land in the field being left.
        Binding("tab", "app.focus_next", show=False, priority=True),
        Binding("shift+tab", "app.focus_previous", show=False, priority=True),
    ]

    def __init__(self, session: BenchSession, snapshot: Snapshot | None = None) -> None:
        super().__init__()
        self.session = session
        self.snapshot = snapshot  # the latest reading (then from SnapshotShown messages)
        self._ongoing: Any = None  # the tested GPU's ongoing throttle episode (from frames)

    def compose(self) -> ComposeResult:
        yield Static("Benchmarks  (esc/b: back to the monitor · Tab: next field · "
                     "Enter: run)", classes="title")
        with Horizontal(id="bench-top"):
            yield BenchForm(id="bench-left", snapshot=self.snapshot)
            yield LiveRunView(id="bench-live")
        yield ResultsTable(id="results")
        yield KeyFooter()

    @property
    def form(self) -> BenchForm:
        return self.query_one(BenchForm)

    @property
    def results_table(self) -> ResultsTable:
        return self.query_one(ResultsTable)

    # What tests and the app read of the form and the results.
    @property
    def bench_name(self) -> str:
        return self.form.bench_name

    @property
    def form_error(self) -> str:
        return self.form.form_error

    def build_request(self) -> RunRequest | None:
        return self.form.build_request()

    @property
    def marked(self) -> list[str]:
        return self.results_table.marked

    def on_mount(self) -> None:
        self.form.restore(self.session.form)
        self.session.subscribe(self)
        self.query_one(CatalogList).focus()
        self.set_class(self.app.size.width < 110, "-narrow")
        self.set_class(self.app.size.height < 32, "-short")
        self.refresh_live()
        self.refresh_queue()
        self.results_table.reload()

    def on_unmount(self) -> None:
        self.session.unsubscribe(self)

    def on_screen_suspend(self) -> None:
        # Popped or covered: keep the form as left (children are gone by unmount time).
        with contextlib.suppress(NoMatches):
            self.session.form = self.form.saved()

    def on_screen_resume(self) -> None:
        self.refresh_live()

    @on(Input.Changed, "#f-device")
    def _device_typed(self) -> None:
        self.refresh_bindings()  # whether c types or compares depends on what is typed

    # --- the session and the monitor → widgets -----------------------------------------------

    def on_bench_changed(self, message: BenchChanged) -> None:
        if message.what in ("queue", "start", "done"):
            self.refresh_queue()
        if message.what == "done":
            self.results_table.reload()
        self.refresh_live()

    def on_snapshot_shown(self, message: SnapshotShown) -> None:
        self.snapshot = message.snapshot
        with contextlib.suppress(NoMatches):
            self.form.snapshot = message.snapshot  # the device field's GPU choices
        live = self.session.current
        frame = message.frame
        if live is not None:
            self._ongoing = (frame.ongoing.get(live.gpu_index)
                             if frame is not None and live.gpu_index is not None else None)
            self._track_memory(live, message.snapshot)
            self.refresh_live(message.snapshot)

    def _track_memory(self, live: LiveRun, snap: Snapshot) -> None:
        for g in snap.gpus:
            if g.index == live.gpu_index and g.mem_used_bytes is not None:
                live.gpu_mem_max = max(live.gpu_mem_max or 0, g.mem_used_bytes)

    def refresh_queue(self) -> None:
        with contextlib.suppress(NoMatches):
            self.form.show_queue(self.session.queue)

    def refresh_live(self, snap: Snapshot | None = None) -> None:
        try:
            view = self.query_one(LiveRunView)
        except NoMatches:  # torn down while an update was queued
            return
        live = self.session.shown
        if live is None:
            view.show_nothing()
            return
        snap = snap or self.snapshot
        view.show(live, self.session.episodes_for(live), live.finished_wall or datetime.now(UTC),
                  snap if isinstance(snap, Snapshot) else None, self._ongoing)

    # --- the form's buttons and keys -----------------------------------------------------------

    @on(Input.Submitted)
    def _submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self.action_run()

    @on(Button.Pressed, "#run")
    def _run_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        self.action_run()

    @on(Button.Pressed, "#queue")
    def _queue_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        self.action_enqueue()

    @on(Button.Pressed, "#cancel")
    def _cancel_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        self.action_cancel_run()

    # --- actions -----------------------------------------------------------------------------

    def action_run(self) -> None:
        """Start now, or behind the queue if a run is going (Enter never drops a request)."""
        self._submit()

    def action_enqueue(self) -> None:
        self._submit()

    def _submit(self) -> None:
        request = self.build_request()
        if request is None:
            return
        self.session.form = self.form.saved()
        ahead = self.session.submit(request)
        if ahead:
            self.notify(f"Queued behind {ahead} run(s): {request.benchmark}", timeout=3)

    def action_cancel_run(self) -> None:
        if not self.session.cancel():
            self.notify("No benchmark is running", severity="warning", timeout=3)

    def action_remove_queued(self) -> None:
        index = self.query_one(QueueList).highlighted
        planned = None if index is None else self.session.remove_queued(index)
        if planned is None:
            self.notify("Nothing queued to remove", severity="warning", timeout=3)
            return
        self.notify(f"Removed from the queue: {planned.label}", timeout=3, markup=False)

    def action_clear_queue(self) -> None:
        n = self.session.clear_queue()
        self.notify(f"Queue cleared ({n} removed)", timeout=3)

    def action_mark(self) -> None:
        self.results_table.toggle_mark()

    def action_compare(self) -> None:
        table = self.results_table
        if len(table.marked) != 2:
            self.notify("Mark two results with space, then press c", severity="warning",
                        timeout=4)
            return
        a, b = (table.history[i] for i in table.marked)
        self.app.push_screen(CompareScreen(a, b))


def toggle_bench_screen(app: App[Any], session: BenchSession,
                        latest: Snapshot | None = None) -> None:
    """The app's `b`: open the benchmark screen (showing `latest`, the app's last
    reading, until the next frame), or go back from it."""
    if isinstance(app.screen, BenchScreen):
        app.pop_screen()
        return
    app.push_screen(BenchScreen(session, latest))
