"""`gputui snapshot`: one nvidia-smi-like reading, as tables or as JSON."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

from gputui.commands.paths import add_path_arguments, kernel_paths
from gputui.telemetry.kernel_paths import KernelPaths
from gputui.telemetry.model import Snapshot
from gputui.telemetry.schema import snapshot_to_dict

# psutil's CPU % is a delta: wait this long after priming so it means something.
CPU_SETTLE_S = 0.25
# How long one reading waits for each GPU before reporting it as not answering.
READ_TIMEOUT_S = 2.0


def add_parser(sub: argparse._SubParsersAction, summary: str) -> None:
    p = sub.add_parser("snapshot", help=summary,
                       description="Print one nvidia-smi-like reading of every GPU, the host "
                       "and the GPU processes.")
    p.add_argument("--json", action="store_true", help="print the documented JSON document")
    add_path_arguments(p)
    p.set_defaults(func=run)


def take_snapshot(paths: KernelPaths | None = None, idle_w: float | None = None) -> Snapshot:
    from gputui.telemetry import gpm
    from gputui.telemetry.sampler import Sampler

    paths = paths or KernelPaths()
    started = time.monotonic()
    # One reading: every field is due, slow ones too (violation time needs two reads).
    # Each GPU is read on its own thread with a deadline: a hung one is reported as not
    # answering, and Ctrl-C/SIGTERM still end the command at once.
    sampler = Sampler.open(interval=1.0, process_every=1, slow_every=1,
                           read_timeout_s=READ_TIMEOUT_S, sysfs=paths.sysfs,
                           procfs=paths.procfs, rootfs=paths.rootfs, idle_w=idle_w)
    try:
        settle = CPU_SETTLE_S - (time.monotonic() - started)
        if sampler.source is not None:
            sampler.read()  # primes counters that are deltas (violation time, GPM, fdinfo)
            # GPM needs its two samples apart (a first read can take longer than the
            # CPU's settling time): see gpm.MIN_SAMPLE_GAP_S.
            settle = max(CPU_SETTLE_S - (time.monotonic() - started),
                         gpm.MIN_SAMPLE_GAP_S + 0.05)
        time.sleep(max(0.0, settle))
        return sampler.read()
    finally:
        sampler.close()


def run(args: argparse.Namespace) -> int:
    from gputui.commands.config_args import apply_config

    apply_config(args)  # config.toml's [path] under the flags
    snap = take_snapshot(kernel_paths(args), getattr(args, "idle_w", None))
    if args.json:
        json.dump(snapshot_to_dict(snap), sys.stdout, indent=2)
        sys.stdout.write("\n")
        return 0
    from rich.console import Console

    from gputui.commands.snapshot_view import render_snapshot

    console = Console(highlight=False)
    if not console.is_terminal and "COLUMNS" not in os.environ:
        # Piped or redirected: nobody's screen to fit, so keep every column.
        console = Console(highlight=False, width=200)
    for item in render_snapshot(snap, console.width):
        console.print(item)
    return 0
