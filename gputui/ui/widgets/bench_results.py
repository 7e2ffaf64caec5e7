"""The saved results (the `gputui bench history` store), newest first; space marks two
for comparing. A damaged result file is skipped and noted, never fatal: the table lists
the good ones and its title says how many files were skipped."""

from __future__ import annotations

import asyncio
from typing import ClassVar

from rich.cells import cell_len
from rich.text import Text
from textual.binding import Binding, BindingType
from textual.widgets import DataTable

from gputui.bench import results_store
from gputui.bench.fmt import when
from gputui.bench.result import Result
from gputui.bench.result_text import fmt_headline
from gputui.safe_text import printable

TITLE = "Results (space: mark two · c: compare)"
# The headline right after what ran, so an 80-column terminal keeps it in sight; the wide
# device name and the id come last.
COLUMNS = ("✓", "BENCHMARK", "MODEL", "THROUGHPUT", "MFU", "STATUS", "PREC", "BATCH",
           "STARTED", "DEVICE", "ID")


class ResultsTable(DataTable[str | Text]):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("space,m", "screen.mark", "Mark", show=True),
    ]

    def __init__(self, **kw: object) -> None:
        super().__init__(cursor_type="row", zebra_stripes=True, **kw)  # type: ignore[arg-type]
        self.history: dict[str, Result] = {}
        self.marked: list[str] = []  # result ids, in the order marked (A then B)
        self.skipped: list[str] = []  # one line per damaged file

    def on_mount(self) -> None:
        self.border_title = TITLE
        self._set_columns([[] for _ in COLUMNS])

    def _set_columns(self, cells: list[list[str | Text]]) -> None:
        """Columns as wide as their widest cell, set here rather than left to DataTable's
        auto width: that is applied only when the table next goes idle, and a table that
        was reloaded while the app stayed busy kept its header widths ("resne", "100.0
        imag"), hiding the very numbers it lists."""
        self.clear(columns=True)
        for label, column in zip(COLUMNS, cells, strict=True):
            width = max([cell_len(label), *(Text(c).cell_len if isinstance(c, str)
                                            else c.cell_len for c in column)])
            self.add_column(label, key=label, width=width)

    def reload(self) -> None:
        self.run_worker(self._load(), group="bench-results", exclusive=True)

    async def _load(self) -> None:
        # Reading every result file is disk I/O: off the event loop.
        hist = await asyncio.to_thread(results_store.history)
        self.show(hist.results, hist.warnings)

    def show(self, docs: list[Result], skipped: list[str]) -> None:
        styles = self.screen.get_component_rich_style
        self.history = {d.id: d for d in docs}
        self.marked = [m for m in self.marked if m in self.history]
        cursor = self.cursor_row
        rows: list[tuple[str, list[str | Text]]] = []
        for d in reversed(docs):  # newest first
            style = styles(f"status--{d.status}", partial=True)
            mfu = d.flops.mfu if d.flops is not None else None
            rows.append((d.id, [
                self._mark_cell(d.id), Text(printable(d.benchmark)),
                Text(printable(d.model or "—")), Text(fmt_headline(d)),
                "—" if mfu is None else f"{mfu * 100:.1f} %", Text(d.status, style=style),
                Text(printable(d.precision or "")), str(d.batch_size or "—"),
                when(d.started_at, short=True),
                Text(printable(d.device_name or d.device or "")), Text(printable(d.id))]))
        self._set_columns([[r[i] for _, r in rows] for i in range(len(COLUMNS))])
        for key, row in rows:
            self.add_row(*row, key=key)
        if self.row_count:
            self.move_cursor(row=min(cursor, self.row_count - 1), animate=False)
        new = [w for w in skipped if w not in self.skipped]
        self.skipped = list(skipped)
        self.border_title = TITLE + (f" · {len(skipped)} damaged file(s) skipped"
                                     if skipped else "")
        for warning in new[:3]:
            self.notify(printable(warning), severity="warning", timeout=6, markup=False)

    def toggle_mark(self) -> None:
        if self.row_count == 0:
            return
        rid = str(self.coordinate_to_cell_key(self.cursor_coordinate).row_key.value)
        if rid not in self.history:
            return
        if rid in self.marked:
            self.marked.remove(rid)
        else:
            self.marked.append(rid)
            if len(self.marked) > 2:
                self.marked.pop(0)  # keep the two most recently marked
        for key in self.history:
            try:
                self.update_cell(key, "✓", self._mark_cell(key))
            except Exception:  # a row not in the table (reloading)
                continue

    def _mark_cell(self, rid: str) -> str:
        if rid not in self.marked:
            return ""
        return "A" if self.marked.index(rid) == 0 else "B"
