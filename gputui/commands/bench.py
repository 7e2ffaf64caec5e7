"""`gputui bench`: run the built-in benchmarks headless, keep and compare their results.

Exit codes: 0 success; 1 the benchmark failed (crash, OOM, CUDA error, time limit) or a
result file is unreadable; 2 bad usage (unknown benchmark/model/result id, bad sizes,
fp16 on CPU, no CUDA for --device cuda); 130 cancelled with Ctrl-C (143/129 for
SIGTERM/SIGHUP), the partial result saved with status "cancelled".

torch is never imported here: the benchmark runs in a worker process (gputui.bench.runner).
"""

from __future__ import annotations

import argparse
import errno
import json
import signal
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gputui.commands import run_signals
from gputui.commands.argtypes import positive_float, positive_int
from gputui.errors import GputuiError, UsageError
from gputui.safe_text import no_markup, printable

if TYPE_CHECKING:
    from rich.console import Console

    from gputui.bench.request import RunRequest
    from gputui.bench.runner import BenchRun


def _results_command(name: str) -> Callable[[argparse.Namespace], int]:
    """`bench history/show/compare/export`: bench_results.<name>, imported when it runs
    (`gputui` builds every subcommand's parser; the monitor's start should not load the
    result modules)."""
    def run(args: argparse.Namespace) -> int:
        from gputui.commands import bench_results

        func: Callable[[argparse.Namespace], int] = getattr(bench_results, name)
        return func(args)
    return run


def add_parser(sub: argparse._SubParsersAction, summary: str) -> None:
    p = sub.add_parser(
        "bench",
        help=summary,
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
    rp.add_argument("--precision", default=None,
                    choices=("fp32", "tf32", "fp16", "bf16", "amp"),
                    help="amp = fp16 autocast with loss scaling (recorded as fp16); default "
                    "fp32 (lm-train, lm-infer, attention: bf16 on CUDA, fp32 on the CPU)")
    rp.add_argument("--data", choices=("device", "host"), default="device",
                    help="synthetic batches made on the device (default), or pinned host "
                    "buffers copied on a side stream overlapped with compute")
    bound = rp.add_mutually_exclusive_group()
    bound.add_argument("--steps", type=positive_int, metavar="N", help="timed steps")
    bound.add_argument("--duration", type=positive_float, metavar="S",
                       help="timed seconds (instead of --steps)")
    rp.add_argument("--warmup", type=_non_negative_int, metavar="N", help="untimed steps first")
    rp.add_argument("--repeat", type=positive_int, default=1, metavar="N",
                    help="run the timed phase N times after one warm-up; reports each "
                         "trial and their median, min and max")
    rp.add_argument("--image-size", type=positive_int, metavar="N")
    rp.add_argument("--seq-len", type=positive_int, metavar="N")
    rp.add_argument("--mode", choices=("latency", "throughput"),
                    help="inference: single-stream latency or offline throughput")
    rp.add_argument("--sweep", action="store_true",
                    help="throughput over a range of batches, doubling from 1 (matmul: of "
                    "standard shapes)")
    rp.add_argument("--batch-sizes", type=_batch_list, metavar="LIST",
                    help="sweep exactly these batch sizes, e.g. 1,4,16,64 (implies --sweep)")
    rp.add_argument("--size", type=positive_int, metavar="N", help="matmul: M=N=K=N")
    rp.add_argument("--shape", type=_mnk, action="append", metavar="MxNxK",
                    help="matmul: one product shape (repeatable)")
    rp.add_argument("--op", metavar="OP",
                    help="deepbench: gemm, conv, rnn, allreduce or all (default)")
    rp.add_argument("--set", dest="problem_set", metavar="SET",
                    help="deepbench: DeepBench's train (default) or infer problem list")
    rp.add_argument("--shapes", dest="shape_set", metavar="SHAPES",
                    help="deepbench: quick (a subset of each list, default) or full")
    rp.add_argument("--bytes", type=positive_int, metavar="N",
                    help="membw: bytes per array")
    rp.add_argument("--prompt-len", type=positive_int, metavar="N",
                    help="lm-infer: prompt tokens per sequence")
    rp.add_argument("--new-tokens", type=positive_int, metavar="N",
                    help="lm-infer: tokens generated per sequence")
    rp.add_argument("--channels-last", action="store_true", help="NHWC memory format (CNNs)")
    rp.add_argument("--compile", action="store_true", help="torch.compile the model first")
    rp.add_argument("--nproc", type=positive_int, default=1, metavar="N",
                    help="data-parallel processes (training)")
    rp.add_argument("--threads", type=positive_int, metavar="N", help="CPU threads for torch")
    rp.add_argument("--nnodes", type=positive_int, metavar="N",
                    help="training across N machines (run gputui once on each)")
    rp.add_argument("--node-rank", type=_non_negative_int, metavar="R",
                    help="this machine's number, 0..N-1 (node 0 hosts the rendezvous)")
    rp.add_argument("--rdzv-endpoint", metavar="HOST:PORT",
                    help="where node 0 listens and the others connect "
                         "(default 127.0.0.1:29500: loopback only)")
    rp.add_argument("--baseline", metavar="ID",
                    help="a saved one-process run of the same benchmark: report the "
                         "scaling efficiency against it")
    rp.add_argument("--profile", action="store_true",
                    help="a short extra pass under torch.profiler after the timed run: "
                    "prints the top ops and writes a Chrome trace next to the results")
    rp.add_argument("--nvtx", action="store_true",
                    help="mark the warm-up, the timed loop and each step with NVTX ranges "
                    "(CUDA), for `nsys profile gputui bench run ...`")
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
    hp.set_defaults(func=_results_command("run_history"))

    sp = bs.add_parser("show", help="one saved result")
    sp.add_argument("id", metavar="ID", help="result id (a unique prefix is enough)")
    sp.add_argument("--json", action="store_true", help="print the result document")
    sp.set_defaults(func=_results_command("run_show"))

    cp = bs.add_parser("compare", help="two results side by side, with ratios B/A")
    cp.add_argument("a", metavar="A", help="baseline result id")
    cp.add_argument("b", metavar="B", help="result id to compare with A")
    cp.add_argument("--json", action="store_true", help="print the comparison as JSON")
    cp.set_defaults(func=_results_command("run_compare"))

    ep = bs.add_parser("export", help="saved results as CSV or Markdown")
    ep.add_argument("ids", nargs="*", metavar="ID", help="only these results (default: all)")
    ep.add_argument("--format", choices=("csv", "markdown"), default="csv")
    ep.add_argument("--output", type=Path, metavar="FILE", help="write to FILE (atomically)")
    ep.set_defaults(func=_results_command("run_export"))

    from gputui.commands import bench_tables  # `bench peaks`, `bench references`

    bench_tables.add_parsers(bs)
    from gputui.commands import bench_suite  # `bench suite ...`

    bench_suite.add_parser(bs)


def _mnk(text: str) -> list[int]:
    parts = text.lower().replace("×", "x").split("x")
    try:
        dims = [int(p) for p in parts]
    except ValueError:
        dims = []
    if len(dims) != 3 or min(dims) <= 0:
        raise argparse.ArgumentTypeError(f"a shape is MxNxK, e.g. 8192x8192x8192: {text!r}")
    return dims


def _batch_list(text: str) -> list[int]:
    sizes = [positive_int(p.strip()) for p in text.split(",") if p.strip()]
    if not sizes:
        raise argparse.ArgumentTypeError(f"a comma-separated list of batch sizes, e.g. "
                                         f"1,8,32: {text!r}")
    return sizes


def _probe_params(args: argparse.Namespace) -> dict[str, int] | None:
    """--size and --bytes are the matmul/membw catalog parameters of those names."""
    params = {}
    if args.size is not None:
        params["size"] = args.size
    if args.bytes is not None:
        params["array_bytes"] = args.bytes
    if args.prompt_len is not None:
        params["prompt_len"] = args.prompt_len
    if args.new_tokens is not None:
        params["new_tokens"] = args.new_tokens
    return params or None


def _precision(args: argparse.Namespace) -> str | None:
    """--precision as the spec takes it; benchmarks with a per-device default precision
    get "auto" when none is given (the worker picks it once the device is known)."""
    from gputui.bench import catalog

    if args.precision is not None:
        return "fp16" if args.precision == "amp" else str(args.precision)
    bench = catalog.BENCHMARKS.get(args.name)
    return catalog.AUTO_PRECISION if bench is not None and "precision" in bench.cuda else None


def _baseline(args: argparse.Namespace) -> dict[str, Any]:
    """--baseline ID → the request's baseline_* settings (its headline and process count)."""
    if not args.baseline:
        return {}
    from gputui.bench import results_store

    base = results_store.load(args.baseline)
    if base.benchmark != args.name or base.headline is None or base.status != "ok":
        raise UsageError(f"baseline {printable(base.id)} is not a finished {args.name} run "
                         f"(it is {printable(base.benchmark)}, {printable(base.status)})")
    if args.model and base.model != args.model:
        raise UsageError(f"baseline {printable(base.id)} ran {printable(base.model)}, "
                         f"not {printable(args.model)}")
    world = base.settings.get("world_size")
    return {"baseline_id": base.id, "baseline_value": base.headline,
            "baseline_world": world if isinstance(world, int) and world > 0 else 1}


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
    raise UsageError("choose a bench command: list, run, history, show, compare, export, "
                     "peaks, references, suite")


def _console(stderr: bool = False) -> Console:
    from rich.console import Console

    return Console(stderr=stderr, highlight=False)


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

    from gputui.commands.table_fit import print_fitted

    # Names and models are typed by the user: never cut (one model a line, no wrap).
    longest = max((len(m) + 1 for b in BENCHMARKS.values() for m in b.models), default=1)
    table = Table(title="gputui benchmarks", show_lines=True)
    table.add_column("name", style="bold", no_wrap=True)
    table.add_column("what it measures")
    table.add_column("models", no_wrap=True, min_width=longest)
    table.add_column("CPU defaults")
    table.add_column("CUDA defaults")
    for b in BENCHMARKS.values():
        models = "\n".join(f"{m}*" if m == b.default_model else m for m in b.models) or "—"
        table.add_row(b.name, f"{b.description} [dim]({b.unit})[/]", models,
                      _defaults_text(b.cpu), _defaults_text(b.cuda))
    console = _console()
    print_fitted(console, table)
    console.print("* default model.  Device auto = first CUDA GPU, else CPU.  "
                  "Run one: gputui bench run NAME", soft_wrap=not console.is_terminal)
    return 0


def _defaults_text(defaults: Mapping[str, Any]) -> str:
    # The result and formatting modules are imported where they are used: `gputui`
    # builds every subcommand's parser, and the monitor's start should not load them.
    from gputui.bench.fmt import fmt_bytes

    short = {"batch_size": "batch", "image_size": "image", "duration_s": "duration",
             "seq_len": "seq", "array_bytes": "array", "host_bytes": "host"}
    parts = []
    for key, value in defaults.items():
        if key in ("array_bytes", "host_bytes"):
            value = fmt_bytes(value)
        elif key == "duration_s":
            value = f"{value:g} s"
        parts.append(f"{short.get(key, key)}={value}")
    return " ".join(parts)


# --------------------------------------------------------------------------- run


def run_bench(args: argparse.Namespace) -> int:
    from gputui.bench import results_store
    from gputui.bench.request import make_request
    from gputui.bench.run_queue import Planned, RunQueue
    from gputui.bench.runner import DEFAULT_TIMEOUT_S
    from gputui.commands.bench_view import failure_line, print_summary

    result_id = results_store.new_id()
    request = make_request(
        args.name,
        model=args.model,
        device=args.device,
        precision=_precision(args),
        data=args.data,
        shapes=args.shape,
        op=args.op,
        problem_set=args.problem_set,
        shape_set=args.shape_set,
        nvtx=args.nvtx,
        params=_probe_params(args),
        batch_size=args.batch_size,
        steps=args.steps,
        duration_s=args.duration,
        warmup=args.warmup,
        repeat=args.repeat,
        image_size=args.image_size,
        seq_len=args.seq_len,
        mode=args.mode,
        sweep=args.sweep,
        batch_sizes=args.batch_sizes,
        channels_last=args.channels_last,
        compile=args.compile,
        nproc=args.nproc,
        threads=args.threads,
        nnodes=args.nnodes,
        node_rank=args.node_rank,
        rdzv_endpoint=args.rdzv_endpoint,
        **_baseline(args),
        profile=args.profile,
        profile_dir=str(results_store.profiles_dir() / result_id) if args.profile else None,
    )
    planned = Planned(request, args.name, id=result_id,
                      timeout_s=args.timeout or DEFAULT_TIMEOUT_S, output=args.output)
    started: list[BenchRun] = []
    queue = RunQueue(on_started=lambda _p, run: started.append(run))
    # Known now: once the terminal has hung up, isatty() may no longer say so.
    terminal_fds = run_signals.terminal_fds()
    with run_signals.cancel_on_signals(queue, terminal_fds) as received:
        queue.submit(planned)
        if started:
            try:
                _show_progress(started[0], request)
            except OSError as exc:
                if exc.errno != errno.EIO:
                    raise
                # The terminal hung up before its SIGHUP reached us: keep supervising.
                run_signals.detach_from_terminal(terminal_fds)
        queue.wait()
    finished = queue.last
    assert finished is not None
    doc = finished.result
    if finished.invalid:
        # The worker found the spec impossible here (no CUDA, no bf16...): bad usage,
        # nothing ran, so nothing is kept.
        raise UsageError(printable((doc.error.message if doc.error else None)
                                   or "invalid benchmark settings"))
    if finished.save_error is not None:
        raise GputuiError(finished.save_error)
    if args.json:
        sys.stdout.write(results_store.dumps(doc))
        sys.stdout.flush()
    else:
        console = _console()
        print_summary(console, doc)
        console.print(f"[dim]saved {no_markup(finished.path)}[/]")

    if doc.status == "cancelled":
        print(f"gputui: cancelled; partial result saved as {doc.id}", file=sys.stderr)
        return 128 + (received[0] if received else signal.SIGINT)
    if doc.status == "failed":
        raise GputuiError(failure_line(doc, show_tail=True))
    return 0


def _show_progress(run: BenchRun, request: RunRequest) -> None:
    from rich.progress import (
        BarColumn,
        Progress,
        SpinnerColumn,
        TaskProgressColumn,
        TextColumn,
        TimeElapsedColumn,
    )

    from gputui.bench import events
    from gputui.bench.fmt import fmt_eta, fmt_num, remaining_s

    console = _console(stderr=True)
    if not console.is_terminal:
        # rich ends even a transient progress display with a newline when stderr is a
        # file or pipe: that blank line would precede a one-line error. Without a
        # terminal there is nothing to animate anyway: only the sweep/probe points.
        for event in run.events():
            if isinstance(event, events.Point):
                console.print(f"  {event.text}", soft_wrap=True, markup=False)
        return
    title = printable(" ".join(str(x) for x in (request.benchmark, request.model) if x))
    with Progress(
        SpinnerColumn(),
        TextColumn("{task.description}", markup=False),
        BarColumn(),
        TaskProgressColumn(),
        TextColumn("{task.fields[tp]}", style="bold cyan"),
        TimeElapsedColumn(),
        # Our own ETA (not rich's smoothed one): the number the TUI's run pane shows.
        TextColumn("{task.fields[eta]}", markup=False),
        console=console,
        transient=True,  # the summary (or the one-line error) replaces the bar
    ) as progress:
        task = progress.add_task(f"{title}: starting worker", total=None, tp="", eta="")
        for event in run.events():
            if isinstance(event, events.Started):
                where = event.env.get("device_name") or event.env.get("device") \
                    or request.device
                title = f"{title} on {printable(where)}"
                progress.update(task, description=f"{title}: loading")
            elif isinstance(event, events.Warmup):
                progress.update(task, description=f"{title}: warm-up",
                                total=event.of, completed=event.step)
            elif isinstance(event, events.Progress):
                if event.of:
                    total, done = float(event.of), float(event.step)
                elif event.duration_s:
                    total, done = float(event.duration_s), float(event.elapsed_s)
                else:
                    total, done = None, float(event.step)
                progress.update(task, description=title, total=total, completed=done,
                                tp=no_markup(f"{fmt_num(event.throughput)} {event.unit}"),
                                eta=fmt_eta(remaining_s(event.step, event.of, event.elapsed_s,
                                                        event.duration_s)))
            elif isinstance(event, events.Point):
                progress.console.print(f"  {event.text}", markup=False)
            elif isinstance(event, events.ResultReady):
                progress.update(task, description=f"{title}: done")
            if run.cancel_requested:
                progress.update(task, description=f"{title}: cancelling")
