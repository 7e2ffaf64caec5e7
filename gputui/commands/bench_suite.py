"""`gputui bench suite run | show | compare | list | export | import`: the fixed, versioned
benchmark suite (bench.suite), its scores and a ranking of devices.

Exit codes as `bench`: 0 success; 1 a test of the run failed (its record is saved,
"incomplete"); 2 bad usage (unknown suite id, a file that is not a suite, runs of different
suite versions or classes); 128+signal cancelled.
"""

from __future__ import annotations

import argparse
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from gputui.commands import run_signals
from gputui.commands.argtypes import positive_float
from gputui.errors import GputuiError, UsageError
from gputui.safe_text import no_markup

if TYPE_CHECKING:
    from rich.console import Console

    from gputui.bench.suite import SuiteRun
    from gputui.bench.suite_record import TestOutcome


def _lazy(module: str, name: str) -> Callable[[argparse.Namespace], int]:
    """A command of bench_suite_view / bench_suite_io, imported when it runs."""
    def run(args: argparse.Namespace) -> int:
        import importlib

        func: Callable[[argparse.Namespace], int] = getattr(
            importlib.import_module(f"gputui.commands.{module}"), name)
        return func(args)
    return run


def add_parser(bs: argparse._SubParsersAction) -> None:
    p = bs.add_parser(
        "suite", help="the fixed benchmark suite: scores per test, inference, training and "
        "the device, with a ranking",
        description="A fixed, versioned set of tests (image classification with a CNN and a "
        "ViT, segmentation, an RNN, GPT training, LLM prefill and decode, attention, "
        "matmul, memory bandwidth), inference and training, at fixed settings per device "
        "class (cpu-quick, cpu, cuda). Each test scores its throughput ÷ the reference's "
        "× 1000; the inference, training and device scores are geometric means.")
    p.set_defaults(func=_no_action, suite_parser=p)
    ss = p.add_subparsers(title="suite commands", metavar="ACTION", parser_class=type(p))

    baseline_help = ("score against this saved suite run (an id, a prefix of one, or a "
                     "suite file) instead of the class's shipped reference")
    rp = ss.add_parser("run", help="run every test of the suite")
    rp.add_argument("--quick", action="store_true",
                    help="the short CPU class (a few minutes on 2 cores; runs on the CPU)")
    rp.add_argument("--device", default="auto",
                    help="cpu, cuda, cuda:N, or auto (first CUDA GPU, else CPU; default)")
    rp.add_argument("--baseline", metavar="ID|FILE", help=baseline_help)
    rp.add_argument("--timeout", type=positive_float, metavar="S",
                    help="stop a test's worker after S seconds (default 1800)")
    rp.add_argument("--json", action="store_true", help="print the suite record")
    rp.set_defaults(func=run_suite)

    sp = ss.add_parser("show", help="a saved suite run: per-test table, scores, ranking")
    sp.add_argument("id", nargs="?", metavar="ID",
                    help="suite id, a prefix of one, or a suite file (default: the newest)")
    sp.add_argument("--baseline", metavar="ID|FILE", help=baseline_help)
    sp.add_argument("--json", action="store_true", help="print the record with its ranking")
    sp.set_defaults(func=_lazy("bench_suite_view", "run_show"))

    cp = ss.add_parser("compare", help="two suite runs side by side (B/A per test)")
    cp.add_argument("a", metavar="A", help="suite id or file")
    cp.add_argument("b", metavar="B", help="suite id or file")
    cp.add_argument("--baseline", metavar="ID|FILE", help=baseline_help)
    cp.add_argument("--json", action="store_true", help="print the comparison as JSON")
    cp.set_defaults(func=_lazy("bench_suite_view", "run_compare"))

    lp = ss.add_parser("list", help="saved suite runs, oldest first")
    lp.add_argument("--json", action="store_true", help="one object per suite run")
    lp.set_defaults(func=_lazy("bench_suite_view", "run_list"))

    ep = ss.add_parser("export", help="a suite run and its results as one file, for "
                       "another machine")
    ep.add_argument("id", metavar="ID", help="suite id or a prefix of one")
    ep.add_argument("--output", type=Path, metavar="FILE",
                    help="write to FILE (atomically; default: stdout)")
    ep.set_defaults(func=_lazy("bench_suite_io", "run_export"))

    ip = ss.add_parser("import", help="a file from 'bench suite export' into this data dir")
    ip.add_argument("file", type=Path, metavar="FILE")
    ip.set_defaults(func=_lazy("bench_suite_io", "run_import"))


def _no_action(args: argparse.Namespace) -> int:
    args.suite_parser.print_usage(sys.stderr)
    raise UsageError("choose a suite command: run, show, compare, list, export, import")


def _console(stderr: bool = False) -> Console:
    from rich.console import Console

    return Console(stderr=stderr, highlight=False)


# --------------------------------------------------------------------------- run


def _cuda_present() -> bool:
    """Whether torch sees a CUDA GPU, asked in a child (this process never imports torch)."""
    code = "import sys, torch; sys.exit(0 if torch.cuda.is_available() else 3)"
    try:
        proc = subprocess.run([sys.executable, "-c", code], capture_output=True,
                              timeout=120)
    except (OSError, subprocess.SubprocessError):
        return False
    return proc.returncode == 0


def run_suite(args: argparse.Namespace) -> int:
    from gputui.bench import suite, suite_record
    from gputui.bench.run_queue import RunQueue
    from gputui.bench.runner import DEFAULT_TIMEOUT_S
    from gputui.bench.suite_run import SuitePlan
    from gputui.bench.suite_run import run_suite as run_all
    from gputui.commands.bench_suite_view import (
        print_record,
        ranking_rows,
        reference_for,
        title,
        value_text,
    )

    device = str(args.device)
    if device == "auto":
        device = "cpu" if args.quick or not _cuda_present() else "cuda"
    cls = suite.device_class(device, args.quick)
    reference = reference_for(cls, suite.SUITE_VERSION, args.baseline)
    if reference is not None:
        from gputui.bench.suite_score import check_same_suite

        check_same_suite("this run", suite.SUITE_VERSION, cls, "the baseline",
                         reference.suite_version, reference.device_class)
    plan = SuitePlan(cls, device, reference, timeout_s=args.timeout or DEFAULT_TIMEOUT_S)
    err = _console(stderr=True)
    err.print(f"suite v{suite.SUITE_VERSION}, {cls} class on {no_markup(device)}: "
              f"{len(suite.RUNS)} benchmark runs, {len(suite.TESTS)} tests", soft_wrap=True)

    def progress(done: int, total: int, run: SuiteRun, got: list[TestOutcome]) -> None:
        for o in got:
            err.print(f"  [{done}/{total}] {no_markup(title(o.test))}: "
                      f"{no_markup(value_text(o))}", soft_wrap=True)

    queue = RunQueue()
    with run_signals.cancel_on_signals(queue, run_signals.terminal_fds()) as received:
        record = run_all(plan, queue, on_run=progress, stop=lambda: bool(received))
    path = suite_record.save(record)
    if args.json:
        sys.stdout.write(suite_record.dumps(record))
    else:
        console = _console()
        print_record(console, record, record.scores, reference,
                     ranking_rows(record, reference))
        console.print(f"[dim]saved {no_markup(path)}[/]")
    if record.status == "cancelled":
        print(f"gputui: cancelled; the tests that ran are saved as suite {record.id}",
              file=sys.stderr)
        return 128 + (received[0] if received else signal.SIGINT)
    failed = [o.test for o in record.outcomes if o.value is None]
    if failed:
        raise GputuiError(f"{len(failed)} test(s) gave no figure ({', '.join(failed)}); "
                          f"see 'gputui bench suite show {record.id}'")
    return 0


