"""Repaint only the cells that changed: what a one-line widget hands `refresh(Region)`.

Textual sends the terminal only the regions marked dirty; a widget that calls plain
`refresh()` has every cell of it rewritten even when one digit of a clock moved. Over
SSH at 1 Hz that is most of what a monitor writes.
"""

from __future__ import annotations

from collections.abc import Sequence

from rich.cells import cell_len
from rich.text import Text


def _cells(text: Text) -> list[tuple[str, object]] | None:
    """(character, style) per cell; None where a wide character makes cells and
    characters disagree (the caller then repaints the whole line)."""
    plain = text.plain
    if cell_len(plain) != len(plain):
        return None
    styles: list[object] = [text.style] * len(plain)
    for span in text.spans:
        for i in range(max(0, span.start), min(len(plain), span.end)):
            styles[i] = (styles[i], span.style)
    return list(zip(plain, styles, strict=True))


def changed_span(old: Text, new: Text) -> tuple[int, int] | None:
    """[start, end) of the cells that differ between two one-line texts; (0, 0) when
    they draw the same; None when it cannot be told cell by cell (repaint it all)."""
    a, b = _cells(old), _cells(new)
    if a is None or b is None:
        return None
    n = max(len(a), len(b))
    blank = ("", None)
    a += [blank] * (n - len(a))
    b += [blank] * (n - len(b))
    start = next((i for i in range(n) if a[i] != b[i]), n)
    if start == n:
        return 0, 0
    end = next(i for i in range(n - 1, start - 1, -1) if a[i] != b[i]) + 1
    return start, end


def changed_lines(old: list[str], new: list[str]) -> list[int]:
    """Rows whose text differs (rows past the shorter list count as changed)."""
    n = max(len(old), len(new))
    return [y for y in range(n) if (old[y] if y < len(old) else None)
            != (new[y] if y < len(new) else None)]


# A cursor move ("ESC[yy;xxxH") costs about 8 bytes: a gap of unchanged cells shorter
# than that is cheaper to rewrite than to jump over.
MOVE_BYTES = 8


def changed_runs(old: str, new: str, gap: int = MOVE_BYTES) -> list[tuple[int, int]] | None:
    """[start, end) runs of the characters that differ between two plain lines of one
    style layout, runs closer than `gap` merged; None when the lengths differ or a wide
    character makes cells and characters disagree (the caller repaints it all)."""
    if len(old) != len(new) or cell_len(old) != len(old) or cell_len(new) != len(new):
        return None
    return diff_runs(old, new, gap)


def diff_runs(old: Sequence[object], new: Sequence[object],
              gap: int = MOVE_BYTES) -> list[tuple[int, int]]:
    """[start, end) runs where two equal-length sequences (one item per cell) differ,
    runs closer than `gap` merged."""
    runs: list[tuple[int, int]] = []
    i, n = 0, len(new)
    while i < n:
        if old[i] == new[i]:
            i += 1
            continue
        j = i
        while j < n and old[j] != new[j]:
            j += 1
        if runs and i - runs[-1][1] < gap:
            runs[-1] = (runs[-1][0], j)
        else:
            runs.append((i, j))
        i = j
    return runs
