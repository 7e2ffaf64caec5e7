"""Write a partial screen update as a curses-style terminal writer would.

Textual's driver renders a partial update (`ChopsUpdate.render_segments`) by writing
every dirty line from the left edge of each widget it touches up to the end of the
dirty region, and each segment as "set style, text, reset": a GPU row whose
utilization digit changed is rewritten from its index and name onwards, and one
changed digit costs ~35 bytes of escapes. This writer
- starts at the first dirty cell instead (at the start of a wide character that
  straddles it, never half of one) and still stops at the region's end;
- keeps the terminal's style between segments and emits an SGR sequence only where
  the style changes (a reset at the end of the update), as curses does;
- writes no newline between lines: every line starts with an absolute cursor move.
A widget that marks only its changed cells dirty then costs the terminal about those
cells and a cursor move.

Installed once by the app (`install()`); Textual versions whose ChopsUpdate lacks the
fields it reads keep their own writer.
"""

from __future__ import annotations

from typing import Any

from rich.cells import cell_len
from rich.color import ColorSystem
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


def _plain(style: Any) -> bool:
    """A style without attributes (bold, dim, underline, ...), at most colours."""
    return not (style._attributes & style._set_attributes) and not style._link


class _StyledWriter:
    """Text with SGR sequences only where the style changes (rich styles' own codes:
    a change is a reset followed by the new style's full codes, so each cell ends up
    exactly as Textual's own writer styles it)."""

    def __init__(self, console: Any) -> None:
        self.color_system = console._color_system or ColorSystem.TRUECOLOR
        self.out: list[str] = []
        self.ansi = ""  # the codes in effect on the terminal ("" = reset)
        self.plain = False  # what is in effect sets colours only (no bold, underline...)

    def move(self, x: int, y: int) -> None:
        self.out.append(f"\x1b[{y + 1};{x + 1}H")

    def strip(self, strip: Strip) -> None:
        out = self.out
        for text, style, control in strip:
            if control or not text:
                continue
            if style is None:
                ansi = ""
            elif style._link:  # a hyperlink: Textual's own rendering, then reset
                self.reset()
                out.append(Strip.render_style(style, text, self.color_system))
                continue
            else:
                ansi = style._ansi
                if ansi is None:
                    ansi = Strip.render_ansi(style, self.color_system)
            if ansi != self.ansi:
                # From a plain coloured style to one that sets both colours, the new codes
                # override everything in effect: no reset needed (4 bytes a change).
                if not (self.plain and style is not None and _plain(style)
                        and style._color is not None and style._bgcolor is not None):
                    self.reset()
                if ansi:
                    out.append(f"\x1b[{ansi}m")
                self.ansi = ansi
                self.plain = style is not None and _plain(style)
            out.append(text)

    def reset(self) -> None:
        if self.ansi:
            self.out.append("\x1b[0m")
            self.ansi = ""
        self.plain = False

    def text(self) -> str:
        self.reset()
        return "".join(self.out)


def render_segments(update: Any, console: Any) -> str:
    """What `ChopsUpdate.render_segments` writes, less each chop's unchanged head and
    the repeated style sequences."""
    w = _StyledWriter(console)
    chops, chop_ends = update.chops, update.chop_ends
    for y, x1, x2 in update.spans:
        line = chops[y]
        for end, (x, strip) in zip(chop_ends[y], line.items(), strict=False):
            if strip is None or x > x2 or end <= x1:
                continue
            if x2 > x >= x1 and end <= x2:
                w.move(x, y)
                w.strip(strip)
                continue
            start, rest = from_cell(strip, x, x1) if x < x1 else (x, strip)
            rest = rest.crop(0, min(end, x2) - start)
            if rest.cell_length:
                w.move(start, y)
                w.strip(rest)
    return w.text()


def install() -> bool:
    """Use this writer for Textual's partial updates; False where it does not fit."""
    global _INSTALLED
    if _INSTALLED:
        return True
    try:
        from textual._compositor import ChopsUpdate
    except ImportError:  # pragma: no cover - a Textual without it
        return False
    fields = ChopsUpdate.__init__.__code__.co_varnames
    if not hasattr(Strip, "render_ansi") or not all(
            name in fields for name in ("chops", "spans", "chop_ends")):
        return False  # pragma: no cover - another Textual's layout
    global TEXTUAL_WRITER
    TEXTUAL_WRITER = ChopsUpdate.render_segments
    ChopsUpdate.render_segments = render_segments  # type: ignore[method-assign]
    _INSTALLED = True
    return True

