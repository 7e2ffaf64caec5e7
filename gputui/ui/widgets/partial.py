"""Repaint only the cells that changed: the one way gputui's widgets skip repaints.

Textual sends the terminal only the regions marked dirty, from the start of the
segment holding a region's first cell; a widget that calls plain `refresh()` has
every cell of it rewritten even when one digit of a clock moved. Over SSH at 1 Hz
that is most of what a monitor writes. A widget that draws lines of cells keeps the
cells it last drew and hands `repaint_changed` the new ones: each line's runs of
changed cells are refreshed, nothing else.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Sequence

from rich.cells import cell_len
from textual.geometry import Region
from textual.widget import Widget

Cells = Sequence[Hashable]  # one item per terminal cell

# A cursor move ("ESC[yy;xxxH") costs about 8 bytes: a gap of unchanged cells shorter
# than that is cheaper to rewrite than to jump over.
MOVE_BYTES = 8


def cells(parts: Iterable[tuple[str, Hashable]]) -> list[Hashable]:
    """One (character, style) item per cell of `(text, style)` parts; a wide character
    takes two cells, the second marked ("", style)."""
    out: list[Hashable] = []
    for text, style in parts:
        for ch in text:
            out.append((ch, style))
            if cell_len(ch) == 2:
                out.append(("", style))
    return out


def changed_runs(old: Cells, new: Cells, gap: int = MOVE_BYTES) -> list[tuple[int, int]]:
    """[start, end) runs of the cells that differ between two lines, runs closer than
    `gap` merged; a line shorter than the other differs in every cell past its end."""
    runs: list[tuple[int, int]] = []
    i, n = 0, max(len(old), len(new))
    while i < n:
        if i < len(old) and i < len(new) and old[i] == new[i]:
            i += 1
            continue
        j = i
        while j < n and not (j < len(old) and j < len(new) and old[j] == new[j]):
            j += 1
        if runs and i - runs[-1][1] < gap:
            runs[-1] = (runs[-1][0], j)
        else:
            runs.append((i, j))
        i = j
    return runs


def repaint_changed(widget: Widget, old: Sequence[Cells], new: Sequence[Cells], *,
                    top: int = 0, gap: int = MOVE_BYTES) -> None:
    """Refresh the runs of cells that differ between the lines `widget` drew (`old`)
    and the ones it will draw (`new`), line `y` of them on the widget's row `top + y`."""
    width = widget.size.width
    regions = []
    for y in range(max(len(old), len(new))):
        a = old[y] if y < len(old) else ()
        b = new[y] if y < len(new) else ()
        if a == b:
            continue
        for start, end in changed_runs(a, b, gap):
            if min(end, width) > start:
                regions.append(Region(start, top + y, min(end, width) - start, 1))
    if regions:
        widget.refresh(*regions)
