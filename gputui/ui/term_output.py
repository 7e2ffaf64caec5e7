"""Write a partial screen update from its first changed segment, not its widget's edge.

Textual's driver renders a partial update (`ChopsUpdate.render_segments`) by writing
every dirty line from the left edge of each widget it touches up to the end of the
dirty region: a GPU row whose utilization digit changed is rewritten from its index
and name onwards, every tick. This writer starts at the first dirty cell instead (at
the start of a wide character that straddles it, never half of one) and still stops
at the region's end. A widget that marks only its changed cells dirty then costs the
terminal about those cells.

Installed once by the app (`install()`); Textual versions whose ChopsUpdate lacks the
fields it reads keep their own writer.
"""

from __future__ import annotations

from typing import Any

from rich.cells import cell_len
from rich.control import Control
from rich.segment import Segment
from textual.strip import Strip

_INSTALLED = False
TEXTUAL_WRITER: Any = None  # Textual's own ChopsUpdate.render_segments (for comparison)


def from_cell(strip: Strip, x: int, x1: int) -> tuple[int, Strip]:
    """(screen x, the rest of `strip`) from the character holding cell `x1`; `strip`
    starts at screen column `x`. A wide character is never split: it is kept whole,
    starting one cell early."""
    pos = x
    segments = list(strip)
    for i, seg in enumerate(segments):
        width = seg.cell_length
        if pos + width <= x1:
            pos += width
            continue
        cut = 0
        for ch in seg.text:
            w = cell_len(ch)
            if pos + w > x1:
                break
            pos += w
            cut += 1
        head = Segment(seg.text[cut:], seg.style, seg.control)
        rest = ([head] if head.text else []) + segments[i + 1:]
        return pos, Strip(rest, strip.cell_length - (pos - x))
    return pos, Strip([], 0)


def render_segments(update: Any, console: Any) -> str:
    """What `ChopsUpdate.render_segments` writes, less each chop's unchanged head."""
    out: list[str] = []
    move_to = Control.move_to
    chops, chop_ends = update.chops, update.chop_ends
    last_y = update.spans[-1][0]
    for y, x1, x2 in update.spans:
        line = chops[y]
        for end, (x, strip) in zip(chop_ends[y], line.items(), strict=False):
            if strip is None or x > x2 or end <= x1:
                continue
            if x2 > x >= x1 and end <= x2:
                out.append(move_to(x, y).segment.text)
                out.append(strip.render(console))
                continue
            start, rest = from_cell(strip, x, x1) if x < x1 else (x, strip)
            rest = rest.crop(0, min(end, x2) - start)
            if rest.cell_length:
                out.append(move_to(start, y).segment.text)
                out.append(rest.render(console))
        if y != last_y:
            out.append("\n")
    return "".join(out)


def install() -> bool:
    """Use this writer for Textual's partial updates; False where it does not fit."""
    global _INSTALLED
    if _INSTALLED:
        return True
    try:
        from textual._compositor import ChopsUpdate
    except ImportError:  # pragma: no cover - a Textual without it
        return False
    if not all(hasattr(ChopsUpdate, "__init__") and name in ChopsUpdate.__init__.__code__
               .co_varnames for name in ("chops", "spans", "chop_ends")):
        return False  # pragma: no cover - another Textual's layout
    global TEXTUAL_WRITER
    TEXTUAL_WRITER = ChopsUpdate.render_segments
    ChopsUpdate.render_segments = render_segments  # type: ignore[method-assign]
    _INSTALLED = True
    return True

