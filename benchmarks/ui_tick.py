#!/usr/bin/env python3
"""CPU time the monitor's main thread spends per tick: drawing a frame of N GPUs (values
moving on every GPU, `--procs-per-gpu` processes each whose CPU % and running time move
as a busy training process's do) and turning Textual's output into what the terminal
writer sends. In-process, no NVML, no terminal: the frames are fed by hand and
the writer's output is counted, not written. CPU time (not wall time) of this process,
so other load on the machine disturbs it less than `tui_perf.py`'s figures.

    python benchmarks/ui_tick.py [--gpus 8] [--procs-per-gpu 2] [--ticks 60] [--rounds 3]
                                 [--size 160x50] [--compare PATH] [--json]

`--compare PATH` runs the same measurement against another gputui source tree (its own
`gputui` and `tests` packages), alternately with this one. Not a test.
"""

from __future__ import annotations

import argparse
import asyncio
import inspect
import json
import os
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


@dataclass
class Writes:
    """Textual's writes in a measurement: before the measured ticks, and during them."""

    setup: list[str] = field(default_factory=list)
    ticks: list[str] = field(default_factory=list)


def measure(gpus: int, ticks: int, size: tuple[int, int], per_gpu: int = 2,
            record: Writes | None = None) -> dict[str, float]:
    from textual.drivers.headless_driver import HeadlessDriver

    from gputui.telemetry.sampler import Sampler
    from gputui.ui.app import GputuiApp
    from gputui.ui.options import AppOptions
    from gputui.ui.terminal_writer import ScreenDiff
    from tests.ui.helpers import T0, feed, gpu, proc, snap

    diff = ScreenDiff()
    diff.resize(size)
    sent = [0]
    written = record.setup if record is not None else None  # where Textual's writes go

    class Counting(HeadlessDriver):
        """Textual's frames through the writer's filter, counted instead of written."""

        @property
        def is_headless(self) -> bool:
            return False  # Textual renders frames only for a driver with output

        def write(self, data: str) -> None:
            if written is not None:
                written.append(data)
            sent[0] += len(diff.write(data).encode())

    started = T0.timestamp() - 100.0  # running for 100 s: its TIME moves every second

    def make(t: int):
        # The sampler reads the processes every 3 ticks: their CPU % moves then.
        cpu = 90.0 + (t // 3) % 7
        procs = [proc(10000 + per_gpu * i + r, i, 40.0 / (r + 1), cpu_pct=cpu + r,
                      started=started) for i in range(gpus) for r in range(per_gpu)]
        return snap(t, [gpu(i, t) for i in range(gpus)], procs)

    async def run() -> tuple[float, int]:
        nonlocal written
        sampler = Sampler(interval=1.0, nvml=None)
        if "start_sampler" in inspect.signature(GputuiApp).parameters:  # a tree before the feed
            app = GputuiApp(AppOptions(), sampler=sampler, start_sampler=False)
        else:  # a sampler handed to the app is fed by hand
            app = GputuiApp(AppOptions(), sampler=sampler)
        app.driver_class = Counting
        async with app.run_test(size=size, headless=False) as pilot:
            feed(sampler, 0, 5, make)  # the first full screen and layout, not measured
            await pilot.pause()
            await pilot.pause()
            sent[0] = 0
            if record is not None:
                written = record.ticks
            cpu0 = time.process_time()
            for t in range(5, 5 + ticks):
                feed(sampler, t, t + 1, make)
                await pilot.pause()
            return time.process_time() - cpu0, sent[0]

    cpu, nbytes = asyncio.run(run())
    return {"cpu_ms_per_tick": round(1000 * cpu / ticks, 3),
            "bytes_per_tick": round(nbytes / ticks, 1)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--gpus", type=int, default=8, help="GPUs in each frame (8)")
    ap.add_argument("--procs-per-gpu", type=int, default=2, help="processes per GPU (2)")
    ap.add_argument("--ticks", type=int, default=60, help="ticks measured per round (60)")
    ap.add_argument("--rounds", type=int, default=3, help="rounds; medians reported (3)")
    ap.add_argument("--size", default="160x50", help="screen, COLSxROWS (160x50)")
    ap.add_argument("--compare", metavar="PATH", help="another gputui source tree")
    ap.add_argument("--json", action="store_true", help="print the figures as JSON")
    ap.add_argument("--one", action="store_true", help=argparse.SUPPRESS)  # a single round
    args = ap.parse_args(argv)
    try:
        width, height = (int(x) for x in args.size.lower().split("x"))
    except ValueError:
        print(f"ui_tick: --size must be COLSxROWS, not {args.size!r}", file=sys.stderr)
        return 2
    if args.gpus < 1 or args.ticks < 1 or args.rounds < 1 or args.procs_per_gpu < 0:
        print("ui_tick: --gpus, --ticks and --rounds must be at least 1, --procs-per-gpu "
              "at least 0", file=sys.stderr)
        return 2
    if args.one:
        sys.path.insert(0, os.getcwd())
        print(json.dumps(measure(args.gpus, args.ticks, (width, height),
                                 args.procs_per_gpu)))
        return 0
    trees = {"gputui": ROOT}
    if args.compare:
        trees[f"gputui@{Path(args.compare).name}"] = Path(args.compare).resolve()
    runs: dict[str, list[dict[str, float]]] = {label: [] for label in trees}
    for _ in range(args.rounds):
        for label, tree in trees.items():  # alternately: load drifts hit both alike
            env = {**os.environ, "PYTHONPATH": str(tree)}
            out = subprocess.run(
                [sys.executable, str(Path(__file__).resolve()), "--one", "--gpus",
                 str(args.gpus), "--ticks", str(args.ticks), "--size", args.size,
                 "--procs-per-gpu", str(args.procs_per_gpu)],
                cwd=tree, env=env, capture_output=True, text=True, check=False)
            if out.returncode != 0:
                print(f"ui_tick: {label} failed: {out.stderr.strip()[-500:]}", file=sys.stderr)
                return 1
            runs[label].append(json.loads(out.stdout))
    medians = {label: {k: statistics.median(r[k] for r in rs) for k in rs[0]}
               for label, rs in runs.items()}
    if args.json:
        print(json.dumps({"gpus": args.gpus, "size": args.size, "ticks": args.ticks,
                          "median": medians, "runs": runs}, indent=2))
        return 0
    for label, m in medians.items():
        print(f"{label:<24} {m['cpu_ms_per_tick']:7.2f} ms CPU per tick   "
              f"{m['bytes_per_tick']:8.0f} bytes per tick")
    print(f"({args.gpus} GPUs, {args.procs_per_gpu} processes each, {args.size}, "
          f"{args.ticks} ticks, median of {args.rounds} "
          f"alternating rounds; load {os.getloadavg()[0]:.2f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
