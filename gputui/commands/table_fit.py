"""Rich tables in the CLI that never turn a value into "…".

Piped or redirected, a table is printed as wide as its content (a script or `less -S`
reads every value whole). On a terminal narrower than the table, the caller's narrow
layout (fewer columns) is used when it fits; columns fold rather than truncate.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rich.console import Console
    from rich.table import Table

UNBOUNDED = 100_000  # "as wide as it wants" when measuring


def natural_width(console: Console, table: Table) -> int:
    """The width the table takes with no limit (every cell on one line)."""
    from rich.measure import Measurement

    return Measurement.get(console, console.options.update_width(UNBOUNDED), table).maximum


def fits(console: Console, table: Table) -> bool:
    """Whether the table fits the terminal without cutting a value: its minimum width
    (no_wrap columns whole, the others wrapped at their longest word) is the test, so
    give no_wrap to every column whose values must stay on one line."""
    from rich.measure import Measurement

    options = console.options.update_width(UNBOUNDED)
    return Measurement.get(console, options, table).minimum <= console.width


def no_ellipsis(table: Table) -> Table:
    """Columns that wrap or fold when squeezed, never cut with "…"."""
    for column in table.columns:
        if column.overflow == "ellipsis":
            column.overflow = "fold"
    return table


def print_fitted(console: Console, table: Table, narrow: Sequence[Table] = ()) -> Table:
    """Print `table`, or on a too-narrow terminal the first of `narrow` that fits (the last
    one when none does). Returns the table printed."""
    if not console.is_terminal:
        saved = console.width
        console.width = max(natural_width(console, table), saved)
        try:
            console.print(no_ellipsis(table))
        finally:
            console.width = saved
        return table
    chosen = table
    if not fits(console, table):
        for candidate in narrow:
            chosen = candidate
            if fits(console, candidate):
                break
    console.print(no_ellipsis(chosen))
    return chosen
