"""How the monitor lays GPUs out for a terminal size and GPU count (pure, testable)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from gputui.ui.widgets.gpu_panel import (
    PANEL_HEIGHT,
    PANEL_MIN_WIDTH,
    SPARK_ROWS_MAX,
    panel_height,
)

BOTTOM_MIN_ROWS = 10  # host panel + a few process rows must stay visible under the GPUs
BOTTOM_ROOMY_ROWS = 20  # taller sparklines only if the bottom keeps at least this much
WIDE_COLUMNS = 180  # from here the host panel is wider (per-core bars in more columns)
TALL_ROWS = 60  # from here the host is a strip above a full-width process table
NARROW_COLUMNS = 100  # below this, narrow layouts


@dataclass(frozen=True, slots=True)
class Layout:
    compact: bool  # one line per GPU instead of panels (what the size suggests)
    columns: int  # panel columns
    spark_rows: int  # sparkline height in rows


def layout_for(width: int, height: int, n: int) -> Layout:
    """Panels or compact rows, panel columns and sparkline rows for a terminal size and
    GPU count. Sparklines grow (up to SPARK_ROWS_MAX rows) only when the panels still
    leave BOTTOM_ROOMY_ROWS for the host and the processes."""
    if n == 0:
        return Layout(False, 1, 1)
    cols = max(1, min(n, width // PANEL_MIN_WIDTH))
    rows = math.ceil(n / cols)
    room = height - 2 - BOTTOM_MIN_ROWS  # header, footer
    spark = next((h for h in range(SPARK_ROWS_MAX, 1, -1)
                  if rows * panel_height(h) <= height - 2 - BOTTOM_ROOMY_ROWS), 1)
    return Layout(rows * PANEL_HEIGHT > room, cols, spark)
