"""`gputui bench history | show | compare | export`: saved results.

A damaged result file never stops these: `history`, `export` and a `show`/`compare` of other
results skip it with one warning line naming it; asking for the damaged one itself is a
one-line error (exit 1).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING

from gputui.bench.fmt import DASH, fmt_bytes, fmt_num, fmt_ratio, plain, when
from gputui.bench.result_text import fmt_headline, throttled_mark
from gputui.commands.bench_view import print_summary, status_markup
from gputui.commands.table_fit import print_fitted
from gputui.safe_text import no_markup, printable

if TYPE_CHECKING:
    from rich.console import Console
    from rich.table import Table

    from gputui.bench.compare import MetricRow
    from gputui.bench.result import Result


def _console() -> Console:
    from rich.console import Console

    return Console(highlight=False)


def warn(message: str) -> None:
    print(f"gputui: warning: {printable(message)}", file=sys.stderr)


def run_history(args: argparse.Namespace) -> int:
    from gputui.bench import results_store
    from gputui.bench.export import flat_row

    hist = results_store.history()
    for warning in hist.warnings:
        warn(warning)
    docs = hist.results[-args.limit:] if args.limit else hist.results
    if args.json:
        print(json.dumps([flat_row(d) for d in docs], indent=2, default=str))
        return 0
    console = _console()
    if not docs:
        console.print(f"no saved results in {no_markup(results_store.results_dir())}")
        return 0
    title = f"benchmark results ({no_markup(results_store.results_dir())})"
    layouts = _history_tables(title, docs, [d.id for d in hist.results])
    shown = print_fitted(console, layouts[0], narrow=layouts[1:])
    kept = {key.removeprefix("short_") for key, _ in _LAYOUTS[layouts.index(shown)]}
    hidden = [key for key, _ in _LAYOUTS[0] if key not in kept]
    if hidden:
        console.print(f"[dim]narrow terminal: {', '.join(hidden)} not shown "
                      "(a wider terminal, a pipe or --json shows every column)[/]")
    return 0


# History layouts, widest first: (column, header). The narrowest keeps what the issue
# calls the row's identity: benchmark, model, status and throughput.
_LAYOUTS: tuple[tuple[tuple[str, str], ...], ...] = (
    (("id", "id"), ("started", "started"), ("benchmark", "benchmark"), ("model", "model"),
     ("device", "device"), ("precision", "precision"), ("batch", "batch"),
     ("status", "status"), ("throughput", "throughput"), ("mfu", "MFU")),
    (("short_id", "id"), ("short_started", "started"), ("benchmark", "benchmark"),
     ("model", "model"), ("device", "device"), ("precision", "prec"), ("batch", "batch"),
     ("status", "status"), ("throughput", "throughput")),
    (("short_id", "id"), ("benchmark", "benchmark"), ("model", "model"),
     ("device", "device"), ("precision", "prec"), ("status", "status"),
     ("throughput", "throughput")),
    (("short_id", "id"), ("benchmark", "benchmark"), ("model", "model"),
     ("status", "status"), ("throughput", "throughput")),
    (("benchmark", "benchmark"), ("model", "model"), ("status", "status"),
     ("throughput", "throughput")),
)


def _history_tables(title: str, docs: list[Result], all_ids: list[str]) -> list[Table]:
    """Every layout of the history table. Only the device name wraps (at spaces); the
    other cells are never cut or folded, so a layout either fits whole or is skipped.
    The short id is the shortest unique prefix, which `bench show` accepts."""
    from rich import box
    from rich.table import Table

    def cell(d: Result, key: str) -> str:
        value = {
            "id": d.id, "short_id": short_id(d.id, all_ids), "started": when(d.started_at),
            "short_started": when(d.started_at, short=True), "benchmark": d.benchmark,
            "model": d.model, "device": d.device_name or d.device,
            "precision": d.precision, "batch": d.batch_size, "throughput": fmt_headline(d),
            "mfu": _mfu(d),
        }.get(key)
        if key == "status":
            return status_markup(d.status)
        return DASH if value is None or value == "" else no_markup(value)

    tables = []
    for i, layout in enumerate(_LAYOUTS):
        table = Table(title=title, box=box.HEAVY_HEAD if i < 3 else box.SIMPLE_HEAD)
        for key, header in layout:
            table.add_column(header, no_wrap=key != "device",
                             justify="right" if key in ("batch", "throughput", "mfu")
                             else "left")
        for d in docs:
            table.add_row(*(cell(d, key) for key, _ in layout))
        tables.append(table)
    return tables


def _mfu(d: Result) -> str:
    """MFU as a percentage; a dash where the run has no FLOPs or no known peak."""
    f = d.flops
    return f"{f.mfu * 100:.1f} %" if f is not None and f.mfu is not None else DASH


def short_id(rid: str, all_ids: list[str], minimum: int = 15) -> str:
    """The shortest prefix of `rid` (at least `minimum` characters: the date and time)
    that no other id starts with."""
    others = [o for o in all_ids if o != rid]
    for n in range(minimum, len(rid)):
        if not any(o.startswith(rid[:n]) for o in others):
            return rid[:n]
    return rid


def run_show(args: argparse.Namespace) -> int:
    from gputui.bench import results_store

    doc = results_store.load(args.id)
    if args.json:
        sys.stdout.write(results_store.dumps(doc))
        return 0
    print_summary(_console(), doc)
    return 0


def run_compare(args: argparse.Namespace) -> int:
    from rich.table import Table

    from gputui.bench import results_store
    from gputui.bench.compare import compare

    a, b = results_store.load(args.a), results_store.load(args.b)
    cmp = compare(a, b)
    if args.json:
        print(json.dumps(cmp.to_dict(), indent=2, default=str))
        return 0
    console = _console()
    metrics = Table(title=f"A = {no_markup(a.id)}   B = {no_markup(b.id)}")
    metrics.add_column("metric", style="bold")
    metrics.add_column("A", justify="right")
    metrics.add_column("B", justify="right")
    metrics.add_column("B/A", justify="right")
    for m in cmp.metrics:
        if m.a is None and m.b is None:
            continue

        def fmt(v: float | None, unit: str = m.unit) -> str:
            if unit == "bytes":
                return fmt_bytes(v)
            return f"{fmt_num(v)} {no_markup(unit)}" if v is not None else "N/A"

        ratio = fmt_ratio(m.ratio) + (" within noise" if m.within_noise else "")
        style = {"b": "green", "a": "red"}.get(m.better or "", "")
        metrics.add_row(m.name, fmt(m.a), fmt(m.b), f"[{style}]{ratio}[/]" if style else ratio)
    console.print(metrics)
    if cmp.shapes:
        console.print(_shapes_table(cmp.shapes))
    for name, r in (("A", a), ("B", b)):
        if throttled_mark(r):
            console.print(f"[red]{name} {no_markup(throttled_mark(r))} of its timed window: "
                          "its number says as much about cooling or the power cap[/]")
    for m in cmp.metrics:
        if m.noise is not None and m.a is not None and m.b is not None:
            word = ("within noise" if m.within_noise
                    else "beyond noise" + (f" ({m.verdict})" if m.verdict else ""))
            console.print(f"{m.name}: B − A = {fmt_num(m.b - m.a)} {no_markup(m.unit)}; "
                          f"the trials' combined spread is ±{fmt_num(m.noise)}: {word}")
    settings = Table(title="settings (differences highlighted)")
    settings.add_column("setting", style="bold")
    settings.add_column("A")
    settings.add_column("B")
    for s in cmp.settings:
        style = "bold yellow" if s.differs else "dim"
        settings.add_row(no_markup(s.name), no_markup(plain(s.a)), no_markup(plain(s.b)),
                         style=style)
    console.print(settings)
    differing = [no_markup(s.name) for s in cmp.settings if s.differs]
    if differing:
        console.print(f"[yellow]settings differ: {', '.join(differing)}[/]")
    return 0


def _shapes_table(rows: list[MetricRow]) -> Table:
    """Two deepbench results shape by shape: B/A of each shape's figure."""
    from rich.table import Table

    table = Table(title="DeepBench shapes (B/A > 1: B faster)")
    table.add_column("shape", style="bold")
    table.add_column("A", justify="right")
    table.add_column("B", justify="right")
    table.add_column("B/A", justify="right")
    for m in rows:
        style = {"b": "green", "a": "red"}.get(m.better or "", "")
        ratio = fmt_ratio(m.ratio)
        table.add_row(no_markup(m.name), *(f"{fmt_num(v)} {no_markup(m.unit)}"
                                           if v is not None else "N/A" for v in (m.a, m.b)),
                      f"[{style}]{ratio}[/]" if style else ratio)
    return table


def run_export(args: argparse.Namespace) -> int:
    from gputui.bench import results_store
    from gputui.bench.export import export_csv, export_markdown

    if args.ids:
        docs = [results_store.load(i) for i in args.ids]
    else:
        hist = results_store.history()
        for warning in hist.warnings:
            warn(warning)
        docs = hist.results
    text = export_csv(docs) if args.format == "csv" else export_markdown(docs)
    if args.output is not None:
        results_store.write_atomic(args.output, text)
    else:
        sys.stdout.write(text)
    return 0
