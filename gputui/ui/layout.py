"""How the monitor lays GPUs out for a terminal size and GPU count (pure, testable).

The rule is "show the most that fits": full panels (gauges, labelled sparklines on fixed
scales, the throttle sentence) whenever every GPU's panel fits above the host and process
boxes — in as many columns as the width allows, so that a lost GPU is never pushed below
the fold while something smaller would fit; otherwise compact rows, which keep every
headline metric and a short history. Compact rows take two lines each (the second holds
the GPU's state in words) when the rows still fit, one line otherwise.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from gputui.ui.widgets.panel_grid import PanelGrid

BOTTOM_MIN_ROWS = 10  # host panel + a few process rows must stay visible under the GPUs
BOTTOM_ROOMY_ROWS = 20  # taller sparklines only if the bottom keeps at least this much
WIDE_COLUMNS = 180  # from here the host panel is wider (per-core bars in more columns)
TALL_ROWS = 60  # from here the host is a strip above a full-width process table
NARROW_COLUMNS = 100  # below this, narrow layouts
CHROME_ROWS = 2  # the app's header and footer
GPU_AREA_MAX = 0.75  # the GPU area's max-height (GpuArea's CSS): beyond it, it scrolls
WRAP_ROWS = 1  # per panel: room for the throttle sentence wrapping onto a second row

PANEL_MIN_WIDTH = 56  # narrower than this a panel's gauges lose their bars
PANEL_COMFORT_WIDTH = 96  # panels this wide or wider go side by side even when one fits
SPARK_ROWS_MAX = 3  # sparklines grow to this many rows when the terminal has room


def panel_height(spark_rows: int = 1) -> int:
    """A panel's height with a one-line state and no verdict: its grid (one band per
    history metric, `spark_rows` tall, the fan row with the time axis, the state) inside
    its border."""
    return 2 + PanelGrid(0, spark_rows).height


PANEL_HEIGHT = panel_height(1)


@dataclass(frozen=True, slots=True)
class Layout:
    """How the GPUs are laid out for one terminal size and GPU count."""

    compact: bool  # compact rows instead of panels (what the size suggests)
    columns: int  # panel columns
    spark_rows: int  # sparkline height in rows (panels)
    row_lines: int = 1  # lines per compact row: 2 adds the state in words


def layout_for(width: int, height: int, n: int) -> Layout:
    """Panels (in how many columns, with how tall sparklines) or compact rows (one or two
    lines each) for a terminal of `width`×`height` cells showing `n` GPUs."""
    if n == 0:
        return Layout(False, 1, 1)
    room = min(height - CHROME_ROWS - BOTTOM_MIN_ROWS, int(height * GPU_AREA_MAX))
    roomy = min(height - CHROME_ROWS - BOTTOM_ROOMY_ROWS, room)
    lines = 2 if 2 * n + 1 <= room else 1  # +1: the compact rows' column header
    comfort = max(1, min(n, width // PANEL_COMFORT_WIDTH))
    most = max(1, min(n, width // PANEL_MIN_WIDTH))
    for cols in range(comfort, most + 1):
        rows = math.ceil(n / cols)
        if rows * (PANEL_HEIGHT + WRAP_ROWS) <= room:
            spark = next((h for h in range(SPARK_ROWS_MAX, 1, -1)
                          if rows * (panel_height(h) + WRAP_ROWS) <= roomy), 1)
            return Layout(False, cols, spark, lines)
    return Layout(True, comfort, 1, lines)
