"""Where each part of a GPU panel goes: the panel's grid, pure (no Textual), in cells from
the top left of its content (inside the border and padding).

Three columns: the gauges, the history graphs (whatever width is left) and their scales,
GAP cells apart. One band per history metric, `spark_rows` tall (a blank row between
bands when they are taller than one, so that neighbours never run together), the gauge in
the middle row of its band. Under the bands, one row: the fan gauge and the P-state in
the gauge column, the time axis under the graphs. Under that, the throttle state and the
GPM verdict, each as many rows as its sentence wraps to, across the whole width.
"""

from __future__ import annotations

from dataclasses import dataclass

from gputui.ui.widgets.gpu_view import HISTORY_METRICS

GAUGE_WIDTH = 32  # label, a 12-cell bar, the value ("1410/1980MHz"); the graphs get the rest
SCALE_WIDTH = 9  # "0–1980MHz": the scale column beside the graphs
GAP = 2  # the cells between the columns
FAN_WIDTH = GAUGE_WIDTH - 6  # the fan gauge shares its cell with the P-state (1 + 5 cells)
METRICS = tuple(metric for metric, _label in HISTORY_METRICS)


@dataclass(frozen=True, slots=True)
class Box:
    """A rectangle of cells: left column, top row, width, height."""

    x: int
    y: int
    width: int
    height: int


@dataclass(frozen=True, slots=True)
class PanelGrid:
    """A panel `width` cells wide whose graphs are `spark_rows` tall, whose state sentence
    takes `state_rows` and whose verdict `verdict_rows` (0: none)."""

    width: int
    spark_rows: int = 1
    state_rows: int = 1
    verdict_rows: int = 0

    @property
    def band_gap(self) -> int:
        """Blank rows between two metrics' bands."""
        return 1 if self.spark_rows > 1 else 0

    @property
    def gauge_row(self) -> int:
        """The row of a band its gauge is drawn on (the middle one)."""
        return (self.spark_rows - 1) // 2

    @property
    def graph_x(self) -> int:
        return GAUGE_WIDTH + GAP

    @property
    def graph_width(self) -> int:
        return max(0, self.width - GAUGE_WIDTH - SCALE_WIDTH - 2 * GAP)

    @property
    def scale_x(self) -> int:
        return self.graph_x + self.graph_width + GAP

    def band_y(self, metric: str) -> int:
        return METRICS.index(metric) * (self.spark_rows + self.band_gap)

    @property
    def misc_y(self) -> int:
        """The row of the fan gauge, the P-state and the time axis."""
        return len(METRICS) * (self.spark_rows + self.band_gap) - self.band_gap

    @property
    def state_y(self) -> int:
        return self.misc_y + 1

    @property
    def verdict_y(self) -> int:
        return self.state_y + self.state_rows

    @property
    def height(self) -> int:
        """Rows of content, top to bottom."""
        return self.verdict_y + self.verdict_rows

    def gauge(self, metric: str) -> Box:
        return Box(0, self.band_y(metric), GAUGE_WIDTH, self.spark_rows)

    def graph(self, metric: str) -> Box:
        return Box(self.graph_x, self.band_y(metric), self.graph_width, self.spark_rows)

    def scale(self, metric: str) -> Box:
        return Box(self.scale_x, self.band_y(metric), SCALE_WIDTH, self.spark_rows)

    @property
    def fan(self) -> Box:
        return Box(0, self.misc_y, FAN_WIDTH, 1)

    @property
    def pstate(self) -> Box:
        return Box(FAN_WIDTH + 1, self.misc_y, GAUGE_WIDTH - FAN_WIDTH - 1, 1)

    @property
    def axis(self) -> Box:
        return Box(self.graph_x, self.misc_y, self.graph_width, 1)

    @property
    def state(self) -> Box:
        return Box(0, self.state_y, self.width, self.state_rows)

    @property
    def verdict(self) -> Box:
        return Box(0, self.verdict_y, self.width, self.verdict_rows)

    def part(self, name: str) -> Box:
        """A part by name: "g-<metric>" (its gauge), "s-<metric>" (its graph),
        "x-<metric>" (its scale), "g-fan", "pstate", "axis", "state", "verdict"."""
        kind, _, metric = name.partition("-")
        if metric in METRICS:
            by_kind = {"g": self.gauge, "s": self.graph, "x": self.scale}
            if kind in by_kind:
                return by_kind[kind](metric)
        named = {"g-fan": self.fan, "pstate": self.pstate, "axis": self.axis,
                 "state": self.state, "verdict": self.verdict}
        if name not in named:
            raise KeyError(name)
        return named[name]
