"""A GPU's full panel: gauges, labelled sparklines, the throttle state and the GPM verdict
(the area that holds the panels or the compact rows is `gpu_area`)."""

from __future__ import annotations

from collections.abc import Hashable
from typing import ClassVar

from rich.cells import cell_len
from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual.content import Content
from textual.geometry import Region, Size
from textual.strip import Strip
from textual.widget import Widget
from textual.widgets import Static

from gputui.safe_text import no_markup
from gputui.telemetry.model import DeviceInfo
from gputui.telemetry.units import NA
from gputui.ui.layout import SPARK_ROWS_MAX
from gputui.ui.widgets.gauge import gauge_parts
from gputui.ui.widgets.gpu_view import (
    HISTORY_METRICS,
    SPARK_SERIES,
    GaugeView,
    GpuFrame,
    gauges,
    gpm_verdict,
    metric_scale,
    pstate_text,
    scale_lines,
    state,
)
from gputui.ui.widgets.mig_view import mig_summary
from gputui.ui.widgets.panel_grid import GAP, SCALE_WIDTH, PanelGrid
from gputui.ui.widgets.partial import repaint_changed
from gputui.ui.widgets.sparkline import sparkline_rows, time_axis

__all__ = ["GpuFrame", "GpuPanel", "TextLine", "panel_title", "window_label", "wrap_rows"]

STATE_ROWS_MAX = 3  # the throttle sentence at 80 columns takes two
GAUGE_LABEL_WIDTH = 7  # "SM ACT "


def panel_title(info: DeviceInfo, mig: str | None = None) -> str:
    # The device name comes from the driver: shown, never parsed as markup.
    title = f"GPU {info.index} · {no_markup(info.name)}"
    return title if mig is None else f"{title} · {no_markup(mig)}"


def window_label(seconds: float) -> str:
    return f"{seconds / 60:.0f} min" if seconds >= 60 else f"{seconds:.0f} s"


class TextLine(Static):
    """A Static that repaints (without a layout pass) only when its text changed."""

    _last_key: tuple[str, str | None] | None = None

    def set_text(self, text: str, severity: str | None = None) -> None:
        """Plain text (never markup: process names and errors may contain brackets)."""
        key = (text, severity)
        if self._last_key == key:
            return
        self._last_key = key
        self.set_class(severity == "warning", "-warning")
        self.set_class(severity == "error", "-error")
        self.update(Text(text), layout=False)


def wrap_rows(text: str, width: int) -> list[tuple[str, int]]:
    """`text` word-wrapped to `width` cells as a Static wraps it (never cut): each row,
    with where in `text` it starts."""
    if width <= 0 or cell_len(text) <= width:
        return [(text, 0)]
    rows, start = [], 0
    for line in Content(text).wrap(width):
        start = text.find(line.plain, start)
        rows.append((line.plain, start))
        start += len(line.plain)
    return rows


# A part of a panel line is (text, style key). The keys: BG (the panel's background alone:
# gaps, padding, the blank after a text), BASE (the panel's own colour), a component class
# of the panel, or (one of those, (x, y)) for a row of text: drawn with the meta a Static
# gives its text (where the row starts in it), so that the screen is, segment for segment,
# what it was when the panel was built of Static, Gauge and sparkline widgets.
StyleKey = Hashable
Part = tuple[str, StyleKey]
BG = "bg"
BASE = "base"
MUTED = "gpupanel--muted"
SEVERITY_STYLE = {"warning": "gpupanel--warning", "error": "gpupanel--error"}


def _text(text: str, width: int, key: str, offset: tuple[int, int] = (0, 0)) -> list[Part]:
    """One row of a text `width` cells wide, as a Static draws it: the text, then blank."""
    parts: list[Part] = [(text, (key, offset))]
    pad = width - cell_len(text)
    if pad > 0:
        parts.append((" " * pad, BG))
    return parts


def _text_rows(lines: list[tuple[str, tuple[int, int]]], rows: int, width: int, key: str
               ) -> list[list[Part]]:
    """`rows` rows of a text box holding `lines` ((text, where it starts)), blank below."""
    return [_text(lines[y][0], width, key, lines[y][1]) if y < len(lines)
            else [(" " * width, BG)] for y in range(rows)]


def _wrapped(text: str, width: int) -> list[tuple[str, tuple[int, int]]]:
    return [(row, (x, 0)) for row, x in wrap_rows(text, width)]


def _gauge(view: GaugeView, label: str, width: int, value_width: int) -> list[Part]:
    sev = f"-{view.severity}" if view.severity in ("warning", "error") else ""
    return [(text, f"gpupanel--{role}{sev if role in ('fill', 'value') else ''}")
            for text, role in gauge_parts(label, GAUGE_LABEL_WIDTH, value_width,
                                          view.fraction, view.text, width)]


NO_VALUE = GaugeView(None, NA)  # a gauge before the first frame


class GpuPanel(Widget):
    """One GPU: a gauge, a history graph and its scale per metric, the fan and P-state,
    the time axis, the throttle state and the GPM verdict in words.

    Drawn as one widget, line by line (`render_line`), on its grid (`PanelGrid`: three
    columns, gauges, graphs and scales, one band per metric): a panel of ~30 widgets cost
    most of the first frame (mounting, styling and laying them out). Each tick repaints
    only the changed cells.
    """

    DEFAULT_CSS = """
    GpuPanel {
        height: auto;
        border: round $primary 60%;
        border-title-color: $foreground;
        border-title-style: bold;
        border-subtitle-color: $text-muted;
        padding: 0 1;
    }
    GpuPanel.-throttling { border: round $warning; }
    GpuPanel.-lost { border: heavy $error; }
    GpuPanel.-stale { border: heavy $warning; }
    GpuPanel > .gpupanel--label { color: $text-muted; text-style: bold; }
    GpuPanel > .gpupanel--fill { color: $primary; }
    GpuPanel > .gpupanel--empty { color: $foreground 25%; }
    GpuPanel > .gpupanel--value { color: $foreground; }
    GpuPanel > .gpupanel--fill-warning { color: $warning; }
    GpuPanel > .gpupanel--value-warning { color: $warning; text-style: bold; }
    GpuPanel > .gpupanel--fill-error { color: $error; }
    GpuPanel > .gpupanel--value-error { color: $error; text-style: bold; }
    GpuPanel > .gpupanel--spark { color: $secondary; }
    GpuPanel > .gpupanel--muted { color: $text-muted; }
    GpuPanel > .gpupanel--warning { color: $warning; text-style: bold; }
    GpuPanel > .gpupanel--error { color: $error; text-style: bold; }
    GpuPanel > .gpupanel--verdict { color: $accent; }
    """
    # What colours the panel's parts (gauges, graphs, scales, the state and the verdict).
    COMPONENT_CLASSES: ClassVar[set[str]] = {
        "gpupanel--label", "gpupanel--fill", "gpupanel--empty", "gpupanel--value",
        "gpupanel--fill-warning", "gpupanel--value-warning",
        "gpupanel--fill-error", "gpupanel--value-error",
        "gpupanel--spark", "gpupanel--muted", "gpupanel--warning", "gpupanel--error",
        "gpupanel--verdict",
    }

    def __init__(self, info: DeviceInfo, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.info = info
        self.border_title = panel_title(info)
        self.border_subtitle = no_markup(info.pci_bus_id)
        self._frame: GpuFrame | None = None
        self.spark_rows = 1
        self.state_rows = 1  # the throttle sentence wraps onto more rows, never cut
        self.verdict_rows = 0  # the GPM verdict, wrapped the same way (0: none)
        self._texts: tuple[str, str | None, str | None] = ("", None, None)  # state, sev, verdict
        self._lines: list[list[Part]] = []  # as drawn (laid out for _lines_width)
        self._lines_width = 0
        self._styles: dict[StyleKey, Style] = {}

    # -- layout -------------------------------------------------------------------------

    def set_spark_rows(self, rows: int) -> None:
        """History rows `rows` tall (1 to SPARK_ROWS_MAX): used when the terminal has
        room to spare; the gauge sits in the middle of its row."""
        rows = max(1, min(SPARK_ROWS_MAX, rows))
        if rows != self.spark_rows:
            self.spark_rows = rows
            self._apply_rows()

    def grid(self, width: int | None = None) -> PanelGrid:
        """Where the parts go at `width` (the panel's content width by default)."""
        return PanelGrid(self.size.width if width is None else width, self.spark_rows,
                         self.state_rows, self.verdict_rows)

    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        return self.grid(width).height

    def _apply_rows(self) -> None:
        self._lines = []
        self.refresh(layout=True)

    def part_region(self, part: str) -> Region:
        """Where a part of the panel is on screen (`PanelGrid.part`'s names; an empty
        region for the verdict when there is none)."""
        box, content = self.grid().part(part), self.content_region
        return Region(content.x + box.x, content.y + box.y, box.width, box.height)

    # -- what is shown ------------------------------------------------------------------

    @property
    def state_text(self) -> str:
        """The throttle state in words, as shown ("" before the first frame)."""
        return self._texts[0]

    @property
    def verdict_text(self) -> str | None:
        """The GPM verdict line as shown, or None when there is none."""
        return self._texts[2]

    def spark_series(self, metric: str) -> str:
        """The History series the graph of `metric` draws."""
        return SPARK_SERIES.get(metric, metric)

    def spark_rows_of(self, metric: str) -> list[str]:
        """The rows of block characters the graph of `metric` shows, top row first."""
        region = self.part_region(f"s-{metric}")
        x = region.x - self.content_region.x
        top = region.y - self.content_region.y
        lines = self._laid_out()
        return ["".join(t for t, _k in lines[y])[x:x + region.width]
                for y in range(top, min(top + region.height, len(lines)))]

    def _measure(self) -> None:
        """Rows for the state sentence and the verdict, wrapped to the panel's width."""
        width = self.size.width  # both lines span the panel's three columns
        state, _sev, verdict = self._texts
        state_rows = min(STATE_ROWS_MAX, len(wrap_rows(state, width)))
        verdict_rows = 0 if verdict is None else min(STATE_ROWS_MAX,
                                                     len(wrap_rows(verdict, width)))
        if (state_rows, verdict_rows) != (self.state_rows, self.verdict_rows):
            self.state_rows, self.verdict_rows = state_rows, verdict_rows
            self._apply_rows()

    def on_resize(self) -> None:
        # The first frame may come before the panel has a width: wrap once it has one.
        self._measure()
        self._lines = []
        self.refresh()

    def update_frame(self, f: GpuFrame) -> None:
        g = f.sample
        self.info = g.info  # opened late (it was not answering at first)
        self._frame = f
        title = panel_title(g.info, mig_summary(g))
        if self.border_title != title:
            self.border_title = title
        st = state(g, f.episode, f.now)
        words = None if g.lost or g.stale else gpm_verdict(g)
        self._texts = (st.text, st.severity, None if words is None else f"◇ {words}")
        self.set_class(st.severity == "warning", "-throttling")
        self.set_class(st.severity == "error", "-lost")
        self.set_class(g.stale, "-stale")
        subtitle = f"{no_markup(g.info.pci_bus_id)} · history {window_label(f.seconds)}"
        if self.border_subtitle != subtitle:
            self.border_subtitle = subtitle
        width = self.size.width
        if not width:  # not laid out yet: drawn when it is
            return
        self._measure()
        new = self._layout_lines(width)
        old, self._lines, self._lines_width = self._lines, new, width
        if not old or len(old) != len(new):  # nothing drawn to compare with
            self.refresh()
            return
        # Only the lines that changed: most of a panel (labels, scales, the lines of a
        # graph that did not move) is the same from one tick to the next.
        repaint_changed(self, old, new)

    def _laid_out(self) -> list[list[Part]]:
        width = self.size.width
        if self._lines_width != width or not self._lines:
            self._lines = self._layout_lines(width)
            self._lines_width = width
        return self._lines

    def _layout_lines(self, width: int) -> list[list[Part]]:
        """Every line of the panel's content as parts, top to bottom, on its grid."""
        f = self._frame
        g = None if f is None else f.sample
        views = gauges(g) if g is not None else {}
        grid = self.grid(width)
        graph, rows = grid.graph_width, grid.spark_rows
        lines: list[list[Part]] = []
        for metric, label in HISTORY_METRICS:
            lines += [[(" " * width, BG)] for _ in range(grid.band_y(metric) - len(lines))]
            gauge_box, scale_box = grid.gauge(metric), grid.scale(metric)
            gauge = _gauge(views.get(metric, NO_VALUE), label, gauge_box.width, 12)
            blank_gauge: list[Part] = [(" " * gauge_box.width, BASE)]
            spark: list[str] = [""] * rows
            scale_text = ""
            if f is not None and g is not None:
                scale = metric_scale(g, metric) or f.scales.get(metric)
                if graph > 0:
                    values = f.history.buckets(g.index, self.spark_series(metric),
                                               f.seconds, graph)
                    spark = sparkline_rows(values, scale, rows)
                scale_text = scale_lines(metric, scale, rows)
            scales = _text_rows([(t, (0, y)) for y, t in enumerate(scale_text.split("\n"))],
                                rows, scale_box.width, MUTED)
            for y in range(rows):
                lines.append([*(gauge if y == grid.gauge_row else blank_gauge),
                              (" " * GAP, BG),
                              (spark[y][:graph].ljust(graph), "gpupanel--spark"),
                              (" " * GAP, BG), *scales[y]])
        seconds = 300.0 if f is None else f.seconds
        pstate = "" if g is None else pstate_text(g)
        fan, pstate_box = grid.fan, grid.pstate
        lines.append([*_gauge(views.get("fan", NO_VALUE), "FAN", fan.width, 4),
                      (" " * (pstate_box.x - fan.width), BG),
                      *_text(pstate, pstate_box.width, BASE), (" " * GAP, BG),
                      (time_axis(seconds, graph)[:graph].ljust(graph), MUTED),
                      (" " * GAP, BG), *_text("", SCALE_WIDTH, MUTED)])
        state, severity, verdict = self._texts
        lines += _text_rows(_wrapped(state, width), grid.state.height, width,
                            SEVERITY_STYLE.get(severity or "", BASE))
        if verdict is not None and grid.verdict.height:
            lines += _text_rows(_wrapped(verdict, width), grid.verdict.height, width,
                                "gpupanel--verdict")
        return lines

    # -- drawing ------------------------------------------------------------------------

    def notify_style_update(self) -> None:
        self._styles = {}  # a theme or a class changed: styles are resolved again
        super().notify_style_update()

    def _style(self, key: StyleKey) -> Style:
        style = self._styles.get(key)
        if style is None:
            if isinstance(key, tuple):  # a line of text, as a Static draws it
                name, offset = key
                style = self._style(name) + Style.from_meta({"offset": offset})
            elif key == BG:
                style = Style(bgcolor=self.rich_style.bgcolor)
            elif key == BASE:
                style = self.rich_style
            else:
                style = self.get_component_rich_style(str(key))
            self._styles[key] = style
        return style

    def render_line(self, y: int) -> Strip:
        width = self.size.width
        lines = self._laid_out()
        if y >= len(lines) or width <= 0:
            return Strip.blank(width, self._style(BG))
        # Cut or padded to the width: a panel narrower than its fixed columns crops.
        return Strip([Segment(text, self._style(key)) for text, key in lines[y]]
                     ).adjust_cell_length(width, self._style(BG))
