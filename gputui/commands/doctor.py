"""`gputui doctor`: is this GPU box configured right and healthy? (see gputui/doctor/)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from gputui.errors import UsageError


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not 0 <= value <= 3600 or value != value:
        raise argparse.ArgumentTypeError(f"must be between 0 and 3600 seconds: {text!r}")
    return value


def add_parser(sub: argparse._SubParsersAction, summary: str) -> None:
    p = sub.add_parser(
        "doctor", help=summary,
        description="Check every GPU's configuration (PCIe link, persistence, power limit, "
        "clocks, ECC, MIG, compute mode, driver) and health (remapped rows, retired pages, "
        "ECC errors, XID events, idle throttling, temperature, fan). Exit 0 when every "
        "check passes, 1 when one fails (or warns, with --strict), 2 on bad usage.")
    p.add_argument("--quick", action="store_true",
                   help="configuration and health only: put no load on the GPUs (without "
                   "it, performance probes run in the benchmark worker; they need torch)")
    p.add_argument("--gpus", metavar="LIST", help="GPU indices to check, e.g. 0,2 or 0-3")
    p.add_argument("--json", action="store_true", help="print one JSON document")
    p.add_argument("--junit", metavar="FILE", type=Path,
                   help="also write a JUnit XML file (one testcase per check)")
    p.add_argument("--strict", action="store_true", help="warnings fail too")
    p.add_argument("--observe", metavar="S", type=_seconds, default=0.0,
                   help="keep watching the idle GPUs this many seconds for XID events "
                   "and throttling (default 0)")
    p.add_argument("--duration", metavar="S", type=_seconds, default=2.0,
                   help="seconds of timed work per probe point (default 2)")
    from gputui.commands.paths import add_path_arguments

    add_path_arguments(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from gputui.atomic import write_atomic
    from gputui.commands.config_args import apply_config
    from gputui.commands.paths import kernel_paths
    from gputui.doctor.model import Check, Report
    from gputui.doctor.output import check_line, json_report, junit_report, summary_text
    from gputui.doctor.probes import ProbePlan
    from gputui.doctor.run import Options, parse_gpu_list, run_doctor

    apply_config(args)  # config.toml's [path] under the flags
    paths = kernel_paths(args)
    gpus = parse_gpu_list(args.gpus) if args.gpus is not None else None
    if args.junit is not None and args.junit.is_dir():
        raise UsageError(f"--junit: {args.junit} is a directory")
    seen: list[Check] = []
    stream = not args.json

    def on_check(check: Check) -> None:
        seen.append(check)
        if stream:
            print(check_line(check), flush=True)

    if args.duration <= 0:
        raise UsageError("--duration must be more than 0 seconds")
    options = Options(quick=args.quick, gpus=gpus, observe_s=args.observe,
                      probes=ProbePlan(duration_s=args.duration))
    try:
        report = run_doctor(options, on_check=on_check, sysfs=paths.sysfs,
                            procfs=paths.procfs)
    except KeyboardInterrupt:
        report = Report(checks=tuple(seen), interrupted=True)
    if args.json:
        sys.stdout.write(json_report(report, args.strict))
    else:  # the check lines were printed as they finished
        sys.stdout.write(summary_text(report, args.strict))
    if args.junit is not None:
        write_atomic(args.junit, junit_report(report, args.strict))
    return report.exit_code(args.strict)
