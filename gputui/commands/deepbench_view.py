"""A deepbench result in the terminal: one table per op, each shape as DeepBench writes it,
its median call, TFLOP/s and % of peak (all-reduce: bus bandwidth), the slowest shapes
relative to the peak in red (`bench.deepbench.figures.slowest`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from gputui.bench.deepbench.figures import by_op, slowest
from gputui.bench.fmt import NA, fmt_num
from gputui.bench.kind_extras import DeepbenchExtra, DeepbenchRow
from gputui.bench.result import Result
from gputui.safe_text import no_markup

if TYPE_CHECKING:
    from rich.table import Table

TITLES = {"gemm": "GEMM (m,n,k,a_t,b_t)",
          "conv": "convolution (W,H,C,N,K,S,R,pad_w,pad_h,wstride,hstride)",
          "rnn": "RNN (type,hidden,batch,time steps)", "allreduce": "all-reduce (floats)"}


def _num(v: float | None) -> str:
    return NA if v is None else fmt_num(v)


def deepbench_tables(r: Result) -> list[Table]:
    """One table per op of a deepbench result; [] for any other result."""
    from rich.table import Table

    ex = r.extra.of(DeepbenchExtra)
    if ex is None:
        return []
    pset = no_markup(r.settings.get("problem_set") or "")
    out = []
    for op, rows in by_op(ex.rows).items():
        scaled = any(row.ran != row.shape for row in rows)
        notes = any(row.note for row in rows)
        peak = ex.peak_tflops is not None
        low = slowest(rows)
        table = Table(title=f"DeepBench {TITLES.get(op, no_markup(op))} — {pset} set"
                      + (", slowest vs peak in red" if low else ""))
        table.add_column("shape", overflow="fold")  # a shape is never cut short
        if scaled:
            table.add_column("ran (scaled)", overflow="fold")
        table.add_column("median µs", justify="right")
        if op == "allreduce":
            table.add_column("busbw GB/s", justify="right")
        else:
            table.add_column("TFLOP/s", justify="right")
            if peak:
                table.add_column("% of peak", justify="right")
        if notes:
            table.add_column("note")
        for i, row in enumerate(rows):
            table.add_row(*_cells(row, scaled, peak, notes), style="red" if i in low else "")
        out.append(table)
    return out


def _cells(row: DeepbenchRow, scaled: bool, peak: bool, notes: bool) -> list[str]:
    cells = [no_markup(row.shape)]
    if scaled:
        cells.append(no_markup(row.ran))
    cells.append(_num(row.median_us))
    if row.op == "allreduce":
        cells.append(_num(row.busbw_gbps))
    else:
        cells.append(_num(row.tflops))
        if peak:
            cells.append(_num(row.pct_of_peak))
    if notes:
        cells.append(no_markup(row.note or ""))
    return cells
