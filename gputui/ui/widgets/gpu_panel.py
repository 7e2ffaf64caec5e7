"""Per-GPU widgets: a full panel (gauges, labelled sparklines, throttle state) and the area
that holds the panels or the compact rows (`gpu_row`)."""

from __future__ import annotations

from rich.cells import cell_len
from rich.text import Text
from textual.app import ComposeResult
from textual.await_complete import AwaitComplete
from textual.containers import Grid, Vertical, VerticalScroll
from textual.widget import AwaitMount, Widget
from textual.widgets import Static

from gputui.safe_text import no_markup
from gputui.telemetry.model import DeviceInfo
from gputui.ui.layout import GPU_AREA_MAX, PANEL_HEIGHT, SPARK_ROWS_MAX
from gputui.ui.widgets.gauge import Gauge
from gputui.ui.widgets.gpu_row import GpuRow, RowsHeader
from gputui.ui.widgets.gpu_view import (
    HISTORY_METRICS,
    SPARK_SERIES,
    GpuFrame,
    gauges,
    gpm_verdict,
    metric_scale,
    pstate_text,
    scale_lines,
    state,
)
from gputui.ui.widgets.mig_view import mig_summary
from gputui.ui.widgets.sparkline import FixedSparkline, TimeAxis

__all__ = ["GpuArea", "GpuFrame", "GpuPanel", "GpuRow", "TextLine", "panel_title",
           "window_label"]

STATE_ROWS_MAX = 3  # the throttle sentence at 80 columns takes two
SCALE_WIDTH = 9  # "0–1980MHz": the scale column beside the sparklines
GAUGE_LABEL_WIDTH = 7  # "SM ACT "
GAUGE_WIDTH = 32  # label, a 12-cell bar, the value ("1410/1980MHz"); the graphs get the rest


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


def _wrapped_rows(widget: Widget, width: int, text: str | None) -> int:
    """Rows `text` takes wrapped to `width` cells (0: no text; 1 until there is a width)."""
    if text is None:
        return 0
    if width <= 0 or cell_len(text) <= width:
        return 1
    return min(STATE_ROWS_MAX, len(Text(text).wrap(widget.app.console, width)))


class GpuPanel(Widget):
    DEFAULT_CSS = f"""
    GpuPanel {{
        layout: grid;
        grid-size: 3;
        grid-columns: {GAUGE_WIDTH} 1fr {SCALE_WIDTH};
        grid-rows: 1;
        grid-gutter: 0 2;
        height: {PANEL_HEIGHT};
        border: round $primary 60%;
        border-title-color: $foreground;
        border-title-style: bold;
        border-subtitle-color: $text-muted;
        padding: 0 1;
    }}
    GpuPanel.-throttling {{ border: round $warning; }}
    GpuPanel.-lost {{ border: heavy $error; }}
    GpuPanel.-stale {{ border: heavy $warning; }}
    GpuPanel > .misc {{ layout: horizontal; height: 1; }}
    GpuPanel > .misc > Gauge {{ width: 1fr; }}
    GpuPanel > .misc > .pstate {{ width: 5; margin-left: 1; }}
    GpuPanel > .scale {{ color: $text-muted; }}
    GpuPanel > .state {{ column-span: 3; height: 1; }}
    GpuPanel > .state.-warning {{ color: $warning; text-style: bold; }}
    GpuPanel > .state.-error {{ color: $error; text-style: bold; }}
    GpuPanel > .verdict {{ column-span: 3; height: 1; color: $accent; display: none; }}
    """

    def __init__(self, info: DeviceInfo, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.info = info
        self.border_title = panel_title(info)
        self.border_subtitle = no_markup(info.pci_bus_id)
        self._pending: GpuFrame | None = None
        self._ready = False
        self.spark_rows = 1
        self.state_rows = 1  # the throttle sentence wraps onto more rows, never cut
        self.verdict_rows = 0  # the GPM verdict, wrapped the same way (0: none)
        self._scale_keys: dict[str, tuple[float | None, int]] = {}
        self._lines: tuple[str | None, str | None] = (None, None)  # state, verdict

    def compose(self) -> ComposeResult:
        for metric, label in HISTORY_METRICS:
            yield Gauge(label, label_width=GAUGE_LABEL_WIDTH, value_width=12, id=f"g-{metric}")
            yield FixedSparkline(self.info.index, metric, id=f"s-{metric}",
                                 series=SPARK_SERIES.get(metric))
            yield TextLine("", classes="scale", id=f"x-{metric}")
        with Widget(classes="misc"):
            yield Gauge("FAN", label_width=GAUGE_LABEL_WIDTH, id="g-fan", value_width=4)
            yield TextLine("", classes="pstate", id="pstate")
        yield TimeAxis(id="axis")
        yield TextLine("", classes="scale", id="axis-end")
        yield TextLine("", classes="state", id="state")
        yield TextLine("", classes="verdict", id="verdict")

    def on_mount(self) -> None:
        # Looked up once: update_frame runs every tick for every GPU.
        self._gauges = {g.id.removeprefix("g-"): g for g in self.query(Gauge) if g.id}
        self._sparks = {s.metric: s for s in self.query(FixedSparkline)}
        self._scales = {m: self.query_one(f"#x-{m}", TextLine) for m, _ in HISTORY_METRICS}
        self._pstate = self.query_one("#pstate", TextLine)
        self._axis = self.query_one(TimeAxis)
        self._state = self.query_one("#state", TextLine)
        self._verdict = self.query_one("#verdict", TextLine)
        self._ready = True
        self._apply_rows()
        if self._pending is not None:
            self.update_frame(self._pending)

    def set_spark_rows(self, rows: int) -> None:
        """History rows `rows` tall (1 to SPARK_ROWS_MAX): used when the terminal has
        room to spare; the gauge sits in the middle of its row."""
        rows = max(1, min(SPARK_ROWS_MAX, rows))
        if rows == self.spark_rows:
            return
        self.spark_rows = rows
        if self._ready:
            self._apply_rows()

    def _apply_rows(self) -> None:
        rows = self.spark_rows
        # Tall sparklines: a blank row under each but the last (the time axis is under
        # that one), so that neighbours never run together.
        gap = 1 if rows > 1 else 0
        grid = [rows + gap] * (len(HISTORY_METRICS) - 1) + [rows, 1, self.state_rows]
        if self.verdict_rows:
            grid.append(self.verdict_rows)
        self.styles.height = 2 + sum(grid)
        self.styles.grid_rows = " ".join(map(str, grid))
        self._state.styles.height = self.state_rows
        self._verdict.styles.height = max(1, self.verdict_rows)
        for metric, _label in HISTORY_METRICS:
            self._gauges[metric].styles.height = rows
            self._sparks[metric].styles.height = rows
            self._scales[metric].styles.height = rows

    def _measure(self) -> None:
        """Rows for the state sentence and the verdict, wrapped to the panel's width."""
        width = self.content_size.width  # both lines span the panel's three columns
        state_rows = max(1, _wrapped_rows(self, width, self._lines[0]))
        verdict_rows = _wrapped_rows(self, width, self._lines[1])
        if (state_rows, verdict_rows) != (self.state_rows, self.verdict_rows):
            self.state_rows, self.verdict_rows = state_rows, verdict_rows
            self._apply_rows()

    def on_resize(self) -> None:
        # The first frame may come before the panel has a width: wrap once it has one.
        if self._ready:
            self._measure()

    def update_frame(self, f: GpuFrame) -> None:
        if not self._ready:  # a frame that arrives while mounting is shown on mount
            self._pending = f
            return
        g = f.sample
        self.info = g.info  # opened late (it was not answering at first)
        title = panel_title(g.info, mig_summary(g))
        if self.border_title != title:
            self.border_title = title
        views = gauges(g)
        for metric, _label in HISTORY_METRICS:
            scale = metric_scale(g, metric) or f.scales.get(metric)
            self._sparks[metric].set_source(f.history, f.seconds, scale)
            if self._scale_keys.get(metric) != (scale, self.spark_rows):
                self._scale_keys[metric] = (scale, self.spark_rows)
                self._scales[metric].set_text(scale_lines(metric, scale, self.spark_rows))
        for key, gauge in self._gauges.items():
            v = views[key]
            gauge.set(v.fraction, v.text, v.severity)
        self._pstate.set_text(pstate_text(g))
        self._axis.set_seconds(f.seconds)
        st = state(g, f.episode, f.now)
        self._state.set_text(st.text, st.severity)
        words = None if g.lost or g.stale else gpm_verdict(g)
        if words is not None:
            self._verdict.set_text(f"◇ {words}")
        self._verdict.display = words is not None
        self._lines = (st.text, None if words is None else f"◇ {words}")
        self._measure()
        self.set_class(st.severity == "warning", "-throttling")
        self.set_class(st.severity == "error", "-lost")
        self.set_class(g.stale, "-stale")
        subtitle = f"{no_markup(g.info.pci_bus_id)} · history {window_label(f.seconds)}"
        if self.border_subtitle != subtitle:
            self.border_subtitle = subtitle


class GpuArea(VerticalScroll):
    """All GPUs: a grid of panels, or compact rows; only the visible kind is updated.

    Panels that do not fit (forced with `c` in a small terminal) scroll: with the mouse,
    or with the keys once focused (Tab), which it only accepts while it can scroll.
    """

    # max-height: the layout chooser counts on it (GPU_AREA_MAX).
    DEFAULT_CSS = f"""
    GpuArea {{ height: auto; max-height: {round(GPU_AREA_MAX * 100)}%;
               scrollbar-size-vertical: 1; }}
    """ + """
    GpuArea:focus { scrollbar-color: $accent; scrollbar-background: $accent 30%; }
    GpuArea > #panels { layout: grid; grid-size: 1; grid-rows: auto; grid-gutter: 0 1;
                        height: auto; }
    GpuArea > #rows { height: auto; border-bottom: solid $primary 40%; }
    GpuArea > #rows-header { display: none; }
    GpuArea.-compact > #panels { display: none; }
    GpuArea > #rows { display: none; }
    GpuArea.-compact > #rows { display: block; }
    GpuArea.-compact > #rows-header { display: block; }
    """

    def allow_focus(self) -> bool:
        return self.max_scroll_y > 0

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.indices: tuple[int, ...] = ()
        self._infos: tuple[DeviceInfo, ...] = ()
        self._panels: dict[int, GpuPanel] = {}
        self._rows: dict[int, GpuRow] = {}
        self.compact = False
        self.columns = 1
        self.spark_rows = 1
        self.row_lines = 1
        self._header = RowsHeader(id="rows-header")  # kept: updated every tick

    def compose(self) -> ComposeResult:
        yield Grid(id="panels")
        yield self._header
        yield Vertical(id="rows")

    async def set_devices(self, infos: tuple[DeviceInfo, ...]) -> None:
        """Mount widgets for these GPUs: only the kind shown now (panels or rows).

        The other kind is mounted when the layout first switches to it: 8 panels are
        ~200 widgets, and mounting what is not shown costs start-up time and frames.
        Call set_layout first, so the first frame already has the right kind.
        """
        indices = tuple(i.index for i in infos)
        if indices == self.indices:
            return
        panels = self.query_one("#panels", Grid)
        rows = self.query_one("#rows", Vertical)
        await panels.remove_children()
        await rows.remove_children()
        self._panels, self._rows = {}, {}
        self._infos = infos
        self.indices = indices
        await self._mount_kind(self.compact)

    def _mount_kind(self, compact: bool) -> AwaitComplete | AwaitMount:
        """Mount the rows (compact) or panels for the current GPUs, if not yet mounted."""
        if compact and not self._rows and self._infos:
            self._rows = {i.index: GpuRow(i, id=f"row-{i.index}") for i in self._infos}
            for row in self._rows.values():
                row.set_lines(self.row_lines)
            return self.query_one("#rows", Vertical).mount_all(list(self._rows.values()))
        if not compact and not self._panels and self._infos:
            self._panels = {i.index: GpuPanel(i, id=f"gpu-{i.index}") for i in self._infos}
            for panel in self._panels.values():
                panel.set_spark_rows(self.spark_rows)
            return self.query_one("#panels", Grid).mount_all(list(self._panels.values()))
        return AwaitComplete.nothing()

    def set_layout(self, compact: bool, columns: int, spark_rows: int = 1,
                   row_lines: int = 1) -> None:
        if spark_rows != self.spark_rows:
            self.spark_rows = spark_rows
            for panel in self._panels.values():
                panel.set_spark_rows(spark_rows)
        if row_lines != self.row_lines:
            self.row_lines = row_lines
            for row in self._rows.values():
                row.set_lines(row_lines)
        if compact != self.compact:
            self.compact = compact
            self.set_class(compact, "-compact")
            self._mount_kind(compact)  # not awaited: panels show their frame on mount
        if columns != self.columns:
            self.columns = columns
            self.query_one("#panels", Grid).styles.grid_size_columns = columns

    def update_frames(self, frames: list[GpuFrame]) -> None:
        widgets = self._rows if self.compact else self._panels
        if self.compact and frames:
            self._header.set_seconds(frames[0].seconds)
        for f in frames:
            w = widgets.get(f.sample.index)
            if w is not None:
                w.update_frame(f)
