"""Keep a DataTable's render caches the size of what it shows.

Textual's DataTable keys its render caches on an update counter that moves on every
change, so entries from earlier updates are never hit again; they only leave when the
LRU is full — 10,000 cells and 1,000 rows and lines. A live table (the processes,
updated every few seconds; and every resize renders at new widths) therefore grew for
many minutes, and kept what a resize storm left: about 20 MB in a long monitor run.
Bounded here to two screens' worth (the frame shown and the one being drawn).
"""

from __future__ import annotations

from typing import Any

GENERATIONS = 2
MIN_ROWS = 8


def bound_render_caches(table: Any, rows: int, columns: int) -> None:
    """Cap `table`'s render caches at what `rows` × `columns` on screen need."""
    rows = max(MIN_ROWS, rows)
    sizes = {
        "_cell_render_cache": GENERATIONS * rows * max(1, columns),
        "_row_render_cache": GENERATIONS * rows,
        "_row_renderable_cache": GENERATIONS * rows,
        "_line_cache": GENERATIONS * rows,
    }
    for name, size in sizes.items():
        cache = getattr(table, name, None)
        if cache is None or getattr(cache, "maxsize", None) == size:
            continue
        if len(cache) > size:
            cache.clear()  # entries of older updates: never hit again
        cache.maxsize = size


def render_cache_sizes(table: Any) -> dict[str, int]:
    """How many entries each render cache holds now (for tests and the soak benchmark)."""
    return {name: len(getattr(table, name)) for name in (
        "_cell_render_cache", "_row_render_cache", "_row_renderable_cache", "_line_cache")
        if getattr(table, name, None) is not None}
