"""Benchmark pane drawings: throughput over time and the per-phase split of a training step.

Both draw with `render_line` (no child widgets) and repaint only when what they would
draw changed, like the monitor's sparklines.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import ClassVar

from rich.segment import Segment
from rich.style import Style
from textual.geometry import Size
from textual.strip import Strip
from textual.widget import Widget

from gputui.bench.fmt import fmt_num, fmt_phase_ms
from gputui.ui.widgets.sparkline import sparkline_rows

AXIS_W = 9  # "  1,234.5┤"


def bucket(values: Sequence[float], flags: Sequence[bool],
           width: int) -> tuple[list[float], list[bool]]:
    """At most `width` columns: the whole run stays visible; a column is the mean of its
    windows and counts as throttled if any of them was."""
    n = len(values)
    if n <= width or width <= 0:
        return list(values), list(flags)
    cols: list[float] = []
    marks: list[bool] = []
    for i in range(width):
        lo, hi = i * n // width, (i + 1) * n // width
        chunk = values[lo:hi] or values[lo:lo + 1]
        cols.append(sum(chunk) / len(chunk))
        marks.append(any(flags[lo:max(hi, lo + 1)]))
    return cols, marks


def _runs(text: str, flags: Sequence[bool], normal: Style, marked: Style) -> list[Segment]:
    """Consecutive cells of the same style as one segment: little to send over SSH."""
    marks = [*flags[: len(text)], *([False] * (len(text) - len(flags)))]
    out: list[Segment] = []
    start = 0
    for i in range(1, len(text) + 1):
        if i == len(text) or marks[i] != marks[start]:
            out.append(Segment(text[start:i], marked if marks[start] else normal))
            start = i
    return out


class ThroughputChart(Widget):
    """Throughput per progress window on the scale 0..max seen; windows that overlapped a
    throttle episode are drawn in the error colour and flagged with ▲ on the axis row
    (a second cue besides colour, for monochrome terminals)."""

    COMPONENT_CLASSES: ClassVar[set[str]] = {"chart--bar", "chart--throttled", "chart--axis"}
    DEFAULT_CSS = """
    ThroughputChart { height: 7; }
    ThroughputChart > .chart--bar { color: $secondary; }
    ThroughputChart > .chart--throttled { color: $error; text-style: bold; }
    ThroughputChart > .chart--axis { color: $text-muted; }
    """

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self.values: list[float] = []
        self.flags: list[bool] = []
        self.vmax: float | None = None
        self.empty_text = "waiting for the first window…"
        self._key: tuple[object, ...] | None = None

    def set_data(self, values: Sequence[float], flags: Sequence[bool],
                 refs: Sequence[float | None] = (),
                 empty_text: str = "waiting for the first window…") -> None:
        """`refs`: figures shown next to the chart (median, overall): the scale includes
        them so no headline number is above every bar's top."""
        key = (tuple(values), tuple(flags), tuple(refs), empty_text)
        if key == self._key:
            return
        self._key = key
        self.values = list(values)
        self.flags = list(flags) + [False] * (len(values) - len(flags))
        self.empty_text = empty_text
        extra = [r for r in refs if r is not None and r > 0]
        self.vmax = max([*self.values, *extra]) if self.values else None
        self.refresh()

    @property
    def throttled_columns(self) -> int:
        return sum(bucket(self.values, self.flags, self.size.width - AXIS_W)[1])

    def render_line(self, y: int) -> Strip:
        width, height = self.size
        axis_style = self.get_component_rich_style("chart--axis")
        plot_w = max(0, width - AXIS_W)
        cols, marks = bucket(self.values, self.flags, plot_w)
        bar_rows = max(1, height - 1)
        if y == height - 1:  # the axis row: ▲ under throttled windows
            text = "".join("▲" if m else "─" for m in marks).ljust(plot_w, "─")
            segs = [Segment(" " * (AXIS_W - 1) + "└", axis_style),
                    *_runs(text, marks, axis_style,
                           self.get_component_rich_style("chart--throttled"))]
            return Strip(segs, width).crop(0, width)
        if y >= bar_rows:
            return Strip.blank(width, self.rich_style)
        if self.vmax is None:
            label = "" if y else self.empty_text
            return Strip([Segment(" " * (AXIS_W - 1) + "│", axis_style),
                          Segment(label.ljust(plot_w), axis_style)], width).crop(0, width)
        rows = sparkline_rows(cols, self.vmax, bar_rows)
        if y == 0:
            label = fmt_num(self.vmax)
        elif y == bar_rows - 1:
            label = "0"
        else:
            label = ""
        axis = label[: AXIS_W - 1].rjust(AXIS_W - 1) + ("┤" if label else "│")
        text = rows[y].ljust(plot_w)[:plot_w]
        segs = [Segment(axis, axis_style),
                *_runs(text, marks, self.get_component_rich_style("chart--bar"),
                       self.get_component_rich_style("chart--throttled"))]
        return Strip(segs, width).crop(0, width)


PHASE_GLYPHS: Mapping[str, str] = {
    # Different glyphs as well as colours, so the split reads without colour too.
    "data": "░", "h2d": "▒", "forward": "█", "backward": "▓", "optimizer": "▚",
}


def phase_cells(phases_ms: Mapping[str, float], width: int) -> list[tuple[str, int]]:
    """(phase, cells) in order, proportional to time; largest remainders fill the bar."""
    items = [(k, max(0.0, float(v))) for k, v in phases_ms.items() if k in PHASE_GLYPHS]
    total = sum(v for _, v in items)
    if total <= 0 or width <= 0:
        return [(k, 0) for k, _ in items]
    exact = [(k, v * width / total) for k, v in items]
    cells = {k: int(x) for k, x in exact}
    left = width - sum(cells.values())
    for k, _x in sorted(exact, key=lambda kx: kx[1] - int(kx[1]), reverse=True)[:left]:
        cells[k] += 1
    return [(k, cells[k]) for k, _ in items]


class PhaseBar(Widget):
    """One bar split into the phases of a training step, and a legend with ms per step."""

    COMPONENT_CLASSES: ClassVar[set[str]] = {
        "phase--data", "phase--h2d", "phase--forward", "phase--backward", "phase--optimizer",
        "phase--legend",
    }
    DEFAULT_CSS = """
    PhaseBar { height: auto; }
    PhaseBar > .phase--data { color: $warning; }
    PhaseBar > .phase--h2d { color: $error; }
    PhaseBar > .phase--forward { color: $primary; }
    PhaseBar > .phase--backward { color: $secondary; }
    PhaseBar > .phase--optimizer { color: $success; }
    PhaseBar > .phase--legend { color: $text-muted; }
    """

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self.phases_ms: dict[str, float] = {}
        self.empty_text = "phase split: after the first timed steps"

    def set_phases(self, phases_ms: Mapping[str, float] | None,
                   empty_text: str = "phase split: after the first timed steps") -> None:
        phases = dict(phases_ms or {})
        if phases != self.phases_ms or empty_text != self.empty_text:
            self.phases_ms = phases
            self.empty_text = empty_text
            self.refresh(layout=True)  # the legend may need another line

    def legend_text(self) -> str:
        total = sum(self.phases_ms.values())
        # Every figure carries its unit: the legend is often cut at the right edge.
        parts = [f"{PHASE_GLYPHS[k]} {k} {fmt_phase_ms(v)}" for k, v in self.phases_ms.items()
                 if k in PHASE_GLYPHS]
        return f"step {fmt_phase_ms(total)}: " + "  ".join(parts)

    def render_line(self, y: int) -> Strip:
        width = self.size.width
        legend_style = self.get_component_rich_style("phase--legend")
        if not self.phases_ms:
            text = self.empty_text if y == 0 else ""
            return Strip([Segment(text[:width].ljust(width), legend_style)], width)
        if y == 0:
            segs = [Segment(PHASE_GLYPHS[k] * n, self.get_component_rich_style(f"phase--{k}"))
                    for k, n in phase_cells(self.phases_ms, width) if n]
            return Strip(segs, width).extend_cell_length(width)
        lines = self._legend_lines(width)
        if 1 <= y <= len(lines):
            return Strip(lines[y - 1]).crop(0, width).extend_cell_length(width)
        return Strip.blank(width, self.rich_style)

    def _legend_lines(self, width: int) -> list[list[Segment]]:
        """The legend flowed onto as many lines as it needs: a phase is never cut."""
        legend_style = self.get_component_rich_style("phase--legend")
        total = sum(self.phases_ms.values())
        items = [[Segment(f"step {fmt_phase_ms(total)}: ", legend_style)]]
        for k, v in self.phases_ms.items():
            if k in PHASE_GLYPHS:
                items.append([Segment(f"{PHASE_GLYPHS[k]} ",
                                      self.get_component_rich_style(f"phase--{k}")),
                              Segment(f"{k} {fmt_phase_ms(v)}  ", legend_style)])
        lines: list[list[Segment]] = [[]]
        used = 0
        for item in items:
            n = sum(seg.cell_length for seg in item)
            if used and used + n > max(width, 1):
                lines.append([])
                used = 0
            lines[-1].extend(item)
            used += n
        return lines

    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        return 1 + (len(self._legend_lines(width)) if self.phases_ms else 0)
