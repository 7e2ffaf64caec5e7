"""One host of the fleet view, opened with Enter: its figures, its GPUs, its jobs and its
alerts. From Prometheus its GPUs are read only while it is open (the poller is told by
the app); Esc goes back to the hosts."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.screen import Screen
from textual.widgets import DataTable, Static

from gputui.fleet.host_table import columns_for, down_text, host_name
from gputui.fleet.model import FleetHost, FleetSnapshot, HostSummary
from gputui.fleet.view import alert_text, host_rows
from gputui.safe_text import printable
from gputui.telemetry.units import NA, fmt_per_s
from gputui.ui.widgets.footer import KeyFooter

GPU_COLUMNS = ("GPU", "Model", "Util", "SM active", "Memory", "Power", "Temp",
               "Throttle / state")
JOB_COLUMNS = ("PID", "Job", "GPUs", "Samples/s", "Tokens/s")
STATUS_STYLE = {
    "ok": "", "throttling": "bold magenta", "hot": "bold yellow", "lost": "bold red",
    "stale": "yellow", "down": "bold red", "error": "yellow", "pending": "dim", "nogpu": "dim",
}
SEVERITY_STYLE = {"critical": "bold red", "warning": "yellow"}


def figures_text(s: HostSummary, prometheus: bool) -> str:
    """The host's row, as `title value` pairs."""
    return "  ".join(f"{c.title}: {text}" for c in columns_for(prometheus)
                     if (text := printable(c.cell(s))))


class FleetHostScreen(Screen[None]):
    CSS = """
    #host-title { height: 1; padding: 0 1; text-style: bold; }
    #host-figures { height: auto; padding: 0 1; color: $text-muted; }
    #gpus { height: auto; max-height: 20; }
    #jobs-title { height: 1; padding: 0 1; margin-top: 1; }
    #jobs { height: auto; max-height: 10; }
    #host-alerts { height: auto; padding: 0 1; border-top: solid $primary; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "back", "Back"),
        Binding("r", "app.refresh", "Refresh now"),
        Binding("q", "app.quit", "Quit"),
    ]

    def __init__(self, target: str, snap: FleetSnapshot | None) -> None:
        super().__init__()
        self.target = target
        self.host: FleetHost | None = None  # its GPU-level reading, once there is one
        self._first = snap  # what the app showed when the host was opened

    def compose(self) -> ComposeResult:
        yield Static(Text(self.target), id="host-title")
        yield Static("", id="host-figures")
        yield DataTable(id="gpus", cursor_type="row", zebra_stripes=True)
        yield Static("Jobs", id="jobs-title")
        yield DataTable(id="jobs", cursor_type="row")
        yield Static("", id="host-alerts")
        yield KeyFooter()

    def on_mount(self) -> None:
        self.query_one("#gpus", DataTable).add_columns(*GPU_COLUMNS)
        self.query_one("#jobs", DataTable).add_columns(*JOB_COLUMNS)
        if self._first is not None:
            self.show(self._first)

    def action_back(self) -> None:
        self.dismiss(None)

    def show(self, snap: FleetSnapshot) -> None:
        now = datetime.now(UTC)
        summary = next((s for s in snap.summaries if s.target == self.target), None)
        host = snap.host(self.target)
        self.host = host
        prometheus = snap.source != "targets"
        if summary is not None:
            title = host_name(summary)
            down = down_text(summary, now)
            self.query_one("#host-title", Static).update(Text(title))
            self.query_one("#host-figures", Static).update(Text(
                down if down is not None else figures_text(summary, prometheus)))
        gpus = self.query_one("#gpus", DataTable)
        gpus.clear()
        if host is None:
            gpus.add_row(*(Text(c, style="dim") for c in ("", "reading its GPUs…", *[""] * 6)))
        else:
            for row in host_rows(FleetSnapshot(time=snap.time, source=snap.source,
                                               hosts=(host,), hot_temp_c=snap.hot_temp_c)):
                style = STATUS_STYLE.get(row.status, "")
                gpus.add_row(*(Text(c, style=style) for c in row.cells[1:]), key=row.key)
        jobs = self.query_one("#jobs", DataTable)
        jobs.clear()
        for j in host.reading.jobs if host is not None else ():
            jobs.add_row(Text(str(j.pid)), Text(printable(j.name)),
                         Text(",".join(printable(g) for g in j.gpus if g) or NA),
                         Text(fmt_per_s(j.samples_per_s)), Text(fmt_per_s(j.tokens_per_s)),
                         key=str(j.pid))
        self.query_one("#jobs-title", Static).update(
            f"Jobs: {jobs.row_count}" if jobs.row_count else "Jobs: none reporting")
        text = Text()
        for a in [a for a in snap.alerts() if host is not None and a.host == host.name]:
            text.append(f"{a.severity.upper():8} ", style=SEVERITY_STYLE.get(a.severity, ""))
            text.append(alert_text(a) + "\n")
        for f in summary.alerts if summary is not None else ():
            text.append(f"{f.severity.upper() or 'FIRING':8} ",
                        style=SEVERITY_STYLE.get(f.severity, ""))
            text.append(printable(f"{f.name} firing in Prometheus"
                                  + (f" ({f.count} series)" if f.count > 1 else "")) + "\n")
        if not text:
            text.append("No alerts.", style="green")
        text.rstrip()
        self.query_one("#host-alerts", Static).update(text)
