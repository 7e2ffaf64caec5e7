"""The main screen: header, GPUs, host, processes, footer."""

from __future__ import annotations

from textual import events
from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.screen import Screen
from textual.widgets import Footer

from gputui.ui.widgets.gpu_panel import GpuArea, TextLine
from gputui.ui.widgets.header import AppHeader
from gputui.ui.widgets.host_panel import HostPanel
from gputui.ui.widgets.process_table import ProcessTable


class MonitorScreen(Screen[None]):
    def compose(self) -> ComposeResult:
        yield AppHeader(id="header")
        yield TextLine("Opening NVML…", id="notice")
        yield GpuArea(id="gpus")
        with Horizontal(id="bottom"):
            yield HostPanel(id="host")
            yield ProcessTable(id="procs")
        yield Footer()

    def on_mount(self) -> None:
        self.header = self.query_one(AppHeader)
        self.notice = self.query_one("#notice", TextLine)
        self.gpus = self.query_one(GpuArea)
        self.host = self.query_one(HostPanel)
        self.procs = self.query_one(ProcessTable)
        self.procs.focus()
        ready = getattr(self.app, "monitor_ready", None)
        if ready is not None:
            ready()

    def on_resize(self, event: events.Resize) -> None:
        # The terminal changed size: panels or compact rows, and how many columns.
        relayout = getattr(self.app, "relayout", None)
        if relayout is not None:
            relayout()
