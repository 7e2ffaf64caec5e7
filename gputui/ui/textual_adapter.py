"""The one place gputui touches what is not Textual's public API.

Why: Textual's DataTable keys its render caches on an update counter that moves on
every change, so entries from earlier updates are never hit again; they only leave
when the LRU is full — 10,000 cells and 1,000 rows and lines. A live table (the
processes, updated every few seconds; and every resize renders at new widths) therefore
grew for many minutes and kept what a resize storm left: about 20 MB in a long monitor
run. `bound_render_caches` caps them at two screens' worth (the frame shown and the one
being drawn) by setting the LRU caches' `maxsize`.

Those caches are private attributes of `textual.widgets.DataTable`. This module is
tested with the Textual versions in TESTED_VERSIONS (pyproject.toml bounds the
dependency to them); on any other version, or where the attributes are gone, the cap is
not applied: the table works as Textual made it, with Textual's cache sizes.

`app_driver(app)`: the driver a running app writes with, which Textual keeps in a private
attribute. The terminal notifications write their escape sequences through it (in order
with the frames, from their own thread; the driver's writer is thread-safe), and the
monitor's redraw key tells the terminal writer to forget what it believes is on screen.

`supported()` also decides whether the monitor and the fleet view write through the
terminal writer (`terminal_writer.diffing_driver`): it follows Textual's output as the
tested versions write it, so on another version the apps run with Textual's own driver.

Nothing here patches Textual or Rich: it sets sizes on one table's own caches.
"""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path
from typing import Any

from textual.app import App
from textual.driver import Driver
from textual.widgets import DataTable

__all__ = ["app_driver", "bound_render_caches", "render_cache_sizes", "supported"]

# (major, minor) releases of Textual this module is tested with.
TESTED_VERSIONS = frozenset({(8, 2)})
GENERATIONS = 2
MIN_ROWS = 8
_CACHES = ("_cell_render_cache", "_row_render_cache", "_row_renderable_cache", "_line_cache")


@cache
def textual_version() -> tuple[int, int] | None:
    """Textual's (major, minor), or None when it cannot be told. Asked before the first
    frame (which terminal driver to run with): read from the name of the `.dist-info`
    directory installed beside the package (`textual-8.2.8.dist-info`), where pip puts
    it; importlib.metadata (~19 ms, 2.5 % of the instructions to the first frame) only
    where there is none."""
    import textual

    site = Path(textual.__file__).resolve().parent.parent
    found = [m for info in site.glob("textual-*.dist-info")
             if (m := re.fullmatch(r"textual-(\d+)\.(\d+)\b.*\.dist-info", info.name))]
    if len(found) == 1:
        return int(found[0][1]), int(found[0][2])
    from importlib.metadata import PackageNotFoundError, version

    try:
        major, minor = version("textual").split(".")[:2]
        return int(major), int(minor)
    except (PackageNotFoundError, ValueError):
        return None


def supported() -> bool:
    """This Textual is one the adapter is tested with (read once, when first needed)."""
    return textual_version() in TESTED_VERSIONS


def bound_render_caches(table: DataTable[object], rows: int, columns: int) -> bool:
    """Cap `table`'s render caches at what `rows` × `columns` on screen need; False
    (nothing done) on a Textual this is not tested with."""
    if not supported():
        return False
    rows = max(MIN_ROWS, rows)
    sizes = {
        "_cell_render_cache": GENERATIONS * rows * max(1, columns),
        "_row_render_cache": GENERATIONS * rows,
        "_row_renderable_cache": GENERATIONS * rows,
        "_line_cache": GENERATIONS * rows,
    }
    for name, size in sizes.items():
        cache = getattr(table, name, None)
        if cache is None or not hasattr(cache, "maxsize") or cache.maxsize == size:
            continue
        if len(cache) > size:
            cache.clear()  # entries of older updates: never hit again
        cache.maxsize = size
    return True


def render_cache_sizes(table: DataTable[object]) -> dict[str, int]:
    """How many entries each render cache holds now (for tests and the soak benchmark)."""
    return {name: len(getattr(table, name)) for name in _CACHES
            if getattr(table, name, None) is not None}


def app_driver(app: App[Any]) -> Driver | None:
    """The driver `app` writes to the terminal with; None before it runs, after it
    ends, or where this Textual keeps it elsewhere."""
    try:
        return app._driver
    except AttributeError:
        return None
