"""Repaint only the lines that changed: the one way gputui's widgets skip repaints.

A widget that draws several lines keeps what it last drew, line by line, and hands
`repaint_changed` the old and the new lines: the lines that differ are refreshed,
nothing else, so Textual renders no unchanged line. Within a line there is nothing to
gain from smaller regions: Textual re-sends a refreshed line from the widget's left
edge whatever the region, once per region, so one region per line is both the least
work and the fewest bytes. The terminal writer (`gputui.ui.terminal_writer`) then
sends only the cells that really changed.
"""

from __future__ import annotations

from collections.abc import Sequence

from textual.geometry import Region
from textual.widget import Widget


def repaint_changed(widget: Widget, old: Sequence[object], new: Sequence[object], *,
                    top: int = 0) -> None:
    """Refresh the lines that differ between what `widget` drew (`old`, one comparable
    item per line: its text or its parts) and what it will draw (`new`); line `y` of
    them is the widget's row `top + y`."""
    width = widget.size.width
    if width <= 0:
        return
    regions = [Region(0, top + y, width, 1)
               for y in range(max(len(old), len(new)))
               if (old[y] if y < len(old) else None) != (new[y] if y < len(new) else None)]
    if regions:
        widget.refresh(*regions)
