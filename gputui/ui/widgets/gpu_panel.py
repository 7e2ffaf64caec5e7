"""Per-GPU widgets: a full panel (gauges, sparklines, throttle state) and a compact row."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import ClassVar

from rich.cells import cell_len
from rich.style import Style
from rich.text import Text
from textual.app import ComposeResult
from textual.await_complete import AwaitComplete
from textual.containers import Grid, Vertical, VerticalScroll
from textual.geometry import Region
from textual.widget import AwaitMount, Widget
from textual.widgets import Static

from gputui.safe_text import no_markup, printable
from gputui.telemetry.model import DeviceInfo, GpuSample
from gputui.telemetry.throttle import ThrottleEpisode
from gputui.ui.widgets.gauge import Gauge
from gputui.ui.widgets.gpu_view import (
    HISTORY_METRICS,
    gauges,
    metric_scale,
    pstate_text,
    short_name,
    state,
)
from gputui.ui.widgets.sparkline import FixedSparkline, HistoryLike, sparkline_rows

PANEL_HEIGHT = 9  # 7 rows inside a border, with one-row sparklines
PANEL_MIN_WIDTH = 96  # below this a second column of panels is not worth it
STATE_RESERVE = 18  # cells a compact row keeps for its state ("  ⚠ HW thermal 3m12s")
STATE_ROWS_MAX = 3  # the throttle sentence at 80 columns takes two
SPARK_ROWS_MAX = 3  # sparklines grow to this many rows when the terminal has room


def panel_height(spark_rows: int = 1) -> int:
    """A panel's height: border, one history row (gauge + sparkline) per metric, each
    `spark_rows` tall, then the fan/SM row and the throttle line."""
    return 2 + len(HISTORY_METRICS) * spark_rows + 2


@dataclass(frozen=True, slots=True)
class GpuFrame:
    """Everything one GPU widget needs for one tick."""

    sample: GpuSample
    episode: ThrottleEpisode | None
    now: datetime
    history: HistoryLike
    seconds: float
    # Sparkline tops last known for this GPU (a lost GPU has no limits any more: keep
    # the scale its history was drawn on), kept by the view from every frame.
    scales: Mapping[str, float] = field(default_factory=dict)


def panel_title(info: DeviceInfo) -> str:
    # The device name comes from the driver: shown, never parsed as markup.
    return f"GPU {info.index} · {no_markup(info.name)}"


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


class GpuPanel(Widget):
    DEFAULT_CSS = f"""
    GpuPanel {{
        layout: grid;
        grid-size: 2;
        grid-columns: 1fr 1fr;
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
    GpuPanel > .state {{ column-span: 2; height: 1; }}
    GpuPanel > .state.-warning {{ color: $warning; text-style: bold; }}
    GpuPanel > .state.-error {{ color: $error; text-style: bold; }}
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

    def compose(self) -> ComposeResult:
        for metric, label in HISTORY_METRICS:
            yield Gauge(label, value_width=13, id=f"g-{metric}")
            yield FixedSparkline(self.info.index, metric, id=f"s-{metric}")
        with Widget(classes="misc"):
            yield Gauge("FAN", id="g-fan", value_width=4)
            yield TextLine("", classes="pstate", id="pstate")
        yield Gauge("SM", id="g-clock_sm_mhz", value_width=13)
        yield TextLine("", classes="state", id="state")

    def on_mount(self) -> None:
        # Looked up once: update_frame runs every tick for every GPU.
        self._gauges = {g.id.removeprefix("g-"): g for g in self.query(Gauge) if g.id}
        self._sparks = {s.metric: s for s in self.query(FixedSparkline)}
        self._pstate = self.query_one("#pstate", TextLine)
        self._state = self.query_one("#state", TextLine)
        self._ready = True
        if self.spark_rows != 1 or self.state_rows != 1:
            self._apply_spark_rows()
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
            self._apply_spark_rows()

    def _apply_spark_rows(self) -> None:
        rows = self.spark_rows
        self.styles.height = panel_height(rows) + self.state_rows - 1
        self.styles.grid_rows = " ".join([str(rows)] * len(HISTORY_METRICS)
                                         + ["1", str(self.state_rows)])
        self._state.styles.height = self.state_rows
        for metric, _label in HISTORY_METRICS:
            self._gauges[metric].styles.height = rows
            self._sparks[metric].styles.height = rows

    def update_frame(self, f: GpuFrame) -> None:
        if not self._ready:  # a frame that arrives while mounting is shown on mount
            self._pending = f
            return
        g = f.sample
        if g.info != self.info:  # opened late (it was not answering at first)
            self.info = g.info
            self.border_title = panel_title(g.info)
        views = gauges(g)
        for metric, _label in HISTORY_METRICS:
            scale = metric_scale(g, metric) or f.scales.get(metric)
            self._sparks[metric].set_source(f.history, f.seconds, scale)
        for key, gauge in self._gauges.items():
            v = views[key]
            gauge.set(v.fraction, v.text, v.severity)
        self._pstate.set_text(pstate_text(g))
        st = state(g, f.episode, f.now)
        self._state.set_text(st.text, st.severity)
        width = self._state.size.width
        state_rows = 1
        if width and cell_len(st.text) > width:
            state_rows = min(STATE_ROWS_MAX, len(Text(st.text).wrap(self.app.console, width)))
        if state_rows != self.state_rows:
            self.state_rows = state_rows
            self._apply_spark_rows()
        self.set_class(st.severity == "warning", "-throttling")
        self.set_class(st.severity == "error", "-lost")
        self.set_class(g.stale, "-stale")
        subtitle = f"{no_markup(g.info.pci_bus_id)} · history {window_label(f.seconds)}"
        if self.border_subtitle != subtitle:
            self.border_subtitle = subtitle


def _changed_end(old: object, new: tuple[tuple[str, str | None], ...]) -> int | None:
    """One past the last cell that differs between two rows of (text, style class) parts;
    None when there is nothing to compare with (repaint it all)."""
    if not isinstance(old, tuple):
        return None

    def cells(parts: tuple[tuple[str, str | None], ...]) -> list[tuple[str, str | None]]:
        return [(ch, cls) for text, cls in parts for ch in text]

    a, b = cells(old), cells(new)  # type: ignore[arg-type]
    if any(cell_len(ch) != 1 for ch, _ in b) or any(cell_len(ch) != 1 for ch, _ in a):
        return None  # wide characters: cell and character positions differ
    n = max(len(a), len(b))
    a += [("", None)] * (n - len(a))
    b += [("", None)] * (n - len(b))
    for i in range(n - 1, -1, -1):
        if a[i] != b[i]:
            return i + 1
    return 0


class GpuRow(Widget):
    """One line per GPU; pieces are dropped, least important first, to fit the width."""

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
        self._key: object = None

    def update_frame(self, f: GpuFrame) -> None:
        self.info = f.sample.info  # opened late (it was not answering at first)
        self._frame = f
        key = self._parts_key(self.size.width)
        if key == self._key:
            return
        old, self._key = self._key, key
        end = _changed_end(old, key)
        if end is None or not self.size.width:
            self.refresh()
        else:
            # Textual writes a widget's line from its left edge up to the end of the
            # refreshed region: stop at the last changed cell, not the row's end.
            self.refresh(Region(0, 0, min(end, self.size.width), 1))

    def on_resize(self) -> None:
        self._key = None
        self.refresh()

    def _parts_key(self, width: int) -> tuple[tuple[str, str | None], ...]:
        return tuple((t, s) for t, s, _ in self._parts(width))

    def _parts(self, width: int) -> list[tuple[str, str | None, int]]:
        """(text, component class or None, priority); lower priority is kept longer."""
        f = self._frame
        name = f"{self.info.index:>2} {printable(short_name(self.info.name))[:15]:<15}"
        if f is None:
            return [(name, "gpurow--name", 0)]
        g = f.sample
        st = state(g, f.episode, f.now)
        sev_cls = {"warning": "gpurow--warning", "error": "gpurow--error"}.get(st.severity or "")
        if g.lost or g.error or g.stale:
            return [(name, "gpurow--name", 0), (" " + st.short, sev_cls, 1)]
        v = gauges(g)
        parts: list[tuple[str, str | None, int]] = [(name, "gpurow--name", 0)]

        def add(label: str, key: str, prio: int, width_: int) -> None:
            gv = v[key]
            cls = {"warning": "gpurow--warning", "error": "gpurow--error"}.get(gv.severity or "")
            # Labels share the values' (default) style: one segment for the plain run of
            # the row instead of one escape per label, which is what an SSH link pays for.
            parts.append((f" {label}", None, prio))
            parts.append((f" {gv.text:>{width_}}", cls, prio))

        add("GPU", "util_gpu_pct", 1, 4)
        spark_w = 20
        if f.history is not None:
            vals = f.history.buckets(self.info.index, "util_gpu_pct", f.seconds, spark_w)
            parts.append((" " + sparkline_rows(vals, 100.0)[0], "gpurow--spark", 8))
        add("MEMC", "util_mem_pct", 7, 4)
        add("VRAM", "mem_used_bytes", 5, 11)
        add("PWR", "power_w", 6, 8)
        add("TEMP", "temp_c", 3, 7)
        add("SM", "clock_sm_mhz", 4, 12)  # the proof of throttling: kept before VRAM, PWR
        parts.append(("  " + st.short, sev_cls, 2))
        # The fields dropped for room depend on the width only, never on this row's own
        # state text, so every row shows the same fields in the same columns.
        budget = width - STATE_RESERVE + len(parts[-1][0])
        while sum(len(t) for t, _, _ in parts) > budget:
            worst = max(p for _, _, p in parts)
            if worst <= 2:
                break
            parts = [p for p in parts if p[2] != worst]
        return parts

    def render(self) -> Text:
        text = Text(no_wrap=True, overflow="ellipsis", end="")
        for t, cls, _ in self._parts(self.size.width):
            style = self.get_component_rich_style(cls) if cls else Style()
            text.append(t, style)
        return text


class GpuArea(VerticalScroll):
    """All GPUs: a grid of panels, or compact rows; only the visible kind is updated.

    Panels that do not fit (forced with `c` in a small terminal) scroll: with the mouse,
    or with the keys once focused (Tab), which it only accepts while it can scroll.
    """

    DEFAULT_CSS = """
    GpuArea { height: auto; max-height: 75%; scrollbar-size-vertical: 1; }
    GpuArea:focus { scrollbar-color: $accent; scrollbar-background: $accent 30%; }
    GpuArea > #panels { layout: grid; grid-size: 1; grid-rows: auto; grid-gutter: 0 1;
                        height: auto; }
    GpuArea > #rows { height: auto; border-bottom: solid $primary 40%; }
    GpuArea.-compact > #panels { display: none; }
    GpuArea > #rows { display: none; }
    GpuArea.-compact > #rows { display: block; }
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

    def compose(self) -> ComposeResult:
        yield Grid(id="panels")
        yield Vertical(id="rows")

    async def set_devices(self, infos: tuple[DeviceInfo, ...]) -> None:
        """Mount widgets for these GPUs: only the kind shown now (panels or rows).

        The other kind is mounted when the layout first switches to it: 8 panels are
        ~130 widgets, and mounting what is not shown costs start-up time and frames.
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
            return self.query_one("#rows", Vertical).mount_all(list(self._rows.values()))
        if not compact and not self._panels and self._infos:
            self._panels = {i.index: GpuPanel(i, id=f"gpu-{i.index}") for i in self._infos}
            for panel in self._panels.values():
                panel.set_spark_rows(self.spark_rows)
            return self.query_one("#panels", Grid).mount_all(list(self._panels.values()))
        return AwaitComplete.nothing()

    def set_layout(self, compact: bool, columns: int, spark_rows: int = 1) -> None:
        if spark_rows != self.spark_rows:
            self.spark_rows = spark_rows
            for panel in self._panels.values():
                panel.set_spark_rows(spark_rows)
        if compact != self.compact:
            self.compact = compact
            self.set_class(compact, "-compact")
            self._mount_kind(compact)  # not awaited: panels show their frame on mount
        if columns != self.columns:
            self.columns = columns
            self.query_one("#panels", Grid).styles.grid_size_columns = columns

    def update_frames(self, frames: list[GpuFrame]) -> None:
        widgets = self._rows if self.compact else self._panels
        for f in frames:
            w = widgets.get(f.sample.index)
            if w is not None:
                w.update_frame(f)
