"""Host panel: CPU total and per core, RAM, swap, load average."""

from __future__ import annotations

import math

from rich.segment import Segment
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.strip import Strip
from textual.widget import Widget

from gputui.telemetry.model import HostSample
from gputui.ui.widgets.gauge import Gauge
from gputui.ui.widgets.gpu_panel import TextLine
from gputui.ui.widgets.gpu_view import gib
from gputui.ui.widgets.sparkline import sparkline_rows

LABEL = "CORE "


class CoreBars(Widget):
    """One block character per core (0-100 %), wrapped to the width; one segment per row."""

    DEFAULT_CSS = """
    CoreBars { height: 1; color: $secondary; }
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.cores: tuple[float, ...] = ()
        self._text = ""

    def set_cores(self, cores: tuple[float, ...]) -> None:
        text = sparkline_rows(cores, 100.0)[0] if cores else ""
        if text != self._text:
            self._text = text
            self._fit_height()
            self.refresh()

    def _fit_height(self) -> None:
        per_row = max(1, self.size.width - len(LABEL))
        rows = max(1, math.ceil(len(self._text) / per_row))
        if self.styles.height is None or self.styles.height.value != rows:
            self.styles.height = rows

    def on_resize(self) -> None:
        self._fit_height()

    def render_line(self, y: int) -> Strip:
        width = self.size.width
        per_row = max(1, width - len(LABEL))
        chunk = self._text[y * per_row:(y + 1) * per_row]
        label = LABEL if y == 0 else " " * len(LABEL)
        if not self._text and y == 0:
            chunk = "N/A"
        return Strip([Segment((label + chunk)[:width].ljust(width), self.rich_style)], width)


class HostPanel(Vertical):
    DEFAULT_CSS = """
    HostPanel {
        height: auto;
        border: round $primary 60%;
        border-title-style: bold;
        padding: 0 1;
    }
    HostPanel > .load { height: 1; }
    """

    def compose(self) -> ComposeResult:
        yield Gauge("CPU", id="h-cpu", value_width=5)
        yield CoreBars(id="h-cores")
        yield Gauge("RAM", id="h-ram", value_width=11)
        yield Gauge("SWAP", id="h-swap", value_width=11)
        yield TextLine("LOAD N/A", classes="load", id="h-load")

    def on_mount(self) -> None:
        self.border_title = "Host"
        self._cpu = self.query_one("#h-cpu", Gauge)
        self._cores = self.query_one("#h-cores", CoreBars)
        self._ram = self.query_one("#h-ram", Gauge)
        self._swap = self.query_one("#h-swap", Gauge)
        self._load = self.query_one("#h-load", TextLine)

    def update_host(self, h: HostSample) -> None:
        title = f"Host · {h.hostname}"
        if self.border_title != title:
            self.border_title = title
        cpu = h.cpu_pct
        self._cpu.set(None if cpu is None else cpu / 100, "N/A" if cpu is None else f"{cpu:.0f}%",
                      "warning" if cpu is not None and cpu >= 95 else None)
        self._cores.set_cores(h.cpu_per_core_pct)
        self._ram.set(*_mem(h.mem_used_bytes, h.mem_total_bytes))
        self._swap.set(*_mem(h.swap_used_bytes, h.swap_total_bytes))
        load = "N/A" if h.load_avg is None else " ".join(f"{x:.2f}" for x in h.load_avg)
        self._load.set_text(f"LOAD {load}")


def _mem(used: int | None, total: int | None) -> tuple[float | None, str, str | None]:
    if total == 0:
        return None, "none", None
    if used is None or not total:
        return None, "N/A" if used is None else f"{gib(used)}GiB", None
    frac = used / total
    sev = "error" if frac >= 0.95 else "warning" if frac >= 0.85 else None
    return frac, f"{gib(used)}/{gib(total)}G", sev
