"""The layout chooser, pure: what a terminal of each size shows for 1, 4 and
8 GPUs — full panels whenever every GPU's panel fits above the host and process boxes
(side by side on wide terminals), otherwise compact rows."""

from __future__ import annotations

import math

import pytest

from gputui.ui.layout import (
    BOTTOM_MIN_ROWS,
    CHROME_ROWS,
    PANEL_MIN_WIDTH,
    Layout,
    layout_for,
    panel_height,
)

EXPECTED = {
    # 80×24: one panel fits; four or eight do not, so rows (two lines each while they fit).
    ((80, 24), 1): Layout(False, 1, 1, 2),
    ((80, 24), 4): Layout(True, 1, 1, 2),
    ((80, 24), 8): Layout(True, 1, 1, 1),
    # 120×40: four GPUs as two columns of panels, not four one-line rows over blank space.
    ((120, 40), 1): Layout(False, 1, 1, 2),
    ((120, 40), 4): Layout(False, 2, 1, 2),
    ((120, 40), 8): Layout(True, 1, 1, 2),
    # 200×60: one GPU gets tall sparklines; four and eight go side by side.
    ((200, 60), 1): Layout(False, 1, 3, 2),
    ((200, 60), 4): Layout(False, 2, 1, 2),
    ((200, 60), 8): Layout(False, 3, 1, 2),
}


@pytest.mark.parametrize(("size", "n"), list(EXPECTED))
def test_the_layout_for_each_size_and_gpu_count(size: tuple[int, int], n: int) -> None:
    width, height = size
    lay = layout_for(width, height, n)
    assert lay == EXPECTED[(size, n)]
    room = height - CHROME_ROWS - BOTTOM_MIN_ROWS
    if lay.compact:
        assert n * lay.row_lines + 1 <= room  # every row and the header above the fold
    else:
        # Every panel (the lost GPU's too) fits above the host and process boxes, and no
        # panel is too narrow for its gauges.
        assert math.ceil(n / lay.columns) * panel_height(lay.spark_rows) <= room
        assert width // lay.columns >= PANEL_MIN_WIDTH or lay.columns == 1


def test_panels_whenever_they_fit_rows_only_when_they_do_not() -> None:
    for width in (80, 100, 120, 160, 200, 250):
        for height in (24, 30, 40, 50, 60, 70):
            for n in (1, 2, 4, 8):
                lay = layout_for(width, height, n)
                most = max(1, min(n, width // PANEL_MIN_WIDTH))
                fits = math.ceil(n / most) * (panel_height(1) + 1) <= min(
                    height - CHROME_ROWS - BOTTOM_MIN_ROWS, int(height * 0.75))
                assert lay.compact == (not fits), (width, height, n, lay)


def test_no_gpus() -> None:
    assert layout_for(80, 24, 0) == Layout(False, 1, 1)
