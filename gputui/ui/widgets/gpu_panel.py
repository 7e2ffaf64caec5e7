"""Per-GPU widgets: a full panel (gauges, sparklines, throttle state) and a compact row."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import ClassVar

from rich.style import Style
from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Grid, Vertical, VerticalScroll
from textual.widget import Widget
from textual.widgets import Static

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

PANEL_HEIGHT = 9  # 7 rows inside a border
PANEL_MIN_WIDTH = 96  # below this a second column of panels is not worth it


@dataclass(frozen=True, slots=True)
class GpuFrame:
    """Everything one GPU widget needs for one tick."""

    sample: GpuSample
    episode: ThrottleEpisode | None
    now: datetime
    history: HistoryLike
    seconds: float


def window_label(seconds: float) -> str:
    return f"{seconds / 60:.0f} min" if seconds >= 60 else f"{seconds:.0f} s"


class TextLine(Static):
    """A Static that repaints (without a layout pass) only when its text changed."""

    def set_text(self, text: str | Text, severity: str | None = None) -> None:
        key = (text.markup if isinstance(text, Text) else text, severity)
        if getattr(self, "_last_key", None) == key:
            return
        self._last_key = key
        self.set_class(severity == "warning", "-warning")
        self.set_class(severity == "error", "-error")
        self.update(text, layout=False)


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
        self.border_title = f"GPU {info.index} · {info.name}"
        self.border_subtitle = info.pci_bus_id
        self._scales: dict[str, float] = {}

    def compose(self) -> ComposeResult:
        for metric, label in HISTORY_METRICS:
            yield Gauge(label, value_width=13, id=f"g-{metric}")
            yield FixedSparkline(self.info.index, metric, id=f"s-{metric}")
        with Widget(classes="misc"):
            yield Gauge("FAN", id="g-fan", value_width=4)
            yield TextLine("", classes="pstate", id="pstate")
        yield Gauge("SM", id="g-clock_sm_mhz", value_width=13)
        yield TextLine("", classes="state", id="state")

    def update_frame(self, f: GpuFrame) -> None:
        g = f.sample
        views = gauges(g)
        for metric, _label in HISTORY_METRICS:
            v = views[metric]
            self.query_one(f"#g-{metric}", Gauge).set(v.fraction, v.text, v.severity)
            scale = metric_scale(g, metric)
            if scale:  # a lost GPU has no limits: keep the scale the history was drawn on
                self._scales[metric] = scale
            self.query_one(f"#s-{metric}", FixedSparkline).set_source(
                f.history, f.seconds, self._scales.get(metric))
        fan = views["fan"]
        self.query_one("#g-fan", Gauge).set(fan.fraction, fan.text, fan.severity)
        clk = views["clock_sm_mhz"]
        self.query_one("#g-clock_sm_mhz", Gauge).set(clk.fraction, clk.text, clk.severity)
        self.query_one("#pstate", TextLine).set_text(pstate_text(g))
        st = state(g, f.episode, f.now)
        self.query_one("#state", TextLine).set_text(Text(st.text), st.severity)
        self.set_class(st.severity == "warning", "-throttling")
        self.set_class(st.severity == "error", "-lost")
        subtitle = f"{g.info.pci_bus_id} · history {window_label(f.seconds)}"
        if self.border_subtitle != subtitle:
            self.border_subtitle = subtitle


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
        self._frame = f
        key = self._parts_key(self.size.width)
        if key != self._key:
            self._key = key
            self.refresh()

    def on_resize(self) -> None:
        self._key = None
        self.refresh()

    def _parts_key(self, width: int) -> object:
        return tuple((t, s) for t, s, _ in self._parts(width))

    def _parts(self, width: int) -> list[tuple[str, str | None, int]]:
        """(text, component class or None, priority); lower priority is kept longer."""
        f = self._frame
        name = f"{self.info.index:>2} {short_name(self.info.name)[:16]:<16}"
        if f is None:
            return [(name, "gpurow--name", 0)]
        g = f.sample
        st = state(g, f.episode, f.now)
        sev_cls = {"warning": "gpurow--warning", "error": "gpurow--error"}.get(st.severity or "")
        if g.lost or g.error:
            return [(name, "gpurow--name", 0), (" " + st.short, sev_cls, 1)]
        v = gauges(g)
        parts: list[tuple[str, str | None, int]] = [(name, "gpurow--name", 0)]

        def add(label: str, key: str, prio: int, width_: int) -> None:
            gv = v[key]
            cls = {"warning": "gpurow--warning", "error": "gpurow--error"}.get(gv.severity or "")
            parts.append((f" {label}", "gpurow--label", prio))
            parts.append((f" {gv.text:>{width_}}", cls, prio))

        add("GPU", "util_gpu_pct", 1, 4)
        spark_w = 20
        if f.history is not None:
            vals = f.history.buckets(self.info.index, "util_gpu_pct", f.seconds, spark_w)
            parts.append((" " + sparkline_rows(vals, 100.0)[0], "gpurow--spark", 8))
        add("MEMC", "util_mem_pct", 7, 4)
        add("VRAM", "mem_used_bytes", 3, 13)
        add("PWR", "power_w", 5, 8)
        add("TEMP", "temp_c", 4, 7)
        add("SM", "clock_sm_mhz", 6, 12)
        parts.append(("  " + st.short, sev_cls, 2))
        budget = width
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
    """All GPUs: a grid of panels, or compact rows; only the visible kind is updated."""

    DEFAULT_CSS = """
    GpuArea { height: auto; max-height: 75%; }
    GpuArea > #panels { layout: grid; grid-size: 1; grid-rows: auto; grid-gutter: 0 1;
                        height: auto; }
    GpuArea > #rows { height: auto; border-bottom: solid $primary 40%; }
    GpuArea.-compact > #panels { display: none; }
    GpuArea > #rows { display: none; }
    GpuArea.-compact > #rows { display: block; }
    """

    can_focus = False

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.indices: tuple[int, ...] = ()
        self.compact = False
        self.columns = 1

    def compose(self) -> ComposeResult:
        yield Grid(id="panels")
        yield Vertical(id="rows")

    async def set_devices(self, infos: tuple[DeviceInfo, ...]) -> None:
        indices = tuple(i.index for i in infos)
        if indices == self.indices:
            return
        self.indices = indices
        panels = self.query_one("#panels", Grid)
        rows = self.query_one("#rows", Vertical)
        await panels.remove_children()
        await rows.remove_children()
        await panels.mount_all([GpuPanel(i, id=f"gpu-{i.index}") for i in infos])
        await rows.mount_all([GpuRow(i, id=f"row-{i.index}") for i in infos])

    def set_layout(self, compact: bool, columns: int) -> None:
        if compact != self.compact:
            self.compact = compact
            self.set_class(compact, "-compact")
        if columns != self.columns:
            self.columns = columns
            self.query_one("#panels", Grid).styles.grid_size_columns = columns

    def update_frames(self, frames: list[GpuFrame]) -> None:
        kind: type[Widget] = GpuRow if self.compact else GpuPanel
        prefix = "row" if self.compact else "gpu"
        for f in frames:
            for w in self.query(f"#{prefix}-{f.sample.index}"):
                if isinstance(w, kind):
                    w.update_frame(f)  # type: ignore[attr-defined]
