"""The Doctor screen (key `d`): `gputui doctor` inside the monitor.

The checks run on a worker thread that only posts messages (`CheckDone`, `StageMoved`,
`DoctorFinished`): the event loop never waits on NVML. One progress bar per stage, the
table filling in as checks finish, the selected check's details below it, and the
monitor's GPU rows kept live beside it from the app's frames.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import replace
from typing import ClassVar

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.message import Message
from textual.screen import Screen
from textual.widgets import DataTable, Label, ProgressBar, Static

from gputui.doctor.model import Check, Report, Stage, Status, expected_text, value_text
from gputui.doctor.run import Options, StageProgress, run_doctor
from gputui.errors import GputuiError
from gputui.safe_text import printable
from gputui.telemetry.frame import Frame
from gputui.telemetry.history import TickBuckets
from gputui.telemetry.model import Snapshot
from gputui.ui.messages import SnapshotShown
from gputui.ui.widgets.footer import KeyFooter
from gputui.ui.widgets.gpu_panel import GpuFrame
from gputui.ui.widgets.gpu_row import GpuRow, RowsHeader

STAGES = (Stage.CONFIG, Stage.HEALTH, Stage.PERFORMANCE, Stage.EVENTS)
STATUS_STYLE = {Status.PASS: "green", Status.WARN: "yellow", Status.FAIL: "bold red",
                Status.SKIP: "dim"}
# Seconds the TUI keeps watching the idle GPUs for XID events and throttling.
TUI_OBSERVE_S = 3.0

Runner = Callable[..., Report]


class CheckDone(Message):
    def __init__(self, check: Check) -> None:
        super().__init__()
        self.check = check


class StageMoved(Message):
    def __init__(self, progress: StageProgress) -> None:
        super().__init__()
        self.progress = progress


class DoctorFinished(Message):
    def __init__(self, report: Report | None, error: str | None) -> None:
        super().__init__()
        self.report = report
        self.error = error


class DoctorScreen(Screen[None]):
    DEFAULT_CSS = """
    DoctorScreen { layout: vertical; }
    DoctorScreen .title { height: 1; padding: 0 1; background: $primary 30%;
                          text-style: bold; }
    DoctorScreen #doctor-body { height: 1fr; }
    DoctorScreen #doctor-main { width: 1fr; }
    DoctorScreen #doctor-stages { height: auto; padding: 0 1; }
    DoctorScreen .stage { height: 1; }
    DoctorScreen .stage > Label { width: 16; color: $text-muted; }
    DoctorScreen #doctor-table { height: 1fr; border: round $primary 60%; }
    DoctorScreen #doctor-detail { height: auto; min-height: 3; border: round $primary 60%;
                                  padding: 0 1; }
    DoctorScreen #doctor-gpus { width: 62; border: round $primary 60%; height: auto;
                                max-height: 100%; }
    DoctorScreen #doctor-verdict { height: 1; padding: 0 1; text-style: bold; }
    DoctorScreen #doctor-verdict.-fail { color: $error; }
    DoctorScreen #doctor-verdict.-pass { color: $success; }
    DoctorScreen.-narrow #doctor-gpus { display: none; }
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,d", "close", "Back"),
        Binding("r", "rerun", "Run again"),
        Binding("p", "probes", "With probes"),
        Binding("x", "cancel", "Stop"),
    ]

    def __init__(self, *, runner: Runner = run_doctor, options: Options | None = None,
                 strict: bool = False, frame: Frame | None = None,
                 history: TickBuckets | None = None, window_s: float = 300.0) -> None:
        """`frame`, `history`, `window_s`: the monitor's latest frame and its sparklines'
        history and window, for the live GPU rows (then each frame's, by message)."""
        super().__init__()
        self._frame, self._history, self._window_s = frame, history, window_s
        self.runner = runner
        self.options = options or Options(quick=True, observe_s=TUI_OBSERVE_S)
        self.strict = strict
        self.checks: list[Check] = []
        self.report: Report | None = None
        self.error: str | None = None
        self.running = False
        self._cancel = threading.Event()
        self._rows: dict[int, GpuRow] = {}

    def compose(self) -> ComposeResult:
        yield Static("Doctor · configuration and health of every GPU · p: with performance "
                     "probes (loads the GPUs)", classes="title")
        with Horizontal(id="doctor-body"):
            with Vertical(id="doctor-main"):
                with Vertical(id="doctor-stages"):
                    for stage in STAGES:
                        with Horizontal(classes="stage", id=f"row-{stage.name.lower()}"):
                            yield Label(stage.value)
                            yield ProgressBar(total=None, id=f"stage-{stage.name.lower()}",
                                              show_eta=False)
                table: DataTable[Text | str] = DataTable(id="doctor-table", cursor_type="row",
                                                         zebra_stripes=True)
                yield table
                yield Static("", id="doctor-detail")
            yield Vertical(id="doctor-gpus")
        yield Static("", id="doctor-verdict")
        yield KeyFooter()

    def on_mount(self) -> None:
        table = self.query_one("#doctor-table", DataTable)
        for label, key in (("where", "where"), ("check", "id"), ("status", "status"),
                           ("measured", "value"), ("expected", "expected")):
            table.add_column(label, key=key)
        self.set_class(self.app.size.width < 110, "-narrow")
        self._show_latest_frame()
        self.start()

    def on_unmount(self) -> None:
        # Leaving (or quitting the app) stops the checks; a probe's worker is stopped the
        # benchmarks' way (SIGTERM, then SIGKILL).
        self._cancel.set()

    def on_resize(self) -> None:
        self.set_class(self.app.size.width < 110, "-narrow")

    # --- running -----------------------------------------------------------------------------

    def start(self, *, quick: bool | None = None) -> None:
        """Run the checks (again); `quick=False` adds the performance probes."""
        if self.running:
            return
        if quick is not None:
            self.options = replace(self.options, quick=quick)
        self.checks.clear()
        self.report, self.error = None, None
        self._cancel = threading.Event()
        self.query_one("#doctor-table", DataTable).clear()
        for stage in STAGES:
            self._bar(stage).update(total=None, progress=0)
        # Without probes there is no performance stage to wait for.
        self.query_one("#row-performance").display = not self.options.quick
        self._verdict("checking…", None)
        self.running = True
        self._run(self._cancel, self.options)

    @work(thread=True, exclusive=True, group="doctor")
    def _run(self, cancel: threading.Event, options: Options) -> None:
        """On a worker thread: only posts messages, never touches widgets."""
        try:
            report = self.runner(options, on_check=lambda c: self.post_message(
                CheckDone(c)), on_stage=lambda p: self.post_message(StageMoved(p)),
                cancel=cancel)
        except GputuiError as exc:
            self.post_message(DoctorFinished(None, str(exc)))
        except Exception as exc:  # a fault stays in the doctor, never takes the monitor
            self.post_message(DoctorFinished(None, f"doctor failed: {exc!r}"))
        else:
            self.post_message(DoctorFinished(report, None))

    def on_check_done(self, message: CheckDone) -> None:
        c = message.check
        self.checks.append(c)
        table = self.query_one("#doctor-table", DataTable)
        table.add_row(c.where, c.id, Text(c.status.value.upper(), style=STATUS_STYLE[c.status]),
                      Text(printable(value_text(c))), Text(printable(expected_text(c))),
                      key=str(len(self.checks) - 1))
        if len(self.checks) == 1:
            self._show_detail(c)

    def on_stage_moved(self, message: StageMoved) -> None:
        p = message.progress
        self._bar(p.stage).update(total=max(1, p.total), progress=p.done)

    def on_doctor_finished(self, message: DoctorFinished) -> None:
        self.running = False
        self.report, self.error = message.report, message.error
        if message.error is not None:
            self._verdict(message.error, Status.FAIL)
            return
        assert message.report is not None
        outcome = message.report.outcome(self.strict)
        self._verdict(message.report.verdict(self.strict), outcome)

    def _bar(self, stage: Stage) -> ProgressBar:
        return self.query_one(f"#stage-{stage.name.lower()}", ProgressBar)

    def _verdict(self, text: str, outcome: Status | None) -> None:
        v = self.query_one("#doctor-verdict", Static)
        v.update(Text(printable(text)))
        v.set_class(outcome is Status.FAIL, "-fail")
        v.set_class(outcome is Status.PASS, "-pass")

    # --- details -------------------------------------------------------------------------------

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        if event.row_key.value is not None:
            self._show_detail(self.checks[int(event.row_key.value)])

    def _show_detail(self, c: Check) -> None:
        lines = [f"{c.where} · {c.id}: {c.status.value.upper()} — measured {value_text(c)}"
                 + (f", expected {expected_text(c)}" if c.expected is not None else "")]
        if c.detail:
            lines.append(c.detail)
        lines.append(f"why it matters: {c.why}")
        # Each line made safe on its own: printable() would show the newlines as "\n".
        self.query_one("#doctor-detail", Static).update(
            Text("\n".join(printable(line) for line in lines)))

    # --- live GPU rows ---------------------------------------------------------------------

    def on_snapshot_shown(self, message: SnapshotShown) -> None:
        self._history = message.history or self._history
        self._window_s = message.window_s
        self._show_frame(message.frame, message.snapshot)

    def _show_latest_frame(self) -> None:
        if self._frame is not None:
            self._show_frame(self._frame, self._frame.snapshot)

    def _show_frame(self, frame: Frame | None, snap: Snapshot) -> None:
        box = self.query_one("#doctor-gpus", Vertical)
        history, seconds = self._history, self._window_s
        ongoing = frame.ongoing if frame is not None else {}
        for g in snap.gpus:
            row = self._rows.get(g.index)
            if row is None:
                if not self._rows:  # the rows' column titles, over the first one
                    box.mount(RowsHeader())
                row = self._rows[g.index] = GpuRow(g.info, id=f"doctor-row-{g.index}")
                box.mount(row)
            row.update_frame(GpuFrame(g, ongoing.get(g.index), snap.time, history, seconds))

    # --- keys ----------------------------------------------------------------------------------

    def action_close(self) -> None:
        self._cancel.set()
        self.app.pop_screen()

    def action_rerun(self) -> None:
        self.start(quick=True)

    def action_probes(self) -> None:
        self.start(quick=False)

    def action_cancel(self) -> None:
        if self.running:
            self._cancel.set()
            self._verdict("stopping…", None)
