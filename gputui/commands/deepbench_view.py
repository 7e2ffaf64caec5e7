"""A deepbench result in the terminal: one Rich table per op (`bench.deepbench.tables`
builds their titles, cells and slowest rows), the slowest shapes relative to the peak in
red."""

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
        table = Table(title=no_markup(op.title + (", slowest vs peak in red" if op.slowest
                                                  else "")))
        for col in op.columns:
            # A shape is never cut short.
            table.add_column(col.header, justify="right" if col.numeric else "left",
                             overflow="fold" if col.shape else "ellipsis")
        for i, cells in enumerate(op.rows):
            table.add_row(*(Text(c) for c in cells), style="red" if i in op.slowest else "")
        out.append(table)
    return out
