"""A sparkline on a fixed scale, drawn with block characters.

Textual's Sparkline rescales every series to its own min/max (so 3 % and 100 %
look alike) and styles each cell separately. Here the scale is fixed by the
caller (0-100 %, 0-memory total, 0-power limit, ...) and each row of the widget
is one segment with one style, which keeps what is written over SSH small.
"""

from __future__ import annotations

from collections.abc import Sequence

from rich.segment import Segment
from textual.strip import Strip
from textual.widget import Widget

from gputui.ui.widgets.gpu_view import HistoryLike, ago_text

BLOCKS = " ▁▂▃▄▅▆▇█"


def sparkline_rows(values: Sequence[float | None], vmax: float | None,
                   height: int = 1) -> list[str]:
    """Rows of block characters, top row first, for `values` on the scale 0..vmax.

    A known value always shows at least the lowest block, so "0" and "unknown"
    (a space) stay distinguishable; values above vmax are clipped to full.
    """
    height = max(1, height)
    levels: list[int | None] = []
    for v in values:
        if v is None or not vmax or vmax <= 0:
            levels.append(None)
        else:
            frac = min(1.0, max(0.0, v / vmax))
            levels.append(max(1, round(frac * height * 8)))
    rows = []
    for y in range(height):
        floor = (height - 1 - y) * 8  # levels below this row
        rows.append("".join(
            " " if n is None else BLOCKS[min(8, max(0, n - floor))] for n in levels))
    return rows


class FixedSparkline(Widget):
    """History of one metric of one GPU, read from `Sampler.history` on demand."""

    DEFAULT_CSS = """
    FixedSparkline {
        height: 1;
        color: $secondary;
    }
    FixedSparkline.-warning { color: $warning; }
    FixedSparkline.-error { color: $error; }
    """

    def __init__(self, gpu: int, metric: str, *, series: str | None = None,
                 id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self.gpu = gpu
        self.metric = metric
        self.series = series or metric  # the History series drawn (see SPARK_SERIES)
        self.vmax: float | None = None
        self._history: HistoryLike | None = None
        self._seconds = 300.0
        self._values: list[float | None] = []
        self._rows: list[str] = []

    def set_source(self, history: HistoryLike, seconds: float, vmax: float | None) -> None:
        """Re-read the history; repaint only if what would be drawn changed."""
        self._history = history
        self._seconds = seconds
        self.vmax = vmax
        self._reload()

    def _reload(self) -> None:
        width = self.size.width
        if self._history is None or width <= 0:
            return
        values = self._history.buckets(self.gpu, self.series, self._seconds, width)
        rows = sparkline_rows(values, self.vmax, self.size.height)
        if rows != self._rows:
            self._values = values
            self._rows = rows
            self.refresh()

    def on_resize(self) -> None:
        self._reload()

    @property
    def rows(self) -> list[str]:
        return list(self._rows)

    def render_line(self, y: int) -> Strip:
        width = self.size.width
        text = self._rows[y] if y < len(self._rows) else ""
        text = text[:width].ljust(width)
        # One segment per row: a single style (the widget's colour) for all cells.
        return Strip([Segment(text, self.rich_style)], width)


def time_axis(seconds: float, width: int) -> str:
    """The line under a sparkline `width` cells wide that shows `seconds`: how long ago
    its left edge, its middle and its right edge ("now") are."""
    left, mid, right = ago_text(seconds), ago_text(seconds / 2), "now"
    if width < len(left) + len(right) + 1:
        return right.rjust(width)[:width]
    line = list(left + " " * (width - len(left) - len(right)) + right)
    start = width // 2 - len(mid) // 2
    if start > len(left) + 1 and start + len(mid) < width - len(right) - 1:
        line[start:start + len(mid)] = mid
    return "".join(line)


class WindowLine(Widget):
    """One line of text that depends only on its width and the history window (seconds):
    redrawn when either changes, never per tick."""

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self.seconds = 300.0

    def set_seconds(self, seconds: float) -> None:
        if seconds != self.seconds:
            self.seconds = seconds
            self.refresh()

    def line(self, width: int) -> str:
        raise NotImplementedError

    def render_line(self, y: int) -> Strip:
        width = self.size.width
        return Strip([Segment(self.line(width)[:width].ljust(width), self.rich_style)], width)


class TimeAxis(WindowLine):
    """The time axis under a column of sparklines."""

    DEFAULT_CSS = """
    TimeAxis { height: 1; color: $text-muted; }
    """

    def line(self, width: int) -> str:
        return time_axis(self.seconds, width)
