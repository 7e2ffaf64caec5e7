"""Host panel: CPU total and per core, RAM, swap, load average."""

from __future__ import annotations

import math

from rich.segment import Segment
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.geometry import Size
from textual.strip import Strip
from textual.widget import Widget

from gputui.safe_text import no_markup
from gputui.telemetry.model import HostSample
from gputui.telemetry.units import gib
from gputui.ui.widgets.gauge import Gauge, bar_text
from gputui.ui.widgets.gpu_panel import TextLine
from gputui.ui.widgets.partial import repaint_changed
from gputui.ui.widgets.sparkline import sparkline_rows

LABEL = "CORE "
GRID_GAP = 2  # cells between grid columns
GRID_BAR_MIN = 6  # a grid cell's bar is at least this wide (else no grid)
GRID_BAR_MAX = 20  # and at most this wide (more columns, fewer rows)
OTHER_ROWS = 4  # the host panel's lines besides the cores: CPU, RAM, SWAP, LOAD
STRIP_CORE_ROWS = 4  # grid rows the cores may take when the panel is a strip (auto height)


class CoreBars(Widget):
    """Per-core CPU (0-100 %), one segment per row.

    With room (`max_rows`, set by the host panel from its height): a grid of labelled
    bars, column-major (`0 ██████░░░░  45%`). Otherwise one block character per core,
    wrapped to the width after a `CORE` label.
    """

    DEFAULT_CSS = """
    CoreBars { height: auto; color: $secondary; }
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.cores: tuple[float, ...] = ()
        self.max_rows = 1
        self._lines: list[str] = []

    @property
    def grid(self) -> bool:
        """Drawn as a grid of labelled bars (not one block character per core)."""
        return self._grid_shape(self.size.width) is not None

    def set_cores(self, cores: tuple[float, ...]) -> None:
        self.cores = tuple(cores)
        self._redraw()

    def set_max_rows(self, rows: int) -> None:
        rows = max(1, rows)
        if rows != self.max_rows:
            self.max_rows = rows
            self._redraw()

    def _grid_shape(self, width: int) -> tuple[int, int, int] | None:
        """(columns, rows, cell width) of the grid, or None when it does not fit in
        `max_rows`. The fewest columns whose bars are at most GRID_BAR_MAX wide."""
        n = len(self.cores)
        if n == 0 or width <= 0:
            return None
        fixed = len(str(n - 1)) + 1 + 5  # "NN " and " 100%"
        for cols in range(1, n + 1):
            cell_w = (width - GRID_GAP * (cols - 1)) // cols
            bar_w = cell_w - fixed
            if bar_w < GRID_BAR_MIN:
                return None
            rows = math.ceil(n / cols)
            if rows <= self.max_rows and (bar_w <= GRID_BAR_MAX or cols == n):
                return cols, rows, fixed + min(bar_w, GRID_BAR_MAX)
        return None

    def _render_lines(self, width: int) -> list[str]:
        cores = self.cores
        if not cores:
            return [LABEL + "N/A"]
        shape = self._grid_shape(width)
        if shape is None:
            text = sparkline_rows(cores, 100.0)[0]
            per_row = max(1, width - len(LABEL))
            return [(LABEL if i == 0 else " " * len(LABEL)) + text[i:i + per_row]
                    for i in range(0, len(text), per_row)]
        cols, rows, cell_w = shape
        label_w = len(str(len(cores) - 1))
        bar_w = cell_w - label_w - 6
        lines = []
        for r in range(rows):
            cells = []
            for c in range(cols):
                i = c * rows + r  # column-major: cores 0..rows-1 down the first column
                if i >= len(cores):
                    break
                filled, empty = bar_text(cores[i] / 100.0, bar_w)
                cells.append(f"{i:>{label_w}} {filled}{empty}{cores[i]:>4.0f}%")
            lines.append((" " * GRID_GAP).join(cells))
        return lines

    def _redraw(self) -> None:
        lines = self._render_lines(self.size.width)
        if lines != self._lines:
            grew = len(lines) != len(self._lines)
            old, self._lines = self._lines, lines
            if grew:
                self.refresh(layout=True)
                return
            repaint_changed(self, old, lines)  # the rows whose cores moved

    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        return len(self._render_lines(width))

    def on_resize(self) -> None:
        self._redraw()

    def render_line(self, y: int) -> Strip:
        width = self.size.width
        text = (self._lines[y] if y < len(self._lines) else "")[:width].ljust(width)
        style = self.rich_style
        # A segment per grid cell ("NN ██░░  45%"), so a partial update starts at the
        # core that changed (Textual writes from the start of a dirty cell's segment).
        shape = self._grid_shape(width)
        step = shape[2] + GRID_GAP if shape is not None else 0
        if not step:
            return Strip([Segment(text, style)], width)
        return Strip([Segment(text[i:i + step], style) for i in range(0, len(text), step)],
                     width)


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

    def on_resize(self) -> None:
        # Rows the cores may use: the panel's height (when it fills the bottom) minus the
        # rest; a fixed few when it is a strip sized by its content.
        height = self.styles.height
        if height is not None and height.is_auto:
            self._cores.set_max_rows(STRIP_CORE_ROWS)
        else:
            self._cores.set_max_rows(self.content_size.height - OTHER_ROWS)

    def on_mount(self) -> None:
        self.border_title = "Host"
        self._cpu = self.query_one("#h-cpu", Gauge)
        self._cores = self.query_one("#h-cores", CoreBars)
        self._ram = self.query_one("#h-ram", Gauge)
        self._swap = self.query_one("#h-swap", Gauge)
        self._load = self.query_one("#h-load", TextLine)

    def update_host(self, h: HostSample) -> None:
        title = f"Host · {no_markup(h.hostname)}"  # border titles parse markup
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
