#!/usr/bin/env python3
"""Time to the first frame: `gputui` and nvitop started in tmux, alternately, against the
same fake GPUs (tests/fakenvml, 4 GPUs by default) in a 120×40 pane; each run is timed
from exec'ing the program (a gated tmux pane: the clock starts when the program does)
until the first GPU line (the GPU's name) reaches the pane (`tmux pipe-pane`). Median of `--rounds`.
Each program runs at its defaults; each GPU has `--procs-per-gpu` (2) real idle processes
of this user (as benchmarks/tui_perf.py starts them; 0: none).

    python benchmarks/first_frame.py [--rounds 5] [--gpus 4] [--size 120x40]
                                     [--procs-per-gpu 2] [--compare PATH] [--json]

The gputui measured is this checkout's. `--compare PATH` adds another gputui source tree
(before/after figures). Each tree is installed as a user's `pip install .` installs it
(byte-compiled, no editable-install import hook) into a venv of its own that borrows
this interpreter's dependencies; nvitop runs from its own venv. Both are set up as
benchmarks/tui_perf.py sets them up, under build/. Needs
tmux and gcc. Not a test: the numbers depend on the machine and its load.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parents[1]
for path in (ROOT, ROOT / "benchmarks"):
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))

from tui_perf import (  # noqa: E402
    Program,
    SetupError,
    gpu_processes,
    gputui_program,
    nvitop_program,
    program_base_env,
)

from tests.e2e.tmux import TmuxSession, tmux_available  # noqa: E402
from tests.fakenvml.harness import build_library, write_scenario  # noqa: E402

GPU_LINE = "A100"  # the fake's default GPU: "NVIDIA A100-SXM4-80GB"


def first_frame_s(program: Program, scenario: Path, width: int, height: int) -> float:
    lib = build_library()
    with tempfile.TemporaryDirectory(prefix="gputui-first-frame-") as tmp_name:
        tmp = Path(tmp_name)
        base = program_base_env(tmp)
        env = lib.env(scenario, base=base)
        env.update(dict(program.env))
        pipe_file = tmp / "pane-output"
        with TmuxSession(list(program.command), env=env, width=width, height=height,
                         name="first-frame", gated=True, cwd=tmp) as s:
            # What the pane receives goes to a file (tmux pipe-pane), read every 2 ms:
            # polling with `capture-pane` would start a tmux client every few ms, on a
            # machine whose two cores the measured program needs.
            s.tmux("pipe-pane", "-o", "-t", s.name, f"cat >> '{pipe_file}'")
            s.release()
            t0 = time.monotonic()
            marker = GPU_LINE.encode()
            took = None
            while took is None and time.monotonic() - t0 < 30:
                try:
                    if marker in pipe_file.read_bytes():
                        took = time.monotonic() - t0
                except FileNotFoundError:
                    pass
                time.sleep(0.002)
            pid = s.pid
            if took is None:
                raise RuntimeError(f"{program.label}: no {GPU_LINE!r} on screen after 30 s: "
                                   + s.capture()[-300:])
        # The next run starts once this program is gone: on two cores, one still busy
        # with its start-up (or its exit) would slow the next one down.
        if pid is not None:
            with contextlib.suppress(psutil.Error):
                psutil.Process(pid).wait(10)
        time.sleep(0.2)
        return took


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=5, help="runs of each program (5)")
    ap.add_argument("--gpus", type=int, default=4, help="fake GPUs (4)")
    ap.add_argument("--size", default="120x40", help="pane size, WIDTHxHEIGHT (120x40)")
    ap.add_argument("--procs-per-gpu", type=int, default=2,
                    help="real idle processes per GPU (2)")
    ap.add_argument("--compare", metavar="PATH", help="another gputui source tree")
    ap.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = ap.parse_args(argv)
    try:
        width, height = (int(x) for x in args.size.lower().split("x"))
    except ValueError:
        print(f"gputui: --size must be WIDTHxHEIGHT, not {args.size!r}", file=sys.stderr)
        return 2
    if args.rounds < 1 or args.gpus < 1 or not 0 <= args.procs_per_gpu <= 8:
        print("gputui: --rounds and --gpus must be at least 1, --procs-per-gpu 0-8",
              file=sys.stderr)
        return 2
    if not tmux_available():
        print("gputui: first_frame needs tmux", file=sys.stderr)
        return 1
    try:
        # This checkout's package, not whichever one the venv's `gputui` script imports
        # (an editable install may point at another checkout).
        programs = [gputui_program(None, ROOT), nvitop_program(None)]
        if args.compare:
            programs.insert(1, gputui_program(None, Path(args.compare)))
    except SetupError as exc:
        print(f"gputui: {exc}", file=sys.stderr)
        return 1
    with (tempfile.TemporaryDirectory(prefix="gputui-first-frame-") as tmp,
          gpu_processes(args.gpus, args.procs_per_gpu) as pids):
        procs = {f"gpu.{k}.processes": {pid: 2**30 >> r for r, pid in enumerate(row)}
                 for k, row in enumerate(pids) if row}
        scenario = write_scenario(Path(tmp) / "gpus.conf", {"device_count": args.gpus, **procs})
        times: dict[str, list[float]] = {p.label: [] for p in programs}
        skipped: list[str] = []
        for _ in range(args.rounds):
            took: dict[str, float] = {}
            try:
                for program in programs:  # alternately: load drifts hit every program alike
                    took[program.label] = first_frame_s(program, scenario, width, height)
            except RuntimeError as exc:  # a program never drew its line: the round is out
                skipped.append(str(exc).splitlines()[0][:120])
                continue
            for label, t in took.items():
                times[label].append(t)
    if not times[programs[0].label]:
        print(f"gputui: first_frame: every round failed: {skipped[0]}", file=sys.stderr)
        return 1
    medians = {label: statistics.median(ts) for label, ts in times.items()}
    # Each round's ratio to nvitop's run beside it: the VM's speed drifts within a minute,
    # and a ratio of two runs seconds apart carries less of that drift than two medians.
    nvitop = times[programs[-1].label]
    ratios = {label: statistics.median(t / n for t, n in zip(ts, nvitop, strict=True))
              for label, ts in times.items() if label != programs[-1].label}
    if args.json:
        print(json.dumps({"size": args.size, "gpus": args.gpus, "rounds": args.rounds,
                          "procs_per_gpu": args.procs_per_gpu, "skipped": skipped,
                          "median_s": medians, "median_ratio_to_nvitop": ratios,
                          "runs_s": times}, indent=2))
        return 0
    for label, ts in times.items():
        runs = " ".join(f"{t:.3f}" for t in ts)
        ratio = f"  ×{ratios[label]:.2f} nvitop (median of rounds)" if label in ratios else ""
        print(f"{label:<24} median {medians[label]:.3f} s{ratio}   runs {runs}")
    print(f"({args.gpus} fake GPUs, {args.procs_per_gpu} processes each, {width}x{height}, "
          "each at its defaults, until the first GPU line is on screen; "
          f"load {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs)")
    for why in skipped:
        print(f"(a round left out: {why})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
