"""A deepbench result in the terminal: one Rich table per op (`bench.deepbench.tables`
builds their titles, cells and slowest rows), the slowest shapes relative to the peak
marked ▼ and in red, as the TUI marks them."""

from __future__ import annotations

from typing import TYPE_CHECKING

from gputui.bench.deepbench.tables import op_tables
from gputui.bench.result import Result
from gputui.safe_text import no_markup

if TYPE_CHECKING:
    from rich.table import Table


def deepbench_tables(r: Result) -> list[Table]:
    """One table per op of a deepbench result; [] for any other result."""
    from rich.table import Table
    from rich.text import Text

    out = []
    for op in op_tables(r):
        # A title given as Text would lose the table's title style: escaped markup instead.
        table = Table(title=no_markup(op.title + (", ▼ slowest vs peak" if op.slowest
                                                  else "")))
        if op.slowest:  # marked, not only coloured: a pipe or a log keeps the mark
            table.add_column("", width=1, no_wrap=True)
        for col in op.columns:
            # A shape is never cut short.
            table.add_column(col.header, justify="right" if col.numeric else "left",
                             overflow="fold" if col.shape else "ellipsis")
        for i, cells in enumerate(op.rows):
            slow = i in op.slowest
            mark = [Text("▼" if slow else "")] if op.slowest else []
            table.add_row(*mark, *(Text(c) for c in cells), style="red" if slow else "")
        out.append(table)
    return out
