"""A GPU panel's grid, without Textual: three columns across the width, one band per
history metric, the fan row, then the state and the verdict across the panel."""

from __future__ import annotations

import itertools

import pytest

from gputui.ui.layout import panel_height
from gputui.ui.widgets.gpu_view import HISTORY_METRICS
from gputui.ui.widgets.panel_grid import GAP, GAUGE_WIDTH, SCALE_WIDTH, Box, PanelGrid

METRICS = [metric for metric, _label in HISTORY_METRICS]


def _boxes(grid: PanelGrid) -> dict[str, Box]:
    names = [f"{kind}-{m}" for m in METRICS for kind in "gsx"]
    return {name: grid.part(name)
            for name in [*names, "g-fan", "pstate", "axis", "state", "verdict"]}


def test_the_columns_span_the_width_with_a_gap_between() -> None:
    grid = PanelGrid(100)
    gauge, graph, scale = grid.gauge("power_w"), grid.graph("power_w"), grid.scale("power_w")
    assert (gauge.x, gauge.width) == (0, GAUGE_WIDTH)
    assert graph.x == gauge.x + gauge.width + GAP
    assert scale.x == graph.x + graph.width + GAP
    assert scale.x + scale.width == 100 and scale.width == SCALE_WIDTH
    assert grid.axis == Box(graph.x, grid.misc_y, graph.width, 1)  # under the graphs


def test_a_panel_too_narrow_for_a_graph_keeps_its_gauges_and_scales() -> None:
    grid = PanelGrid(GAUGE_WIDTH + SCALE_WIDTH + 2 * GAP - 5)
    assert grid.graph_width == 0 and grid.axis.width == 0
    assert grid.scale("temp_c").x == GAUGE_WIDTH + 2 * GAP


def test_one_row_per_metric_then_the_fan_row_the_state_and_the_verdict() -> None:
    grid = PanelGrid(100, spark_rows=1, state_rows=2, verdict_rows=1)
    assert [grid.band_y(m) for m in METRICS] == list(range(len(METRICS)))
    assert grid.fan == Box(0, len(METRICS), GAUGE_WIDTH - 6, 1)
    assert grid.pstate.y == grid.fan.y and grid.pstate.x + grid.pstate.width == GAUGE_WIDTH
    assert grid.state == Box(0, len(METRICS) + 1, 100, 2)
    assert grid.verdict == Box(0, len(METRICS) + 3, 100, 1)
    assert grid.height == len(METRICS) + 4


def test_tall_graphs_get_a_blank_row_between_them_and_the_gauge_in_the_middle() -> None:
    grid = PanelGrid(100, spark_rows=3)
    assert [grid.band_y(m) for m in METRICS] == [4 * i for i in range(len(METRICS))]
    assert grid.gauge("util_gpu_pct").height == 3 and grid.gauge_row == 1
    assert grid.misc_y == 4 * len(METRICS) - 1  # no blank row under the last band
    assert grid.verdict.height == 0 and grid.height == grid.misc_y + 2


@pytest.mark.parametrize(("width", "spark_rows", "verdict_rows"),
                         [(60, 1, 0), (100, 2, 1), (150, 3, 2)])
def test_no_two_parts_overlap_and_all_are_inside_the_grid(width: int, spark_rows: int,
                                                          verdict_rows: int) -> None:
    grid = PanelGrid(width, spark_rows, state_rows=2, verdict_rows=verdict_rows)
    cells: dict[tuple[int, int], str] = {}
    for name, box in _boxes(grid).items():
        assert box.x >= 0 and box.x + box.width <= width, name
        assert box.y >= 0 and box.y + box.height <= grid.height, name
        for cell in itertools.product(range(box.x, box.x + box.width),
                                      range(box.y, box.y + box.height)):
            assert cell not in cells, (name, cells.get(cell))
            cells[cell] = name
    assert len(cells) > width * 3  # the check saw the parts' cells


def test_parts_by_name_and_an_unknown_name() -> None:
    grid = PanelGrid(100, spark_rows=2)
    assert grid.part("s-temp_c") == grid.graph("temp_c")
    assert grid.part("x-power_w") == grid.scale("power_w")
    assert grid.part("axis") == grid.axis
    for name in ("s-nope", "q-temp_c", "fan"):
        with pytest.raises(KeyError):
            grid.part(name)


def test_the_layout_counts_the_panel_as_its_grid_and_border() -> None:
    assert panel_height(1) == 2 + len(METRICS) + 2
    assert panel_height(3) == 2 + 3 * len(METRICS) + len(METRICS) - 1 + 2
