"""Sparklines on a fixed scale, drawn with block characters, and the time axis under them.

Textual's Sparkline rescales every series to its own min/max (so 3 % and 100 %
look alike) and styles each cell separately. Here the scale is fixed by the
caller (0-100 %, 0-memory total, 0-power limit, ...) and each row is drawn as one
segment with one style, which keeps what is written over SSH small.
"""

from __future__ import annotations

from collections.abc import Sequence

from rich.segment import Segment
from textual.strip import Strip
from textual.widget import Widget

from gputui.ui.widgets.gpu_view import ago_text

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
