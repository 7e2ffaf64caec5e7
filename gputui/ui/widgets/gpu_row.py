"""Compact GPU rows: every headline metric in fixed columns under one header line.

Each row has the same columns whatever its GPU's state (a lost GPU shows "—" where it
has no value), so values line up across rows and the SM clock — the proof of
throttling — is there at 80 columns. Column widths depend on the terminal width only.
A second line per GPU (when the layout has room) holds its state in words.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from rich.cells import cell_len
from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual.strip import Strip
from textual.widget import Widget

from gputui.safe_text import printable
from gputui.telemetry.model import DeviceInfo, GpuSample
from gputui.telemetry.units import NA, fmt_pct
from gputui.ui.widgets.gpu_view import (
    DASH,
    GpuFrame,
    ago_text,
    gauges,
    gpm_marker,
    gpm_verdict,
    short_name,
    state,
)
from gputui.ui.widgets.partial import repaint_changed
from gputui.ui.widgets.sparkline import WindowLine, sparkline_rows

GIB = 2**30
MEDIUM_COLUMNS = 108  # from here the row has the GPU's name and power/temperature limits
WIDE_COLUMNS = 160  # from here a longer history
MINI_COLUMNS = 79  # below this (a side box, not the 80-column monitor): no history, SM act, MEMC
NAME_WIDTH = 15


@dataclass(frozen=True, slots=True)
class Column:
    """One column of the compact rows."""

    key: str
    header: str
    width: int
    left: bool = False  # left-aligned (text), else right-aligned (numbers)


def row_columns(width: int) -> tuple[Column, ...]:
    """The compact row's columns for a terminal (row) `width`, state last (the rest)."""
    medium = width >= MEDIUM_COLUMNS
    mini = width < MINI_COLUMNS  # a side box (the doctor's): what health is about
    hist = 24 if width >= WIDE_COLUMNS else 12 if medium else 7
    cols = [Column("index", "#", 2)]
    if medium:
        cols.append(Column("name", "name", NAME_WIDTH, left=True))
    cols.append(Column("util_gpu_pct", "GPU", 4))
    if not mini:
        cols += [Column("history", "util", hist, left=True),
                 Column("sm_active_pct", "SMact", 5),
                 Column("util_mem_pct", "MEMC", 4)]
    cols += [
        Column("mem_used_bytes", "VRAM", 8),
        Column("power_w", "PWR", 8 if medium else 5),
        Column("temp_c", "TEMP", 7 if medium else 5),
        Column("clock_sm_mhz", "SM clk", 12),
    ]
    used = sum(c.width + 1 for c in cols) + 1
    cols.append(Column("state", "state", max(1, width - used), left=True))
    return tuple(cols)


def _pad(text: str, col: Column) -> str:
    if cell_len(text) > col.width:
        text = text[: max(0, col.width - 1)] + "…"
    pad = " " * max(0, col.width - cell_len(text))
    return text + pad if col.left else pad + text


def header_text(width: int, seconds: float) -> str:
    """The column header over the rows; the history column says its window."""
    parts = []
    for col in row_columns(width):
        label = col.header
        if col.key == "history":
            ago = ago_text(seconds)
            label = next((t for t in (f"util {ago}…now", f"util {ago}", f"{ago}…now")
                          if cell_len(t) <= col.width), ago)
        parts.append(_pad(label, col))
    return " ".join(parts).rstrip()


Part = tuple[str, str | None]  # (text, component class or None)
SEVERITY_CLASS = {"warning": "gpurow--warning", "error": "gpurow--error"}


def _values(g: GpuSample, medium: bool) -> dict[str, tuple[str, str | None]]:
    """Each column's text and severity for a sample that has values."""
    v = gauges(g)
    total = g.mem_total_bytes or g.info.mem_total_bytes
    vram = NA if g.mem_used_bytes is None else (
        f"{g.mem_used_bytes / GIB:.0f}/{total / GIB:.0f}G" if total
        else f"{g.mem_used_bytes / GIB:.0f}G")
    if g.power_w is None:
        pwr = NA
    elif medium and g.power_limit_w:
        pwr = f"{g.power_w:.0f}/{g.power_limit_w:.0f}W"
    else:
        pwr = f"{g.power_w:.0f}W"
    slow = g.info.temp_slowdown_c
    if g.temp_c is None:
        temp = NA
    else:
        temp = f"{g.temp_c}/{slow}°C" if medium and slow else f"{g.temp_c}°C"
    return {
        "util_gpu_pct": (fmt_pct(g.util_gpu_pct), None),
        "sm_active_pct": (v["sm_active_pct"].text, None),
        "util_mem_pct": (fmt_pct(g.util_mem_pct), None),
        "mem_used_bytes": (vram, v["mem_used_bytes"].severity),
        "power_w": (pwr, v["power_w"].severity),
        "temp_c": (temp, v["temp_c"].severity),
        "clock_sm_mhz": (v["clock_sm_mhz"].text, v["clock_sm_mhz"].severity),
    }


def row_lines(f: GpuFrame | None, info: DeviceInfo, width: int, lines: int = 1
              ) -> list[tuple[Part, ...]]:
    """The row's lines as (text, class) parts, laid out on `row_columns(width)`."""
    cols = row_columns(width)
    medium = any(c.key == "name" for c in cols)
    name = printable(short_name(info.name))
    g = f.sample if f is not None else None
    st = state(g, f.episode, f.now) if f is not None and g is not None else None
    no_values = g is None or g.lost or g.error is not None  # nothing it measured
    values = {} if no_values or g is None else _values(g, medium)
    parts: list[Part] = []
    for col in cols:
        if col.key == "index":
            text, cls = _pad(str(info.index), col), "gpurow--name"
        elif col.key == "name":
            text, cls = _pad(name, col), "gpurow--name"
        elif col.key == "history":
            drawn = ""
            if f is not None and f.history is not None:
                vals = f.history.buckets(info.index, "util_gpu_pct", f.seconds, col.width)
                drawn = sparkline_rows(vals, 100.0)[0]
            text, cls = _pad(drawn, col), "gpurow--spark"
        elif col.key == "state":
            short = "" if st is None else st.short
            marker = None if g is None or no_values else gpm_marker(g)
            if marker:
                short = marker if short == "✓ ok" else f"{short} {marker}"
            cls = None if st is None else SEVERITY_CLASS.get(st.severity or "")
            text = _pad(short, col).rstrip()
        else:
            val, sev = values.get(col.key, (DASH, None))
            text, cls = _pad(val, col), SEVERITY_CLASS.get(sev or "")
        parts.append((" " if parts else "", None))
        parts.append((text, cls))
    metrics = tuple(p for p in parts if p[0])
    if lines == 1:
        return [metrics]
    words = "" if st is None else st.text
    if g is not None and not no_values and gpm_marker(g):
        words += f"  ◇ {gpm_verdict(g)}"
    cls = None if st is None else SEVERITY_CLASS.get(st.severity or "")
    if medium:  # the name is on the metrics line: the words go under it
        lead: tuple[Part, ...] = (("   ", None),)
    else:  # 80 columns: "index name" first, then the metrics (index not repeated)
        lead = ((_pad(str(info.index), cols[0]), "gpurow--name"), (" ", None),
                (name, "gpurow--name"), ("  ", None))
        metrics = ((" " * cols[0].width, None), *metrics[1:])
    room = width - sum(cell_len(t) for t, _ in lead)
    words = _fit_clauses(words, room)
    second = (*lead, (words, cls))
    return [metrics, second] if medium else [second, metrics]


def _fit_clauses(words: str, room: int) -> str:
    """The state sentence in `room` cells: whole clauses from the start ("⚠ THROTTLED:
    HW thermal slowdown since 07:43:48 (2s)"), never a word cut in half — the clauses
    left out (SM clock, temperature) are the metrics line's own columns. Only a first
    clause wider than the row is cut."""
    if cell_len(words) <= room:
        return words
    clauses = words.split(", ")
    while len(clauses) > 1 and cell_len(", ".join(clauses)) > room:
        clauses.pop()
    fitted = ", ".join(clauses)
    if cell_len(fitted) <= room:
        return fitted
    return fitted[: max(0, room - 1)] + "…"


class GpuRow(Widget):
    """One GPU in one or two lines, on the columns of `row_columns`."""

    COMPONENT_CLASSES: ClassVar[set[str]] = {
        "gpurow--name", "gpurow--label", "gpurow--spark", "gpurow--warning", "gpurow--error",
    }
    DEFAULT_CSS = """
    GpuRow { height: 1; }
    GpuRow > .gpurow--name { text-style: bold; }
    GpuRow > .gpurow--label { color: $text-muted; }
    GpuRow > .gpurow--spark { color: $secondary; }
    GpuRow > .gpurow--warning { color: $warning; text-style: bold; }
    GpuRow > .gpurow--error { color: $error; text-style: bold; }
    """

    def __init__(self, info: DeviceInfo, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.info = info
        self._frame: GpuFrame | None = None
        self._lines: list[tuple[Part, ...]] = []
        self._lines_width = 0  # the width _lines were laid out for
        self._strips: dict[int, Strip] = {}  # drawn lines, until the parts change
        self._styles: dict[str | None, Style] = {}  # per component class
        self.lines = 1

    def set_lines(self, lines: int) -> None:
        """One line, or two (the second: the state in words)."""
        if lines != self.lines:
            self.lines = lines
            self.styles.height = lines
            self._lines = []
            self.refresh()

    def update_frame(self, f: GpuFrame) -> None:
        self.info = f.sample.info  # opened late (it was not answering at first)
        self._frame = f
        width = self.size.width
        if not width:
            return
        new = row_lines(f, self.info, width, self.lines)
        if new == self._lines and width == self._lines_width:
            return
        old, self._lines, self._lines_width = self._lines, new, width
        self._strips.clear()
        if not old:  # nothing drawn to compare with
            self.refresh()
            return
        repaint_changed(self, old, new)

    def on_resize(self) -> None:
        self._lines = []
        self._strips.clear()
        self.refresh()

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._strips.clear()
        self._styles.clear()

    def _part_styles(self) -> dict[str | None, Style]:
        """The style of each component class (None: the row's own), kept until the CSS
        changes (a theme): Textual forgets its own copy at every refresh, and working
        them out again was most of what drawing a row cost."""
        if not self._styles:
            self._styles = {None: self.rich_style}
            self._styles.update((c, self.get_component_rich_style(c))
                                for c in self.COMPONENT_CLASSES)
            self._strips.clear()
        return self._styles

    def render_line(self, y: int) -> Strip:
        """One line straight from the parts laid out by update_frame: a segment per part
        in its component's style (no Text/Content layout pass per repaint)."""
        width = self.size.width
        lines = self._laid_out()
        styles = self._part_styles()
        strip = self._strips.get(y)
        if strip is not None and strip.cell_length == width:
            return strip
        base = styles[None]
        if y >= len(lines) or width <= 0:
            return Strip.blank(width, base)
        # One Strip per line, its neighbouring parts of the same style joined and the rest
        # of the row padded here (what simplify() and adjust_cell_length() would make, at
        # the cost of one Strip instead of three: a Strip is not cheap to make).
        texts: list[str] = []
        segment_styles: list[Style] = []
        for t, cls in lines[y]:
            if not t:
                continue
            style = styles[cls]
            if segment_styles and segment_styles[-1] == style:
                texts[-1] += t
            else:
                texts.append(t)
                segment_styles.append(style)
        segments = [Segment(t, st) for t, st in zip(texts, segment_styles, strict=True)]
        used = sum(cell_len(t) for t in texts)
        if used > width:
            strip = Strip(segments).adjust_cell_length(width, base)
        else:
            if used < width:
                segments.append(Segment(" " * (width - used), base))
            strip = Strip(segments, width)
        self._strips[y] = strip
        return strip

    def render(self) -> Text:
        """The same lines as rich Text (what `render_line` draws; tests and copies read it)."""
        text = Text(no_wrap=True, end="")
        styles = self._part_styles()
        for y, line in enumerate(self._laid_out()):
            if y:
                text.append("\n")
            for t, cls in line:
                text.append(t, styles[cls] if cls else Style())
        return text

    def _laid_out(self) -> list[tuple[Part, ...]]:
        """The lines for the current width (laid out by update_frame: not twice a tick)."""
        width = self.size.width
        if self._lines_width != width or len(self._lines) != self.lines:
            self._lines = row_lines(self._frame, self.info, width, self.lines)
            self._lines_width = width
            self._strips.clear()
        return self._lines


class RowsHeader(WindowLine):
    """The column header over the compact rows (follows its own width and the window)."""

    DEFAULT_CSS = """
    RowsHeader { height: 1; color: $text-muted; text-style: bold; }
    """

    def line(self, width: int) -> str:
        return header_text(width, self.seconds)
