"""`gputui bench`: run the built-in benchmarks headless, keep and compare their results.

Exit codes: 0 success; 1 the benchmark failed (crash, OOM, CUDA error, time limit) or a
result file is unreadable; 2 bad usage (unknown benchmark/model/result id, bad sizes,
fp16 on CPU, no CUDA for --device cuda); 130 cancelled with Ctrl-C (143/129 for
SIGTERM/SIGHUP), the partial result saved with status "cancelled".

torch is never imported here: the benchmark runs in a worker process (gputui.bench.runner).
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any

from gputui.cli import positive_float, positive_int
from gputui.errors import GputuiError, UsageError

if TYPE_CHECKING:
    from rich.console import Console
    from rich.table import Table

    from gputui.bench.runner import BenchRun


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "bench",
        help="run built-in benchmarks; list, compare and export results",
        description="Deep-learning benchmarks in a separate worker process. Results are "
        "saved under the user data dir ($GPUTUI_DATA_DIR overrides it).",
    )
    p.set_defaults(func=_no_action, bench_parser=p)
    bs = p.add_subparsers(title="bench commands", metavar="ACTION",
                          parser_class=type(p))

    lp = bs.add_parser("list", help="the benchmark catalog with defaults")
    lp.add_argument("--json", action="store_true", help="print the catalog as JSON")
    lp.set_defaults(func=run_list)

    rp = bs.add_parser("run", help="run one benchmark with a live progress bar")
    rp.add_argument("name", metavar="NAME", help="benchmark name (see 'gputui bench list')")
    rp.add_argument("--model", help="model for benchmarks that take one")
    rp.add_argument("--device", default="auto",
                    help="cuda, cuda:N, cpu, or auto (first CUDA GPU, else CPU; default)")
    rp.add_argument("--batch-size", type=positive_int, metavar="N")
    rp.add_argument("--precision", default="fp32", choices=("fp32", "tf32", "fp16", "bf16"))
    bound = rp.add_mutually_exclusive_group()
    bound.add_argument("--steps", type=positive_int, metavar="N", help="timed steps")
    bound.add_argument("--duration", type=positive_float, metavar="S",
                       help="timed seconds (instead of --steps)")
    rp.add_argument("--warmup", type=_non_negative_int, metavar="N", help="untimed steps first")
    rp.add_argument("--image-size", type=positive_int, metavar="N")
    rp.add_argument("--seq-len", type=positive_int, metavar="N")
    rp.add_argument("--mode", choices=("latency", "throughput"),
                    help="inference: single-stream latency or offline throughput")
    rp.add_argument("--sweep", action="store_true", help="throughput over a range of batches")
    rp.add_argument("--channels-last", action="store_true", help="NHWC memory format (CNNs)")
    rp.add_argument("--compile", action="store_true", help="torch.compile the model first")
    rp.add_argument("--nproc", type=positive_int, default=1, metavar="N",
                    help="data-parallel processes (training)")
    rp.add_argument("--threads", type=positive_int, metavar="N", help="CPU threads for torch")
    rp.add_argument("--profile", action="store_true",
                    help="a short extra pass under torch.profiler after the timed run: "
                    "prints the top ops and writes a Chrome trace next to the results")
    rp.add_argument("--timeout", type=positive_float, metavar="S",
                    help="stop the worker after S seconds (default 1800)")
    rp.add_argument("--json", action="store_true",
                    help="print the result document on stdout (progress goes to stderr)")
    rp.add_argument("--output", type=Path, metavar="FILE",
                    help="also write the result document to FILE")
    rp.set_defaults(func=run_bench)

    hp = bs.add_parser("history", help="saved results, oldest first")
    hp.add_argument("--json", action="store_true", help="one flat object per result")
    hp.add_argument("--limit", type=positive_int, metavar="N", help="only the newest N")
    hp.set_defaults(func=run_history)

    sp = bs.add_parser("show", help="one saved result")
    sp.add_argument("id", metavar="ID", help="result id (a unique prefix is enough)")
    sp.add_argument("--json", action="store_true", help="print the result document")
    sp.set_defaults(func=run_show)

    cp = bs.add_parser("compare", help="two results side by side, with ratios B/A")
    cp.add_argument("a", metavar="A", help="baseline result id")
    cp.add_argument("b", metavar="B", help="result id to compare with A")
    cp.add_argument("--json", action="store_true", help="print the comparison as JSON")
    cp.set_defaults(func=run_compare)

    ep = bs.add_parser("export", help="saved results as CSV or Markdown")
    ep.add_argument("ids", nargs="*", metavar="ID", help="only these results (default: all)")
    ep.add_argument("--format", choices=("csv", "markdown"), default="csv")
    ep.add_argument("--output", type=Path, metavar="FILE", help="write to FILE (atomically)")
    ep.set_defaults(func=run_export)


def _non_negative_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more: {text!r}")
    return value


def _no_action(args: argparse.Namespace) -> int:
    args.bench_parser.print_usage(sys.stderr)
    raise UsageError("choose a bench command: list, run, history, show, compare, export")


def _console(stderr: bool = False) -> Console:
    from rich.console import Console

    return Console(stderr=stderr, highlight=False)


def _warn(message: str) -> None:
    print(f"gputui: warning: {message}", file=sys.stderr)


# --------------------------------------------------------------------------- list


def run_list(args: argparse.Namespace) -> int:
    from gputui.bench.catalog import BENCHMARKS

    if args.json:
        out = [
            {
                "name": b.name, "kind": b.kind, "description": b.description, "unit": b.unit,
                "models": list(b.models), "default_model": b.default_model,
                "defaults": {"cpu": dict(b.cpu), "cuda": dict(b.cuda)},
                "supports": {"sweep": b.supports_sweep, "nproc": b.supports_nproc,
                             "profile": b.supports_profile,
                             "mode": b.kind == "infer"},
            }
            for b in BENCHMARKS.values()
        ]
        print(json.dumps(out, indent=2))
        return 0
    from rich.table import Table

    table = Table(title="gputui benchmarks", show_lines=True)
    table.add_column("name", style="bold", no_wrap=True)
    table.add_column("what it measures")
    table.add_column("models")
    table.add_column("CPU defaults")
    table.add_column("CUDA defaults")
    for b in BENCHMARKS.values():
        models = ", ".join(f"{m}*" if m == b.default_model else m for m in b.models) or "—"
        table.add_row(b.name, f"{b.description} [dim]({b.unit})[/]", models,
                      _defaults_text(b.cpu), _defaults_text(b.cuda))
    console = _console()
    console.print(table)
    console.print("* default model.  Device auto = first CUDA GPU, else CPU.  "
                  "Run one: gputui bench run NAME")
    return 0


def _defaults_text(defaults: Mapping[str, Any]) -> str:
    short = {"batch_size": "batch", "image_size": "image", "duration_s": "duration",
             "seq_len": "seq", "array_bytes": "array", "host_bytes": "host"}
    parts = []
    for key, value in defaults.items():
        if key in ("array_bytes", "host_bytes"):
            from gputui.bench.results import fmt_bytes

            value = fmt_bytes(value)
        elif key == "duration_s":
            value = f"{value:g} s"
        parts.append(f"{short.get(key, key)}={value}")
    return " ".join(parts)


# --------------------------------------------------------------------------- run


def run_bench(args: argparse.Namespace) -> int:
    from gputui.bench import results
    from gputui.bench.runner import DEFAULT_TIMEOUT_S, BenchRun, make_spec

    result_id = results.new_id()
    spec = make_spec(
        args.name,
        model=args.model,
        device=args.device,
        precision=args.precision,
        batch_size=args.batch_size,
        steps=args.steps,
        duration_s=args.duration,
        warmup=args.warmup,
        image_size=args.image_size,
        seq_len=args.seq_len,
        mode=args.mode,
        sweep=args.sweep,
        channels_last=args.channels_last,
        compile=args.compile,
        nproc=args.nproc,
        threads=args.threads,
        profile=args.profile,
        profile_dir=str(results.profiles_dir() / result_id) if args.profile else None,
    )
    run = BenchRun(spec, timeout_s=args.timeout or DEFAULT_TIMEOUT_S, result_id=result_id)
    with _cancel_on_signals(run) as received:
        run.start()
        _show_progress(run, spec)
        run.wait()
    doc = run.result
    assert doc is not None

    error = doc.get("error") if isinstance(doc.get("error"), dict) else None
    if doc["status"] == "failed" and error and error.get("kind") == "invalid":
        # The worker found the spec impossible here (no CUDA, no bf16...): bad usage,
        # nothing ran, so nothing is kept.
        raise UsageError(str(error.get("message") or "invalid benchmark settings"))

    path = results.save(doc)
    if args.output is not None:
        results.write_atomic(args.output, results.dumps(doc))
    if args.json:
        sys.stdout.write(results.dumps(doc))
        sys.stdout.flush()
    else:
        console = _console()
        print_summary(console, doc)
        console.print(f"[dim]saved {path}[/]")

    if doc["status"] == "cancelled":
        print(f"gputui: cancelled; partial result saved as {doc['id']}", file=sys.stderr)
        return 128 + (received[0] if received else signal.SIGINT)
    if doc["status"] == "failed":
        raise GputuiError(_failure_line(doc, show_tail=True))
    return 0


@contextmanager
def _cancel_on_signals(run: BenchRun) -> Iterator[list[int]]:
    """Ctrl-C (and SIGTERM/SIGHUP) cancel the worker instead of killing us mid-write.

    The first signal asks the worker to stop and report partial numbers; a second
    SIGINT kills it at once. The worker is in its own session, so the terminal's
    Ctrl-C reaches only this process.
    """
    received: list[int] = []

    def handler(signum: int, frame: FrameType | None) -> None:
        if received and signum == signal.SIGINT:
            run.kill()
            return
        received.append(signum)
        # On a terminal the progress bar owns the current line; elsewhere no blank line.
        lead = "\n" if sys.stderr.isatty() else ""
        print(f"{lead}gputui: cancelling… (Ctrl-C again to stop at once)", file=sys.stderr)
        run.cancel()

    previous = {}
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        try:
            previous[sig] = signal.signal(sig, handler)
        except (ValueError, OSError):  # not the main thread, or no such signal here
            pass
    try:
        yield received
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


def _show_progress(run: BenchRun, spec: Mapping[str, Any]) -> None:
    from rich.progress import (
        BarColumn,
        Progress,
        SpinnerColumn,
        TaskProgressColumn,
        TextColumn,
        TimeElapsedColumn,
    )

    console = _console(stderr=True)
    if not console.is_terminal:
        # rich ends even a transient progress display with a newline when stderr is a
        # file or pipe: that blank line would precede a one-line error. Without a
        # terminal there is nothing to animate anyway: only the sweep/probe points.
        for event in run.events():
            if event["event"] == "point":
                console.print(f"  {_point_text(event)}", soft_wrap=True, markup=False)
        return
    title = " ".join(str(x) for x in (spec["benchmark"], spec.get("model")) if x)
    with Progress(
        SpinnerColumn(),
        TextColumn("{task.description}"),
        BarColumn(),
        TaskProgressColumn(),
        TextColumn("{task.fields[tp]}", style="bold cyan"),
        TimeElapsedColumn(),
        console=console,
        transient=True,  # the summary (or the one-line error) replaces the bar
    ) as progress:
        task = progress.add_task(f"{title}: starting worker", total=None, tp="")
        for event in run.events():
            kind = event["event"]
            if kind == "started":
                env = event.get("env") or {}
                where = env.get("device_name") or env.get("device") or spec.get("device")
                title = f"{title} on {where}"
                progress.update(task, description=f"{title}: loading")
            elif kind == "warmup":
                progress.update(task, description=f"{title}: warm-up",
                                total=event["of"], completed=event["step"])
            elif kind == "progress":
                if event.get("of"):
                    total, done = float(event["of"]), float(event["step"])
                elif event.get("duration_s"):
                    total, done = float(event["duration_s"]), float(event["elapsed_s"])
                else:
                    total, done = None, float(event["step"])
                progress.update(task, description=title, total=total, completed=done,
                                tp=f"{_num(event['throughput'])} {event['unit']}")
            elif kind == "point":
                progress.console.print(f"  {_point_text(event)}", markup=False)
            elif kind == "result":
                progress.update(task, description=f"{title}: done")
            if run.cancel_requested:
                progress.update(task, description=f"{title}: cancelling")


def _point_label(point: Mapping[str, Any]) -> str:
    """"batch 8" once, even though sweep labels already say "batch 8"."""
    label = str(point.get("label") or "")
    batch = point.get("batch_size")
    if batch and f"batch {batch}" not in label:
        label = f"{label} batch {batch}".strip()
    return label


def _point_text(point: Mapping[str, Any]) -> str:
    if point.get("ok", True):
        value = f"{_num(point.get('throughput'))} {point.get('unit') or ''}".rstrip()
    else:
        value = str(point.get("error") or "failed")
    return f"{_point_label(point)}: {value}"


def _failure_line(doc: Mapping[str, Any], show_tail: bool = False) -> str:
    error = doc.get("error") if isinstance(doc.get("error"), dict) else {}
    kind = error.get("kind") or "error"
    message = " ".join(str(error.get("message") or "benchmark failed").split())
    if show_tail and kind == "crash" and error.get("stderr_tail"):
        for line in error["stderr_tail"][-20:]:
            print(f"  | {line}", file=sys.stderr)
    if kind == "oom":
        batch = error.get("batch_size") or doc.get("batch_size")
        if "out of memory" in message.lower():
            text = message
        else:
            text = f"out of memory at batch size {batch}: {message}" if batch else \
                f"out of memory: {message}"
        suggestion = error.get("suggestion") or (
            f"try --batch-size {max(1, int(batch) // 2)}" if batch else None)
        return f"{text}; {suggestion}" if suggestion else text
    suffix = f" (result {doc.get('id')})" if doc.get("id") else ""
    return f"{kind}: {message}{suffix}"


# --------------------------------------------------------------------------- tables


def _num(value: Any) -> str:
    from gputui.bench.results import fmt_num

    return fmt_num(value)


def _when(iso: Any) -> str:
    if not isinstance(iso, str) or not iso:
        return "N/A"
    try:
        t = datetime.fromisoformat(iso.replace("Z", "+00:00"))
    except ValueError:
        return iso
    return f"{t.astimezone():%Y-%m-%d %H:%M:%S}"


_STATUS_STYLE = {"ok": "green", "cancelled": "yellow", "failed": "red"}


def _profile_of(doc: Mapping[str, Any]) -> dict[str, Any]:
    extra = doc.get("extra") if isinstance(doc.get("extra"), dict) else {}
    prof = extra.get("profile")
    return prof if isinstance(prof, dict) else {}


def print_summary(console: Console, doc: Mapping[str, Any]) -> None:
    """The summary table, then (after --profile) the top ops and the trace's path."""
    from rich.markup import escape

    console.print(summary_table(doc))
    profile = profile_table(doc)
    if profile is not None:
        console.print(profile)
    trace = _profile_of(doc).get("trace_path")
    if trace:
        console.print(f"Chrome trace: {escape(str(trace))}", soft_wrap=True)
        console.print("[dim]  (open it in https://ui.perfetto.dev or chrome://tracing)[/]")


def profile_table(doc: Mapping[str, Any], top: int = 10) -> Table | None:
    """The `--profile` pass's top ops (by self time), or None when there was none."""
    from rich.markup import escape
    from rich.table import Table

    prof = _profile_of(doc)
    ops = [op for op in prof.get("top_ops") or [] if isinstance(op, dict)]
    if not ops:
        return None
    device = any(op.get("self_device_ms") is not None for op in ops)
    table = Table(title=f"top ops by self {'device' if device else 'CPU'} time "
                  f"(profiler pass of {prof.get('steps')} steps, after the timed run)")
    table.add_column("op")
    table.add_column("calls", justify="right")
    table.add_column("self CPU ms", justify="right")
    table.add_column("total CPU ms", justify="right")
    if device:
        table.add_column("self device ms", justify="right")
    for op in ops[:top]:
        cells = [escape(str(op.get("name"))), str(op.get("count")), _num(op.get("self_cpu_ms")),
                 _num(op.get("cpu_total_ms"))]
        if device:
            cells.append(_num(op.get("self_device_ms")))
        table.add_row(*cells)
    return table


def summary_table(doc: Mapping[str, Any]) -> Table:
    from rich.markup import escape
    from rich.table import Table

    from gputui.bench import results

    doc = results.normalise(doc)
    status = str(doc.get("status"))
    table = Table(title=f"{doc.get('benchmark')} — {doc.get('id')}", show_header=False)
    table.add_column("field", style="bold")
    table.add_column("value")

    def row(name: str, value: Any) -> None:
        table.add_row(name, value if isinstance(value, str) else str(value))

    row("status", f"[{_STATUS_STYLE.get(status, 'white')}]{status}[/]")
    error = doc.get("error")
    if isinstance(error, dict) and error.get("message"):
        row("error", f"{error.get('kind')}: {error.get('message')}")
    row("benchmark", " ".join(str(x) for x in (doc.get("benchmark"), doc.get("model")) if x))
    row("device", f"{doc.get('device_name') or 'N/A'} ({doc.get('device')})")
    row("precision / batch", f"{doc.get('precision')} / {doc.get('batch_size')}")
    tp = doc.get("throughput")
    if isinstance(tp, dict):
        row("throughput (median)", f"[bold]{results.fmt_throughput(doc)}[/]  "
            f"p10 {_num(tp.get('p10'))}  p90 {_num(tp.get('p90'))}")
    else:
        row("throughput", "N/A")
    lat = doc.get("latency_ms")
    if isinstance(lat, dict):
        row("latency (ms)", "  ".join(f"{k} {_num(lat.get(k))}" for k in
                                      ("p50", "p90", "p99", "mean")))
    st = doc.get("step_time_ms")
    if isinstance(st, dict):
        row("step time (ms)", "  ".join(f"{k} {_num(st.get(k))}" for k in ("p50", "p90", "p99")))
    phases = doc.get("phases_ms")
    if isinstance(phases, dict) and phases:
        row("phases (ms/step)", "  ".join(f"{k} {_num(v)}" for k, v in phases.items()))
    row("peak memory", results.fmt_bytes(doc.get("peak_memory_bytes")))
    energy = doc.get("energy_j_per_sample")
    row("energy / sample", "N/A" if energy is None else f"{_num(energy)} J")
    power = doc.get("avg_power_w")
    row("average power", "N/A" if power is None else f"{_num(power)} W")
    episodes = doc.get("throttle_episodes") or []
    if episodes:
        words = "; ".join(
            f"{e.get('reasons_text') or ','.join(e.get('reasons') or [])} "
            f"({_num(e.get('duration_s'))} s)" for e in episodes if isinstance(e, dict))
        row("throttling", f"[red]{len(episodes)} episode(s): {words}[/]")
    else:
        row("throttling", "none seen" if str(doc.get("device", "")).startswith("cuda")
            else "N/A")
    points = doc.get("points") or []
    for p in points:
        if isinstance(p, dict):
            value = escape(f"{_num(p.get('throughput'))} {p.get('unit') or ''}") \
                if p.get("ok", True) else f"[red]{escape(str(p.get('error') or 'failed'))}[/]"
            row(f"  {escape(_point_label(p))}", value)
    extra = doc.get("extra") if isinstance(doc.get("extra"), dict) else {}
    if doc.get("benchmark") == "batch-finder":
        fits = extra.get("probes_fit")
        probes = extra.get("probes", len(points))
        row("largest batch that fits", str(extra.get("max_batch_fit") or "none")
            + f"  (limit: {extra.get('limit') or 'N/A'})")
        row("probes", f"{probes}" + (f" ({fits} fit, {extra.get('probes_failed')} failed)"
                                     if fits is not None else ""))
        row("timed steps / samples (all probes)", f"{doc.get('steps')} / {doc.get('samples')}")
    elif doc.get("samples"):
        row("timed steps / samples", f"{doc.get('steps')} / {doc.get('samples')}")
    else:
        row("timed steps", str(doc.get("steps")))
    energy_extra = extra.get("energy") if isinstance(extra.get("energy"), dict) else {}
    if energy_extra.get("note"):
        row("energy note", escape(str(energy_extra["note"])))
    dur = doc.get("duration_s")
    row("started", f"{_when(doc.get('started_at'))}"
        + (f"  ({_num(dur)} s)" if dur is not None else ""))
    env = doc.get("env") or {}
    if isinstance(env, dict) and env:
        row("software", "  ".join(f"{k} {env[k]}" for k in ("torch", "cuda", "driver")
                                  if env.get(k)))
    return table


# --------------------------------------------------------------------------- history/show


def run_history(args: argparse.Namespace) -> int:
    from gputui.bench import results

    hist = results.history()
    for warning in hist.warnings:
        _warn(warning)
    docs = hist.results[-args.limit:] if args.limit else hist.results
    if args.json:
        print(json.dumps([results.flat_row(d) for d in docs], indent=2, default=str))
        return 0
    console = _console()
    if not docs:
        console.print(f"no saved results in {results.results_dir()}")
        return 0
    from rich.table import Table

    table = Table(title=f"benchmark results ({results.results_dir()})")
    for col in ("id", "started", "benchmark", "model", "device", "precision", "batch",
                "status", "throughput"):
        table.add_column(col, no_wrap=col in ("id", "started"),
                         justify="right" if col in ("batch", "throughput") else "left")
    for d in docs:
        status = str(d.get("status"))
        table.add_row(
            str(d.get("id")), _when(d.get("started_at")), str(d.get("benchmark")),
            str(d.get("model") or "—"), str(d.get("device_name") or d.get("device")),
            str(d.get("precision")), str(d.get("batch_size")),
            f"[{_STATUS_STYLE.get(status, 'white')}]{status}[/]", results.fmt_throughput(d),
        )
    console.print(table)
    return 0


def run_show(args: argparse.Namespace) -> int:
    from gputui.bench import results

    doc = results.load(args.id)
    if args.json:
        sys.stdout.write(results.dumps(doc))
        return 0
    print_summary(_console(), doc)
    return 0


# --------------------------------------------------------------------------- compare


def run_compare(args: argparse.Namespace) -> int:
    from rich.table import Table

    from gputui.bench import results

    a, b = results.load(args.a), results.load(args.b)
    cmp = results.compare(a, b)
    if args.json:
        print(json.dumps(cmp.to_dict(), indent=2, default=str))
        return 0
    console = _console()
    metrics = Table(title=f"A = {a['id']}   B = {b['id']}")
    metrics.add_column("metric", style="bold")
    metrics.add_column("A", justify="right")
    metrics.add_column("B", justify="right")
    metrics.add_column("B/A", justify="right")
    for m in cmp.metrics:
        if m.a is None and m.b is None:
            continue
        fmt = results.fmt_bytes if m.unit == "bytes" else (lambda v, u=m.unit: f"{_num(v)} {u}"
                                                          if v is not None else "N/A")
        ratio = results.fmt_ratio(m.ratio)
        style = {"b": "green", "a": "red"}.get(m.better or "", "")
        metrics.add_row(m.name, fmt(m.a), fmt(m.b), f"[{style}]{ratio}[/]" if style else ratio)
    console.print(metrics)
    settings = Table(title="settings (differences highlighted)")
    settings.add_column("setting", style="bold")
    settings.add_column("A")
    settings.add_column("B")
    for s in cmp.settings:
        style = "bold yellow" if s.differs else "dim"
        settings.add_row(s.name, _plain(s.a), _plain(s.b), style=style)
    console.print(settings)
    differing = [s.name for s in cmp.settings if s.differs]
    if differing:
        console.print(f"[yellow]settings differ: {', '.join(differing)}[/]")
    return 0


def _plain(value: Any) -> str:
    from rich.markup import escape

    if value is None:
        return "—"
    if isinstance(value, dict | list):
        return escape(json.dumps(value, default=str))
    return escape(str(value))


# --------------------------------------------------------------------------- export


def run_export(args: argparse.Namespace) -> int:
    from gputui.bench import results

    if args.ids:
        docs = [results.load(i) for i in args.ids]
    else:
        hist = results.history()
        for warning in hist.warnings:
            _warn(warning)
        docs = hist.results
    text = results.export_csv(docs) if args.format == "csv" else results.export_markdown(docs)
    if args.output is not None:
        results.write_atomic(args.output, text)
    else:
        sys.stdout.write(text)
    return 0
