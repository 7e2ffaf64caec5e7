"""A deepbench result as one table per op: its title, columns and cells, and which rows are
the slowest against the peak — built here once for every view that shows them (`bench
run`/`show` in the terminal, the TUI's result view), which differ only in how they draw it.

Each shape as DeepBench writes it (and the smaller copy a CPU ran), its median call,
TFLOP/s and % of peak (all-reduce: bus bandwidth), a note where nothing was measured.
Cells are plain text with control characters escaped: never markup."""

from __future__ import annotations

from dataclasses import dataclass

from gputui.bench.deepbench.figures import by_op, slowest
from gputui.bench.fmt import NA, fmt_num
from gputui.bench.kind_extras import DeepbenchExtra, DeepbenchRow
from gputui.bench.result import Result
from gputui.safe_text import printable

TITLES = {"gemm": "GEMM (m,n,k,a_t,b_t)",
          "conv": "convolution (W,H,C,N,K,S,R,pad_w,pad_h,wstride,hstride)",
          "rnn": "RNN (type,hidden,batch,time steps)", "allreduce": "all-reduce (floats)"}


@dataclass(frozen=True)
class Column:
    header: str
    numeric: bool = False  # right-aligned
    shape: bool = False  # a shape: folded onto more lines when narrow, never cut short


@dataclass(frozen=True)
class OpTable:
    op: str
    title: str  # "DeepBench GEMM (m,n,k,a_t,b_t) — train set"
    columns: tuple[Column, ...]
    rows: tuple[tuple[str, ...], ...]  # one cell per column
    slowest: frozenset[int]  # indices into rows (figures.slowest); empty: none marked


def op_tables(r: Result) -> list[OpTable]:
    """One table per op of a deepbench result, in run order; [] for any other result."""
    ex = r.extra.of(DeepbenchExtra)
    if ex is None:
        return []
    pset = printable(r.settings.get("problem_set") or "")
    peak = ex.peak_tflops is not None
    out = []
    for op, rows in by_op(ex.rows).items():
        scaled = any(row.ran != row.shape for row in rows)
        notes = any(row.note for row in rows)
        columns = [Column("shape", shape=True)]
        if scaled:
            columns.append(Column("ran (scaled)", shape=True))
        columns.append(Column("median µs", numeric=True))
        if op == "allreduce":
            columns.append(Column("busbw GB/s", numeric=True))
        else:
            columns.append(Column("TFLOP/s", numeric=True))
            if peak:
                columns.append(Column("% of peak", numeric=True))
        if notes:
            columns.append(Column("note"))
        out.append(OpTable(
            op=op, title=f"DeepBench {TITLES.get(op, printable(op))} — {pset} set",
            columns=tuple(columns),
            rows=tuple(_cells(row, scaled, peak, notes) for row in rows),
            slowest=frozenset(slowest(rows))))
    return out


def _num(v: float | None) -> str:
    return NA if v is None else fmt_num(v)


def _cells(row: DeepbenchRow, scaled: bool, peak: bool, notes: bool) -> tuple[str, ...]:
    cells = [printable(row.shape)]
    if scaled:
        cells.append(printable(row.ran))
    cells.append(_num(row.median_us))
    if row.op == "allreduce":
        cells.append(_num(row.busbw_gbps))
    else:
        cells.append(_num(row.tflops))
        if peak:
            cells.append(_num(row.pct_of_peak))
    if notes:
        cells.append(printable(row.note or ""))
    return tuple(cells)
