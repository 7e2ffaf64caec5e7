"""A finished deepbench run's tables in the run pane: one per op, the same titles, cells and
slowest rows as `bench show` (`bench.deepbench.tables` builds them for both). The slowest
shapes against the peak are marked ▼ as well as coloured, so the mark survives every theme
(the high-contrast theme's error colour is orange) and a terminal without colour.

Drawn as tables where they fit the pane; where they do not (the pane is ~37 columns at
80×24, a convolution's shape alone 27), each shape takes a line and its figures the next,
aligned under one header, so no number is ever split across lines."""

from __future__ import annotations

from typing import ClassVar

from rich import box
from rich.cells import cell_len
from rich.console import Console, ConsoleOptions, RenderResult
from rich.measure import Measurement
from rich.style import Style
from rich.table import Table
from rich.text import Text
from textual.widgets import Static

from gputui.bench.deepbench.tables import OpTable, op_tables
from gputui.bench.result import Result

SLOW_MARK = "▼"
UNBOUNDED = 100_000  # "as wide as it wants" when measuring a table


def title_text(t: OpTable) -> Text:
    return Text(t.title + (f", {SLOW_MARK} slowest vs peak" if t.slowest else ""),
                style="bold")


def op_table(t: OpTable, slow: Style) -> Table:
    """One op's table, drawn compactly for a pane: no outer box, the mark column first
    (its title is drawn above it, as wide as the pane)."""
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False, collapse_padding=True)
    table.add_column("", width=1, no_wrap=True)
    for col in t.columns:
        table.add_column(col.header, justify="right" if col.numeric else "left",
                         overflow="fold")  # a shape is never cut short
    for i, cells in enumerate(t.rows):
        low = i in t.slowest
        table.add_row(SLOW_MARK if low else "", *(Text(c) for c in cells),
                      style=slow if low else None)
    return table


def stacked(t: OpTable, slow: Style) -> tuple[Text, Table]:
    """One op for a narrow pane: each shape on a line (what ran under it), its figures on
    the next, aligned under one header; the mark in a column of its own, so a line that
    wraps stays indented."""
    shapes = [i for i, c in enumerate(t.columns) if c.shape]
    figures = [i for i, c in enumerate(t.columns) if c.numeric]
    words = [i for i, c in enumerate(t.columns) if not c.shape and not c.numeric]
    width = {i: max(cell_len(t.columns[i].header), *(cell_len(r[i]) for r in t.rows))
             for i in figures}

    def lines(cells: tuple[str, ...]) -> list[str]:
        out = [cells[shapes[0]], *(f"→ {cells[i]}" for i in shapes[1:])]
        out.append("  " + "  ".join(cells[i].rjust(width[i]) for i in figures))
        out += [f"  {cells[i]}" for i in words if cells[i]]
        return out

    grid = Table.grid(padding=(0, 1))
    grid.add_column(width=1, no_wrap=True)
    grid.add_column(overflow="fold")
    grid.add_row("", Text("\n".join(lines(tuple(c.header for c in t.columns))), style="dim"))
    for n, cells in enumerate(t.rows):
        low = n in t.slowest
        grid.add_row(SLOW_MARK if low else "", Text("\n".join(lines(cells))),
                     style=slow if low else None)
    return title_text(t), grid


class DeepbenchView:
    """The tables of one result, laid out for the width they are drawn at."""

    def __init__(self, tables: list[OpTable], slow: Style) -> None:
        self.tables = tables
        self.slow = slow

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        wide = [op_table(t, self.slow) for t in self.tables]
        unbounded = options.update_width(UNBOUNDED)
        fits = all(Measurement.get(console, unbounded, t).maximum <= options.max_width
                   for t in wide)
        for n, (t, table) in enumerate(zip(self.tables, wide, strict=True)):
            if n:
                yield Text("")
            yield from ((title_text(t), table) if fits else stacked(t, self.slow))


class DeepbenchTables(Static):
    """Empty and hidden for any other result (and while a run is in progress)."""

    COMPONENT_CLASSES: ClassVar[set[str]] = {"deepbench--slowest"}
    DEFAULT_CSS = """
    DeepbenchTables { height: auto; margin-top: 1; }
    DeepbenchTables > .deepbench--slowest { color: $error; text-style: bold; }
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__("", id=id)
        self._shown: tuple[str, Style] | None = None  # (result id, style) on screen

    def show_result(self, result: Result | None) -> None:
        # The pane is redrawn every frame: the tables are built and drawn again only when
        # the result or the slowest rows' style changes.
        shown = self._shown
        if (result is not None and shown is not None and shown[0] == result.id
                and shown[1] == self.get_component_rich_style("deepbench--slowest")):
            return
        tables = op_tables(result) if result is not None else []
        self.display = bool(tables)
        if result is None or not tables:
            self._shown = None
            self.update("")
            return
        slow = self.get_component_rich_style("deepbench--slowest")
        self._shown = (result.id, slow)
        self.update(DeepbenchView(tables, slow))
