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

`CellCachedTable`: a DataTable that renders a cell again only when what it shows
changed. Textual's DataTable keys its cell renderings on that update counter too, so
one changed cell (a process's running time) renders every visible cell again through
Rich (~230 cells for 16 processes, most of the monitor's UI time on a box with GPU
processes). The subclass keeps each visible cell's last rendering keyed by what it
shows (the subclass's `cell_content_key`) and by everything else Textual renders it
with, and asks DataTable's own `_render_cell` only for the cells that changed. A changed
cell that is one line of printable ASCII text in one style, narrower than its column,
it draws itself (~15× cheaper than Rich's padding and styling pipeline, ~0.1 ms a cell
here): the text justified in the column, padded, in the style DataTable's
`_get_styles_to_render_cell` gives the cell over the row's style, as one segment — what
DataTable draws, as a test compares. It also lays out its lines itself (`render_line`)
for the simple table it is used as (a row cursor, a one-line header, rows of one line,
no fixed rows, columns or row labels): the cells side by side in the row's zebra style,
the rest of the width in the cursor's or the row's, cropped to the scroll position —
DataTable's `_render_line_in_row` without its per-line style lookups, which it repeats
for every line (the styles are looked up once per repaint here). The signatures and the
private state it reads (`_show_hover_cursor`, `_pseudo_class_state`,
`_labelled_row_exists`) are Textual's; on an untested version, or a table that is not
that simple, every line and cell goes straight to Textual. `set_cells` changes cells as
`update_cell` does (DataTable's `_data` and `_update_count`) but refreshes only the
cells' row, once, where `update_cell` refreshes the whole table for each.

`forget_removed_widgets()`: empties `StylesCache.get_inner_outer`'s LRU cache, whose keys
keep removed widgets' style caches (and their drawn lines) alive; the monitor and the fleet
view call it every FORGET_REMOVED_EVERY_S.

`supported()` also decides whether the monitor and the fleet view write through the
terminal writer (`terminal_writer.diffing_driver`): it follows Textual's output as the
tested versions write it, so on another version the apps run with Textual's own driver.

Nothing here patches Textual or Rich: it sets sizes on one table's own caches, empties
one of Textual's caches through its public `cache_clear`, and overrides methods in a
subclass of its own.
"""

from __future__ import annotations

import contextlib
import os
import re
import selectors
import threading
from codecs import getincrementaldecoder
from collections.abc import Hashable, Mapping
from functools import cache
from pathlib import Path
from typing import Any, TypeVar

from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual import constants
from textual.app import App
from textual.coordinate import Coordinate
from textual.driver import Driver
from textual.drivers.linux_driver import LinuxDriver
from textual.geometry import Region
from textual.strip import Strip
from textual.widgets import DataTable
from textual.widgets.data_table import ColumnKey, RowKey

__all__ = ["FORGET_REMOVED_EVERY_S", "CellCachedTable", "QuietInputDriver", "app_driver",
           "bound_render_caches", "forget_removed_widgets", "render_cache_sizes",
           "supported"]

# How often the apps let go of what removed widgets left in Textual's style cache.
FORGET_REMOVED_EVERY_S = 60.0

CellType = TypeVar("CellType")

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


def forget_removed_widgets() -> bool:
    """Let go of the widgets Textual's `StylesCache.get_inner_outer` keeps; False (nothing
    done) on a Textual this is not tested with.

    That method is an `lru_cache(1024)` on an instance method: its keys hold the
    StylesCache of every widget that drew — and with it every line that widget drew — after
    the widget is removed. A toast, a dialog, a screen opened and closed each leave ~10 KB
    that way, up to 1,024 of them: ~1.2 MB an hour for half a day for a monitor raising an
    alert every two minutes. The cache maps two colours to two styles, so emptying
    it now and then costs a few lookups."""
    if not supported():
        return False
    try:  # a private module: imported only on a version it is known to be in
        from textual._styles_cache import StylesCache
    except ImportError:
        return False
    clear = getattr(getattr(StylesCache, "get_inner_outer", None), "cache_clear", None)
    if clear is None:
        return False
    clear()
    return True


def app_driver(app: App[Any]) -> Driver | None:
    """The driver `app` writes to the terminal with; None before it runs, after it
    ends, or where this Textual keeps it elsewhere."""
    try:
        return app._driver
    except AttributeError:
        return None


class _WakingEvent(threading.Event):
    """The input thread's exit event, which also wakes the thread's select when set."""

    def __init__(self, wake_fd: int) -> None:
        super().__init__()
        self.wake_fd = wake_fd

    def set(self) -> None:
        super().set()
        if self.wake_fd >= 0:  # (-1 once the driver closed it: the number may be reused)
            with contextlib.suppress(OSError):  # full: the thread is awake already
                os.write(self.wake_fd, b"x")


class QuietInputDriver(LinuxDriver):
    """Textual's Linux driver whose input thread sleeps until a key arrives or the app
    leaves. Textual's looks every 0.1 s (its select's timeout), ten wakeups a second that
    cost a monitor at rest ~0.1 % of a core here. After input it still looks every
    ESCAPE_DELAY until two looks in a row find nothing, so the parser's tick reports a
    lone ESC (or an escape sequence cut short) as Textual's loop does. Leaving wakes the
    thread through a pipe written when its exit event is set, where Textual's waits out
    its timeout (and a last 0.1 s select once it stopped reading).

    `run_input_thread` is Textual's, with the parser (a private module) and the
    driver's private debug flag; on an untested version, or where those are gone, it is
    Textual's own loop."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.wake_read, wake_write = os.pipe()
        os.set_blocking(wake_write, False)
        self.waking_exit = self.exit_event = _WakingEvent(wake_write)

    def close(self) -> None:
        super().close()
        fds, self.waking_exit.wake_fd = (self.wake_read, self.waking_exit.wake_fd), -1
        for fd in fds:
            with contextlib.suppress(OSError):
                os.close(fd)

    def run_input_thread(self) -> None:
        try:
            if not supported():
                raise ImportError
            from textual._parser import ParseError
            from textual._xterm_parser import XTermParser

            parser = XTermParser(self._debug)
        except (ImportError, AttributeError, TypeError):
            super().run_input_thread()
            return
        decode = getincrementaldecoder("utf-8")().decode
        selector = selectors.SelectSelector()  # as Textual's (a tty on any platform)
        selector.register(self.fileno, selectors.EVENT_READ, "input")
        selector.register(self.wake_read, selectors.EVENT_READ, "wake")
        quiet_looks = 2
        try:
            while not self.exit_event.is_set():
                timeout = None if quiet_looks >= 2 else constants.ESCAPE_DELAY
                quiet_looks += 1
                for key, _ in selector.select(timeout):
                    if key.data == "wake":
                        os.read(self.wake_read, 64)
                        continue
                    try:
                        data = decode(os.read(self.fileno, 4096))
                    except OSError:  # a hung-up terminal (EIO): as its end
                        data = ""
                    if not data:  # the terminal is gone (or a piped input ended)
                        selector.unregister(self.fileno)
                        continue
                    quiet_looks = 0
                    for event in parser.feed(data):
                        self.process_message(event)
                for event in parser.tick():
                    self.process_message(event)
        finally:
            selector.close()
            with contextlib.suppress(EOFError, ParseError):
                for _ in parser.feed(""):
                    pass


class CellCachedTable(DataTable[CellType]):
    """A DataTable whose cells are rendered again only when what they show changed (see
    the module's docstring). A subclass says what text a cell shows: `cell_text`."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # (row, column) → (everything the rendering depends on, the rendering): one entry
        # per cell drawn, so the cache holds what is on screen and no history.
        self._cell_renders: dict[tuple[int, int], tuple[Hashable, list[list[Segment]]]] = {}
        # (the table's, the header's, an even row's, an odd row's style) of this repaint;
        # None: Textual lays the lines out.
        self._line_styles: tuple[Style, Style, Style, Style] | None = None

    draw_here = True  # simple lines and cells drawn here (False: all of it by Textual)

    def cell_text(self, value: object) -> Text | None:
        """The Text a cell (or a column's label) shows; None: something else, which
        Textual renders every time. A subclass with cells of its own type says here."""
        return value if isinstance(value, Text) else None

    def cell_content_key(self, value: object) -> Hashable | None:
        """What a cell shows, as a key: only a Text in one style (no spans) has one."""
        text = self.cell_text(value)
        if text is None or text.spans or text.style:
            return None
        return text.plain, text.justify, text.overflow, text.no_wrap

    def notify_style_update(self) -> None:
        self._cell_renders.clear()  # the theme or the CSS changed: every cell's look
        super().notify_style_update()

    def set_cells(self, row_key: str, values: Mapping[str, CellType]) -> None:
        """`update_cell` (no width update) for cells of one row, which draws again only
        that row, once, where DataTable's refreshes the whole table for each cell: with
        the processes' running times moving at every reading, that drew the header and
        every blank line below the rows too."""
        row = RowKey(row_key)
        if (not supported() or row not in self._row_locations
                or not all(ColumnKey(c) in self._column_locations for c in values)):
            for column_key, value in values.items():  # (with DataTable's own errors)
                self.update_cell(row_key, column_key, value)
            return
        data = self._data[row]
        for column_key, value in values.items():
            data[ColumnKey(column_key)] = value
        self._update_count += 1  # DataTable's render caches are keyed by it
        self.refresh_row(self._row_locations.get(row))

    def render_lines(self, crop: Region) -> list[Strip]:
        # The styles every line of this repaint is drawn with, looked up once.
        self._line_styles = None
        if self.draw_here and supported() and self._simple_layout():
            self._line_styles = (
                self.rich_style,
                self.get_component_styles("datatable--header").rich_style,
                self.get_component_styles("datatable--even-row").rich_style,
                self.get_component_styles("datatable--odd-row").rich_style,
            )
        return super().render_lines(crop)

    def _simple_layout(self) -> bool:
        """A row cursor, a one-line header, no fixed rows, columns or labels, and every
        row one line high (a line per row: line y is row y - 1)."""
        return (self.cursor_type == "row" and self.show_header and self.header_height == 1
                and not self.fixed_rows and not self.fixed_columns
                and not (self._labelled_row_exists and self.show_row_labels)
                and len(self._y_offsets) == self.row_count)

    def render_line(self, y: int) -> Strip:
        styles = self._line_styles
        if styles is None:
            return super().render_line(y)
        base, header, even, odd = styles
        width = self.size.width
        scroll_x, scroll_y = self.scroll_offset
        row_index = y - 1 if y < 1 else y - 1 + scroll_y  # -1: the header
        if row_index >= self.row_count:
            return Strip.blank(width, base)
        if row_index == -1:
            row_style = header
        elif self.zebra_stripes:
            row_style = odd if row_index % 2 else even
        else:
            row_style = base
        cursor, hover = self.cursor_coordinate.row, self.hover_coordinate.row
        on_cursor, on_hover = row_index == cursor, row_index == hover
        segments: list[Segment] = []
        used = 0
        for column_index, column in enumerate(self.ordered_columns):
            cell_width = column.get_render_width(self)
            used += cell_width
            segments.extend(self._render_cell(row_index, column_index, row_style, cell_width,
                                              cursor=on_cursor, hover=on_hover)[0])
        extend, _ = self._get_styles_to_render_cell(
            row_index == -1, False, False, on_hover, on_cursor, self.show_cursor,
            self._show_hover_cursor, False, False)
        extend = row_style + extend + Style.from_meta(
            {"row": row_index, "column": 0, "out_of_bounds": True})
        segments.append(Segment(" " * max(0, width - used), extend))
        strip = Strip(segments).crop(scroll_x, scroll_x + width)
        return strip.adjust_cell_length(width, base).simplify()

    def _render_cell(self, row_index: int, column_index: int, base_style: Style, width: int,
                     cursor: bool = False, hover: bool = False) -> list[list[Segment]]:
        if not supported() or column_index < 0:
            return super()._render_cell(row_index, column_index, base_style, width,
                                        cursor, hover)
        if row_index < 0:
            value: object = self.ordered_columns[column_index].label
        else:
            value = self.get_cell_at(Coordinate(row_index, column_index))
        content = self.cell_content_key(value)
        if content is None:
            return super()._render_cell(row_index, column_index, base_style, width,
                                        cursor, hover)
        key = (content, base_style, width, cursor, hover, self._show_hover_cursor,
               self._pseudo_class_state, self.cursor_type, self.show_cursor)
        where = (row_index, column_index)
        known = self._cell_renders.get(where)
        if known is not None and known[0] == key:
            return known[1]
        lines = None
        text = self.cell_text(value)
        if self.draw_here and row_index >= 0 and text is not None:
            lines = self._quick_cell(row_index, column_index, base_style, width, cursor,
                                     hover, text)
        if lines is None:
            lines = super()._render_cell(row_index, column_index, base_style, width,
                                         cursor, hover)
        if len(self._cell_renders) > 4 * (self.row_count + 1) * max(1, len(self.columns)):
            self._cell_renders.clear()  # rows gone since: never drawn there again
        self._cell_renders[where] = (key, lines)
        return lines

    def _quick_cell(self, row_index: int, column_index: int, base_style: Style, width: int,
                    cursor: bool, hover: bool, text: Text) -> list[list[Segment]] | None:
        """A one-line cell of plain ASCII text as DataTable draws it; None where it is not
        that simple (Textual draws it)."""
        plain = text.plain
        room = width - 2 * self.cell_padding
        if (text.spans or text.style or text.justify not in ("left", "right")
                or not plain.isascii() or not plain.isprintable() or len(plain) > room
                or plain != plain.rstrip()  # Rich strips a right-justified text first
                or self.fixed_rows or self.fixed_columns
                or self.ordered_rows[row_index].height != 1):
            return None
        component, post = self._get_styles_to_render_cell(
            False, False, False, hover, cursor, self.show_cursor, self._show_hover_cursor,
            self.cursor_foreground_priority == "css", self.cursor_background_priority == "css")
        style = base_style + Style.from_meta({"row": row_index, "column": column_index})
        style = style + component + post
        pad = " " * self.cell_padding
        body = plain.rjust(room) if text.justify == "right" else plain.ljust(room)
        return [[Segment(pad + body + pad, style)]]
