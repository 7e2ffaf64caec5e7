"""GPU processes: a DataTable updated in place (rows diffed by key), sortable by column.

Column widths are set here, never measured by the DataTable ("auto width"). Textual
caches each rendered cell keyed by the table's update counter, not by the column's
width, and measures auto-width columns later, on idle, without invalidating that cache.
A frame drawn between `add_row` and the idle handler therefore kept the narrow
rendering for good: PID 5150 showed as `515` (USER, RSS, COMMAND were cut too) until
some other cell changed. Here the widths are computed from the rows as they are added,
before anything can be drawn, and every cached cell is dropped when a width changes.
COMMAND takes whatever width is left, and a long command ends in an ellipsis.

POD, CONTAINER, POWER and ENERGY are columns only while some process has a value for
them (a box without pods or containers shows neither). `g` groups the rows by user,
container or pod (gputui.telemetry.process_groups), each group one row with its totals;
`g` again goes on to the next grouping, then back to the processes.

The table never scrolls sideways (a horizontal scrollbar at 80 columns hid the commands
and left its thumb's partial-block glyph, `▋`, in the table's last line): when COMMAND
would get less than COMMAND_WANT cells, optional columns are dropped, then USER
is narrowed (OPTIONAL gives the order). Sorting still works on a dropped column (the title says so).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

from rich.cells import cell_len
from rich.text import Text
from textual.binding import Binding, BindingType
from textual.coordinate import Coordinate
from textual.geometry import Size
from textual.widgets import DataTable
from textual.widgets.data_table import RowDoesNotExist, RowKey

from gputui.safe_text import printable
from gputui.telemetry.model import GpuProcess
from gputui.telemetry.process_groups import GROUP_BY, ProcessGroup, group_processes
from gputui.telemetry.units import NA, fmt_bytes, fmt_duration, fmt_j, fmt_w
from gputui.ui.textual_adapter import CellCachedTable, bound_render_caches


@dataclass(frozen=True, slots=True)
class Column:
    """One column of the process table: how it sorts and how it reads."""

    key: str
    label: str
    raw: Callable[[Any, float], Any]  # the value sorted on (of a process or a group)
    show: Callable[[Any, float], str]
    right: bool = False
    max_width: int = 0  # cells, without padding (longer values end in "…"); 0: no limit
    only_when_known: bool = False  # a column only while some row has a value for it


def _age(p: GpuProcess, now: float) -> float | None:
    return None if p.started is None else max(0.0, now - p.started)


def _util(attr: str) -> Column:
    """A per-process utilisation column (% of the GPU since the previous process reading).
    None means the driver gave no sample for it (it did not run there): "—", not N/A."""
    def raw(p: GpuProcess, _n: float) -> int | None:
        return getattr(p, attr)

    def show(p: GpuProcess, _n: float) -> str:
        v = getattr(p, attr)
        return NO_SAMPLE if v is None else f"{v}"

    return Column(attr.removesuffix("_pct"), UTIL_LABELS[attr], raw, show, True)


def _energy(value: float | None, estimate: bool | None, fmt: Callable[[float | None], str],
            ) -> str:
    """W or J of a process or group: "—" where no energy reached it, "~" marks an
    estimate (a shared GPU)."""
    if value is None:
        return NO_SAMPLE
    return ("~" if estimate else "") + fmt(value)


NO_SAMPLE = "—"
UTIL_LABELS = {"sm_util_pct": "SM%", "mem_util_pct": "MEM%", "enc_util_pct": "ENC%",
               "dec_util_pct": "DEC%"}
COLUMNS: tuple[Column, ...] = (
    Column("gpu", "GPU", lambda p, _n: p.gpu_index, lambda p, _n: str(p.gpu_index), True),
    Column("pid", "PID", lambda p, _n: p.pid, lambda p, _n: str(p.pid), True),
    # USER, CONTAINER and COMMAND come from other people (any local user controls their
    # own argv and cgroup names): control characters and markup are shown escaped.
    Column("user", "USER", lambda p, _n: p.user,
           lambda p, _n: printable(p.user) if p.user else NA, False, 12),
    Column("gpu_mem", "GPU MEM", lambda p, _n: p.gpu_mem_bytes,
           lambda p, _n: fmt_bytes(p.gpu_mem_bytes), True),
    _util("sm_util_pct"),
    _util("mem_util_pct"),  # the memory controller (bandwidth), not memory used
    _util("enc_util_pct"),
    _util("dec_util_pct"),
    Column("power", "POWER", lambda p, _n: p.power_w,
           lambda p, _n: _energy(p.power_w, p.energy_estimate, fmt_w), True,
           only_when_known=True),
    Column("energy", "ENERGY", lambda p, _n: p.energy_j,
           lambda p, _n: _energy(p.energy_j, p.energy_estimate, fmt_j), True,
           only_when_known=True),
    Column("cpu", "CPU%", lambda p, _n: p.cpu_pct,
           lambda p, _n: NA if p.cpu_pct is None else f"{p.cpu_pct:.0f}", True),
    Column("rss", "RSS", lambda p, _n: p.rss_bytes, lambda p, _n: fmt_bytes(p.rss_bytes), True),
    Column("time", "TIME", _age,
           lambda p, n: NA if (a := _age(p, n)) is None else fmt_duration(a), True),
    # POD is "namespace/pod" (or the pod's uid where only that is known).
    Column("pod", "POD", lambda p, _n: p.pod_name,
           lambda p, _n: printable(p.pod_name) if p.pod_name else NO_SAMPLE, False, 32,
           only_when_known=True),
    Column("container", "CONTAINER", lambda p, _n: p.container,
           lambda p, _n: printable(p.container) if p.container else NO_SAMPLE, False, 24,
           only_when_known=True),
    Column("command", "COMMAND", lambda p, _n: p.command,
           lambda p, _n: printable(p.command) if p.command else NA),
)
COLUMN_KEYS = tuple(c.key for c in COLUMNS)
ONLY_WHEN_KNOWN = frozenset(c.key for c in COLUMNS if c.only_when_known)
# Names of the rows of processes that have none, by grouping.
NO_GROUP = {"user": "(unknown user)", "container": "(not in a container)",
            "pod": "(not in a pod)"}


def group_columns(by: str) -> tuple[Column, ...]:
    """The columns of a grouped table: the totals, then the group's name (which takes
    the room COMMAND takes in the process table)."""
    def name(g: ProcessGroup, _n: float) -> str:
        return printable(g.name) if g.name else NO_GROUP[g.by]

    return (
        Column("procs", "PROCS", lambda g, _n: g.processes, lambda g, _n: str(g.processes),
               True),
        Column("gpus", "GPUS", lambda g, _n: g.gpus,
               lambda g, _n: ",".join(map(str, g.gpus)), False, 12),
        Column("gpu_mem", "GPU MEM", lambda g, _n: g.gpu_mem_bytes,
               lambda g, _n: fmt_bytes(g.gpu_mem_bytes), True),
        Column("sm_util", "SM%", lambda g, _n: g.sm_util_pct,
               lambda g, _n: NO_SAMPLE if g.sm_util_pct is None else str(g.sm_util_pct), True),
        Column("power", "POWER", lambda g, _n: g.power_w,
               lambda g, _n: _energy(g.power_w, g.energy_estimate, fmt_w), True),
        Column("energy", "ENERGY", lambda g, _n: g.energy_j,
               lambda g, _n: _energy(g.energy_j, g.energy_estimate, fmt_j), True),
        Column("group", by.upper(), lambda g, _n: g.name or "", name),
    )


def columns_by_key(columns: tuple[Column, ...]) -> dict[str, Column]:
    return {c.key: c for c in columns}


COLUMNS_BY_KEY = columns_by_key(COLUMNS)
COMMAND_WANT = 20  # below this, less important columns make room for the command
# The extra columns stay only while COMMAND still gets this much: a command line cut to
# 20 cells ("python train.py --r…") says less than the codec or container columns.
COMMAND_WANT_EXTRAS = 32
COMMAND_WANT_SM = 26  # "python train.py --run 4242" whole beats an SM% column
# (column, the COMMAND width below which it is dropped), in the order they are dropped
# when the table is narrow: the codec columns (rarely non-zero on a training box) first,
# then the container, the pod, memory-controller %, energy, power, SM%, RSS, TIME and
# CPU%. GPU, PID, USER, GPU MEM and COMMAND always stay (a grouped table drops GPUS
# first, then its energy and power).
OPTIONAL: tuple[tuple[str, int], ...] = (
    ("dec_util", COMMAND_WANT_EXTRAS), ("enc_util", COMMAND_WANT_EXTRAS),
    ("container", COMMAND_WANT_EXTRAS), ("pod", COMMAND_WANT_EXTRAS),
    ("mem_util", COMMAND_WANT_EXTRAS), ("energy", COMMAND_WANT_EXTRAS),
    ("power", COMMAND_WANT_EXTRAS), ("sm_util", COMMAND_WANT_SM), ("rss", COMMAND_WANT),
    ("time", COMMAND_WANT), ("cpu", COMMAND_WANT), ("gpus", COMMAND_WANT_EXTRAS))
USER_MIN_WIDTH = 6
TIE_BREAKERS = 2  # ties sort by the first columns: GPU, PID (a group's PROCS, GPUS)


class Cell:
    """A cell that shows text but sorts by its raw value (missing values sort last), and
    knows its row (a hidden column may be the one sorted on)."""

    __slots__ = ("raw", "row", "text")

    def __init__(self, raw: Any, text: Text, row: str = "") -> None:
        self.raw = raw
        self.text = text
        self.row = row

    def __rich__(self) -> Text:
        return self.text

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Cell) and (self.raw, self.text) == (other.raw, other.text)

    __hash__ = None  # type: ignore[assignment]


def row_key(p: GpuProcess) -> str:
    return f"{p.gpu_index}:{p.pid}"


class ProcessTable(CellCachedTable[Cell]):
    DEFAULT_CSS = """
    ProcessTable { height: 1fr; border: round $primary 60%; border-title-style: bold;
                   overflow-x: hidden; }
    ProcessTable:focus { border: round $primary; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        # Not in the footer (the focused table's keys would come first there): in `?` help.
        Binding("g", "cycle_group", "Group", show=False),
    ]

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id, cursor_type="row", zebra_stripes=True)
        self.sort_column = "gpu_mem"
        self.sort_reverse = True
        self.group_by: str | None = None  # None: one row per process
        self._process_sort = (self.sort_column, self.sort_reverse)  # kept while grouped
        self.table_columns: tuple[Column, ...] = COLUMNS  # this view's columns
        self._by_key = COLUMNS_BY_KEY
        self.processes: dict[str, GpuProcess] = {}  # the latest processes, by row key
        self._rows: dict[str, object] = {}  # what each row shows: a process or a group
        self._shown: dict[str, list[Cell]] = {}  # every column's cell of each row
        self._absent: frozenset[str] = frozenset()  # only_when_known columns with no value
        self._now = 0.0
        self.shown_columns: tuple[str, ...] = COLUMN_KEYS  # the columns in the table now

    def cell_text(self, value: object) -> Text | None:
        return value.text if isinstance(value, Cell) else super().cell_text(value)

    @property
    def column_keys(self) -> tuple[str, ...]:
        return tuple(c.key for c in self.table_columns)

    def on_mount(self) -> None:
        for c in self.table_columns:
            self.add_column(self._label(c), key=c.key, width=cell_len(c.label))
        self.border_title = "Processes"
        self._fit_columns()

    def _layout(self) -> tuple[tuple[str, ...], dict[str, int]]:
        """(visible columns, their widths). Each column as wide as its label (with the
        sort mark) and its widest value; the last column (COMMAND, or the group's name)
        gets what is left of the width, and optional columns are dropped while it would
        get less than COMMAND_WANT."""
        keys = self.column_keys
        flex = keys[-1]
        widths: dict[str, int] = {}
        for i, c in enumerate(self.table_columns[:-1]):
            w = max([cell_len(c.label) + (c.key == self.sort_column),
                     *(row[i].text.cell_len for row in self._shown.values())])
            widths[c.key] = min(w, c.max_width) if c.max_width else w
        pad = 2 * self.cell_padding
        avail = self.size.width
        if len(self._shown) + self.header_height > self.size.height:  # a vertical scrollbar
            avail -= self.styles.scrollbar_size_vertical
        visible = [k for k in keys if k not in self._absent]

        def room() -> int:
            return avail - sum(widths[k] + pad for k in visible if k != flex) - pad

        for key, want in OPTIONAL:  # `want` never grows along the order
            if room() >= want:
                break
            if key in visible:
                visible.remove(key)
        short = COMMAND_WANT - room()
        if short > 0 and widths.get("user", 0) > USER_MIN_WIDTH:
            widths["user"] = max(USER_MIN_WIDTH, widths["user"] - short)
        widths[flex] = max(1, room())
        return tuple(visible), {k: widths[k] for k in visible}

    def _fit_columns(self) -> None:
        """Set the columns and their widths; drop every cached rendering if one changed."""
        if not self.columns:
            return
        visible, widths = self._layout()
        if visible != self.shown_columns:
            self._rebuild(visible, widths)
            return
        changed = False
        for key, width in widths.items():
            column = self.columns[self.columns_key(key)]
            if column.width != width:
                column.width = width
                changed = True
        if not changed:
            return
        # DataTable's caches are keyed by its update counter, not by widths: its public
        # style-change hook clears them.
        self.notify_style_update()
        self.virtual_size = Size(sum(c.get_render_width(self) for c in self.columns.values()),
                                 self.virtual_size.height)
        self.refresh()

    def _rebuild(self, visible: tuple[str, ...], widths: dict[str, int]) -> None:
        """Columns dropped or brought back (a resize, a column with values now, another
        grouping): rebuild the table from `_shown`. Rare, so simple: the rows are re-added
        and re-sorted, the selection kept."""
        selected = self.selected_key()
        self.shown_columns = visible
        self.clear(columns=True)
        for key in visible:
            self.add_column(self._label(self._by_key[key]), key=key, width=widths[key])
        for key, cells in self._shown.items():
            self.add_row(*self._visible_cells(cells), key=key)
        self._update_title()
        self._sort(selected)

    def _visible_cells(self, cells: list[Cell]) -> list[Cell]:
        return [cell for key, cell in zip(self.column_keys, cells, strict=True)
                if key in self.shown_columns]

    def on_resize(self) -> None:
        self._fit_columns()
        # After the frame is drawn: telling Textual's version reads package metadata
        # (~10 ms), and the caps only matter on long runs.
        self.call_after_refresh(self._bound_caches)

    def _bound_caches(self) -> None:
        bound_render_caches(self, self.size.height, len(COLUMNS))

    def _label(self, c: Column) -> Text:
        mark = ("▼" if self.sort_reverse else "▲") if c.key == self.sort_column else ""
        return Text(c.label + mark, justify="right" if c.right else "left")

    def _cells(self, key: str, row: object, old: list[Cell] | None = None) -> list[Cell]:
        """The row's cells; those of `old` (the row as shown) where value and text are
        the same, so that only what changed is made (and drawn) again."""
        out = []
        for i, c in enumerate(self.table_columns):
            raw, shown = c.raw(row, self._now), c.show(row, self._now)
            if old is not None and old[i].raw == raw and old[i].text.plain == shown:
                out.append(old[i])
                continue
            # no_wrap + ellipsis: a value wider than its column ends in "…", never wraps.
            out.append(Cell(raw, Text(shown, justify="right" if c.right else "left",
                                      no_wrap=True, overflow="ellipsis", end=""), key))
        return out

    def _rows_of(self, procs: tuple[GpuProcess, ...]) -> dict[str, object]:
        if self.group_by is None:
            return {row_key(p): p for p in procs}
        return {f"group:{g.key}": g for g in group_processes(procs, self.group_by)}

    def update_processes(self, procs: tuple[GpuProcess, ...], now: float) -> None:
        """Diff against what is shown: remove gone rows, add new ones, update changed cells."""
        self._now = now
        self.processes = {row_key(p): p for p in procs}
        selected = self.selected_key()
        new = self._rows_of(procs)
        changed = False  # any cell: the columns' widths may change
        reorder = False  # rows came or went, or a value sorted on changed
        for key in list(self._rows):
            if key not in new:
                self.remove_row(key)
                del self._shown[key]
                changed = reorder = True
        for key, row in new.items():
            if key not in self._rows:
                cells = self._cells(key, row)
                self._shown[key] = cells
                self.add_row(*self._visible_cells(cells), key=key)
                changed = reorder = True
                continue
            old = self._shown[key]
            cells = self._cells(key, row, old)
            moved: dict[str, Cell] = {}
            for i, (col, a, b) in enumerate(zip(self.column_keys, old, cells, strict=True)):
                if a is not b:
                    if col in self.shown_columns:
                        moved[col] = b
                    changed = True
                    # What the rows are sorted by: the column, then the first ones.
                    reorder = reorder or (a.raw != b.raw
                                          and (col == self.sort_column or i < TIE_BREAKERS))
            if moved:
                self.set_cells(key, moved)  # draws that row again, not the table
            self._shown[key] = cells
        self._rows = new
        absent = self._absent_columns()
        if absent != self._absent:
            self._absent = absent
            changed = reorder = True
        if changed:
            self._fit_columns()  # before anything is drawn: see the module docstring
        self._update_title()
        if reorder:
            # Sorting draws the whole table again; with the sorted values and the rows
            # as they were, the order is too (running times move at every reading).
            self._sort(selected)

    def _absent_columns(self) -> frozenset[str]:
        return frozenset(c.key for i, c in enumerate(self.table_columns) if c.only_when_known
                         and all(cells[i].raw is None for cells in self._shown.values()))

    def _update_title(self) -> None:
        title = f"Processes ({len(self.processes)})"
        if self.group_by is not None:
            title = f"Processes ({len(self.processes)}) by {self.group_by} ({len(self._rows)})"
        if self.sort_column not in self.shown_columns:  # sorted on a column dropped for room
            col = self._by_key[self.sort_column]
            title += f" · by {col.label}{'▼' if self.sort_reverse else '▲'}"
        if self.border_title != title:
            self.border_title = title

    def _sort(self, keep: str | None = None) -> None:
        reverse = self.sort_reverse
        idx = self.column_keys.index(self.sort_column)
        shown = self._shown

        def key(row: tuple[Cell, ...]) -> tuple[Any, ...]:
            # The sorted column may be hidden: the row's full cells are in `_shown`.
            name = row[0].row
            raw = shown[name][idx].raw
            missing = raw is None
            # Missing values go last whichever way the column is sorted; then the order
            # the rows are known by (GPU and PID for processes).
            return (not missing if reverse else missing, raw if not missing else 0,
                    *(c.raw for c in shown[name][:TIE_BREAKERS]))

        self.sort(key=key, reverse=reverse)
        if keep is not None:
            self.select_key(keep)

    def selected_key(self) -> str | None:
        if not self.row_count:
            return None
        try:
            return self.coordinate_to_cell_key(Coordinate(self.cursor_row, 0)).row_key.value
        except Exception:
            return None

    def select_key(self, key: str) -> None:
        try:
            self.move_cursor(row=self.get_row_index(RowKey(key)), animate=False)
        except RowDoesNotExist:
            pass

    def selected_process(self) -> GpuProcess | None:
        """The process on the cursor's row (None on a group's row)."""
        key = self.selected_key()
        return None if key is None else self.processes.get(key)

    def set_sort(self, column: str, reverse: bool | None = None) -> None:
        if column not in self._by_key:  # a process column asked for while grouped
            self.set_grouping(None)
        if reverse is None:
            # Numbers are most useful biggest first; text A→Z.
            reverse = column not in ("gpu", "pid", "user", "pod", "container", "command",
                                     "gpus", "group")
        self.sort_column, self.sort_reverse = column, reverse
        for key in self.shown_columns:
            self.columns[self.columns_key(key)].label = self._label(self._by_key[key])
        self._fit_columns()  # the sort mark moved to another column
        self._update_title()
        self._sort(self.selected_key())
        self.refresh()

    def set_grouping(self, by: str | None) -> None:
        """One row per process (None), or per user, container or pod with its totals."""
        if by == self.group_by:
            return
        if self.group_by is None:
            self._process_sort = (self.sort_column, self.sort_reverse)
        self.group_by = by
        self.table_columns = COLUMNS if by is None else group_columns(by)
        self._by_key = columns_by_key(self.table_columns)
        self.sort_column, self.sort_reverse = (self._process_sort if by is None
                                               else ("gpu_mem", True))
        self._rows = self._rows_of(tuple(self.processes.values()))
        self._shown = {key: self._cells(key, row) for key, row in self._rows.items()}
        self._absent = self._absent_columns()
        if self.columns or self.is_mounted:
            self._rebuild(*self._layout())
        self.move_cursor(row=0, animate=False)

    def action_cycle_group(self) -> None:
        """`g`: by user, by container, by pod, then one row per process again."""
        order: tuple[str | None, ...] = (None, *GROUP_BY)
        self.set_grouping(order[(order.index(self.group_by) + 1) % len(order)])

    def columns_key(self, key: str) -> Any:
        for k in self.columns:
            if k.value == key:
                return k
        raise KeyError(key)

    def cycle_sort(self) -> None:
        keys = self.column_keys
        i = keys.index(self.sort_column)
        self.set_sort(keys[(i + 1) % len(keys)])

    def reverse_sort(self) -> None:
        self.set_sort(self.sort_column, not self.sort_reverse)

    def on_data_table_header_selected(self, event: DataTable.HeaderSelected) -> None:
        event.stop()
        col = event.column_key.value or self.column_keys[0]
        if col == self.sort_column:
            self.reverse_sort()
        else:
            self.set_sort(col)
