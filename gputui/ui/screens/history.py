"""`h`: the history of one GPU as line charts — utilization, SM clock, power and
temperature — over the last 1, 5, 15 or 60 minutes (as far back as the monitor keeps).

Each chart is labelled with its metric and unit, drawn on a fixed scale (0 to the GPU's
own limit: max SM clock, power limit, shutdown temperature), against a time axis that
reads how long ago ("15m ago" … "now"). A gap in the data (a lost or stale GPU) is a
gap in the line, never a made-up value. The data is the view's own History (fed from
the frames the app takes).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Grid
from textual.screen import Screen
from textual.widgets import Static
from textual_plotext import PlotextPlot

from gputui.safe_text import printable
from gputui.telemetry.model import GpuSample, Snapshot
from gputui.ui.messages import SnapshotShown
from gputui.ui.widgets.footer import KeyFooter

WINDOWS_S = (60, 5 * 60, 15 * 60, 60 * 60)


@dataclass(frozen=True)
class Chart:
    metric: str  # a History metric
    title: str  # what it is, with its unit
    top: Callable[[GpuSample], float | None]  # the fixed scale's top for this GPU
    peak: str | None = None  # a History series drawn over it: the max within each tick


CHARTS: tuple[Chart, ...] = (
    Chart("util_gpu_pct", "GPU utilization (%)", lambda g: 100.0),
    Chart("clock_sm_mhz", "SM clock (MHz)", lambda g: g.info.clock_sm_max_mhz),
    Chart("power_w", "power (W)", lambda g: g.power_limit_w, peak="power_w_peak"),
    Chart("temp_c", "temperature (°C)",
          lambda g: g.info.temp_shutdown_c or g.info.temp_slowdown_c),
)


def window_label(seconds: float) -> str:
    return f"{seconds / 60:g} min"


def ago(seconds: float, in_seconds: bool) -> str:
    """A tick's label: how long ago (one unit along an axis, so they line up)."""
    if seconds <= 0:
        return "now"
    return f"{seconds:g}s ago" if in_seconds else f"{seconds / 60:g}m ago"


TICK_STEPS_S = (15, 30, 60, 120, 300, 600, 900, 1800)


def time_ticks(window_s: float) -> tuple[list[float], list[str]]:
    """Ticks at a round step (at most 5 intervals) from the window's start to now, at
    minutes-ago positions (the x unit), labelled how long ago."""
    step = next((s for s in TICK_STEPS_S if window_s / s <= 5), window_s / 4)
    n = int(window_s // step)
    steps = [window_s - k * step for k in range(n)] + [0.0]
    if len(steps) > 1 and steps[-2] - steps[-1] < step / 2:  # not two labels at "now"
        steps.pop(-2)
    return [-s / 60 for s in steps], [ago(s, window_s <= 60) for s in steps]


def segments(times: Sequence[float], values: Sequence[float],
             end: float) -> list[tuple[list[float], list[float]]]:
    """(minutes ago, value) runs between gaps (NaN): each is drawn as its own line."""
    runs: list[tuple[list[float], list[float]]] = []
    xs: list[float] = []
    ys: list[float] = []
    for t, v in zip(times, values, strict=True):
        if math.isnan(v):
            if xs:
                runs.append((xs, ys))
            xs, ys = [], []
            continue
        xs.append((t - end) / 60)
        ys.append(v)
    if xs:
        runs.append((xs, ys))
    return runs


class HistoryScreen(Screen[None]):
    DEFAULT_CSS = """
    HistoryScreen { layout: vertical; }
    HistoryScreen > .title { height: 1; padding: 0 1; background: $primary 30%;
                             text-style: bold; }
    HistoryScreen > #charts { layout: grid; grid-size: 2; grid-gutter: 0 1; height: 1fr; }
    HistoryScreen.-narrow > #charts { grid-size: 1; }
    HistoryScreen PlotextPlot { border: round $primary 60%; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,h", "app.pop_screen", "Back"),
        Binding("w", "window", "Window"),
        Binding("n", "gpu(1)", "Next GPU"),
        Binding("p", "gpu(-1)", "Previous GPU"),
    ]

    def __init__(self, history: Any, gpu_index: int = 0, seconds: float = 5 * 60,
                 kept_s: float | None = None, snapshot: Snapshot | None = None) -> None:
        super().__init__()
        self.history = history
        self.snapshot = snapshot  # the latest reading (then each frame's, by message)
        self.gpu_index = gpu_index
        # Only the windows the history reaches back to (it keeps a bounded number).
        self.windows = tuple(w for w in WINDOWS_S if kept_s is None or w <= kept_s * 1.01) \
            or WINDOWS_S[:1]
        self.seconds = min(self.windows, key=lambda w: abs(w - seconds))
        # What each chart was last handed (the tests read it): its line segments, and
        # the x ticks with their labels.
        self.drawn: dict[str, list[tuple[list[float], list[float]]]] = {}
        self.ticks: tuple[list[float], list[str]] = ([], [])

    def compose(self) -> ComposeResult:
        yield Static("", classes="title", id="history-title")
        with Grid(id="charts"):
            for chart in CHARTS:
                yield PlotextPlot(id=f"chart-{chart.metric}")
        yield KeyFooter()

    def on_mount(self) -> None:
        self._fit()
        self.redraw()

    def on_resize(self) -> None:
        self._fit()

    def _fit(self) -> None:
        # Stacked (one chart a row) only where each still gets ~10 rows; otherwise 2×2,
        # which at 80×24 leaves every chart ~40×10 instead of four unreadable strips.
        width, height = self.app.size
        self.set_class(width < 120 and height >= 44, "-narrow")

    def on_snapshot_shown(self, message: SnapshotShown) -> None:
        self.snapshot = message.snapshot
        self.redraw()

    def _gpus(self, snap: Snapshot | None) -> list[GpuSample]:
        return list(snap.gpus) if snap is not None else []

    def action_window(self) -> None:
        i = self.windows.index(self.seconds)
        self.seconds = self.windows[(i + 1) % len(self.windows)]
        self.redraw()

    def action_gpu(self, step: int) -> None:
        indexes = [g.index for g in self._gpus(self.snapshot)]
        if not indexes:
            return
        pos = indexes.index(self.gpu_index) if self.gpu_index in indexes else 0
        self.gpu_index = indexes[(pos + step) % len(indexes)]
        self.redraw()

    def redraw(self) -> None:
        snap = self.snapshot
        g = next((x for x in self._gpus(snap) if x.index == self.gpu_index), None)
        name = printable(g.info.name) if g is not None else "no data"
        self.query_one("#history-title", Static).update(Text(
            f"History · GPU {self.gpu_index} · {name} · last {window_label(self.seconds)}"
            + ("  (w: window · n/p: GPU · esc: back)" if self.app.size.width >= 120 else "")))
        self.ticks = time_ticks(self.seconds)
        for chart in CHARTS:
            times, values = self.history.window(self.gpu_index, chart.metric, self.seconds)
            end = times[-1] if times else 0.0
            runs = segments(times, values, end)
            self.drawn[chart.metric] = runs
            peak_runs: list[tuple[list[float], list[float]]] = []
            if chart.peak is not None:
                ptimes, pvalues = self.history.window(self.gpu_index, chart.peak, self.seconds)
                # Only where the sub-second samples saw more than the readings did.
                if any(p == p and (v != v or p > v) for p, v in zip(pvalues, values,
                                                                     strict=False)):
                    peak_runs = segments(ptimes, pvalues, end)
                self.drawn[chart.peak] = peak_runs
            seen = [y for _, ys in (*runs, *peak_runs) for y in ys]
            top = (chart.top(g) if g is not None else None) or (max(seen) if seen else 1.0)
            top = max(top, max(seen, default=0.0)) or 1.0
            widget = self.query_one(f"#chart-{chart.metric}", PlotextPlot)
            plt = widget.plt
            plt.clear_data()
            plt.clear_figure()
            plt.title(chart.title)
            plt.xticks(*self.ticks)
            for i, (xs, ys) in enumerate(peak_runs):
                plt.plot(xs, ys, marker="braille", color="red",
                         label="max within tick" if i == 0 else None)
            for xs, ys in runs:
                plt.plot(xs, ys, marker="braille", color="cyan")
            plt.xlim(-self.seconds / 60, 0)
            plt.ylim(0, top)
            if not runs:
                plt.text("no data yet", x=-self.seconds / 120, y=top / 2)
            widget.refresh()
