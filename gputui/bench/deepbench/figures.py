"""What the views say about a deepbench result's rows: each row's one figure, which rows are
the slowest relative to the peak, and rows matched across two results — computed here
once, so `bench run`/`show`, `compare` and `export` agree."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from gputui.bench.kind_extras import DeepbenchRow

SLOWEST = 3  # rows highlighted per op


def figure(row: DeepbenchRow) -> tuple[float | None, str]:
    """The row's figure and its unit: bus bandwidth for an all-reduce, TFLOP/s else."""
    if row.op == "allreduce":
        return row.busbw_gbps, "GB/s"
    return row.tflops, "TFLOP/s"


def by_op(rows: Iterable[DeepbenchRow]) -> dict[str, list[DeepbenchRow]]:
    out: dict[str, list[DeepbenchRow]] = {}
    for r in rows:
        out.setdefault(r.op, []).append(r)
    return out


def slowest(rows: Sequence[DeepbenchRow], n: int = SLOWEST) -> set[int]:
    """Indices (into `rows`, one op's) of the `n` lowest shapes relative to the peak: by %
    of peak where the peak is known, else by TFLOP/s (GB/s for all-reduce). Only when more
    than `n` rows were measured: with fewer, "slowest" says nothing."""
    def key(i: int) -> float | None:
        r = rows[i]
        return r.pct_of_peak if r.pct_of_peak is not None else figure(r)[0]

    measured = [i for i in range(len(rows)) if key(i) is not None]
    if len(measured) <= n:
        return set()
    return set(sorted(measured, key=lambda i: key(i) or 0.0)[:n])


def keyed(rows: Iterable[DeepbenchRow]) -> dict[tuple[str, str, int], DeepbenchRow]:
    """Rows by (op, DeepBench's shape, occurrence): a list may hold a row twice."""
    out: dict[tuple[str, str, int], DeepbenchRow] = {}
    seen: dict[tuple[str, str], int] = {}
    for r in rows:
        nth = seen.get((r.op, r.shape), 0)
        seen[(r.op, r.shape)] = nth + 1
        out[(r.op, r.shape, nth)] = r
    return out
