#!/usr/bin/env python3
"""CPU of gputui and nvitop (or another gputui tree) measured over the same window, side by
side: each round starts every program at once, each in its own tmux pane with its own copy
of the fake NVML scenario, and reads their CPU time at the same instants.

This VM's speed drifts 2x within a minute, so `tui_perf.py`'s alternating rounds of one
program at a time compare windows that ran at different speeds; here both programs share
every window, and the ratio of their CPU in a round is what to read. The setup is
`tui_perf.py`'s (N fake GPUs with 2 real processes each, 160x50, each program at its
defaults, installed as a user installs it).

    python benchmarks/cpu_side_by_side.py [--gpus 8] [--rounds 6] [--duration 40]
                                          [--compare nvitop|PATH]

Not a test. The first program is this checkout's gputui; ratios are to the second.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
for path in (ROOT, ROOT / "benchmarks"):
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))

import psutil  # noqa: E402
from tui_perf import (  # noqa: E402
    HEIGHT,
    WIDTH,
    Program,
    SetupError,
    gpu_processes,
    gputui_program,
    nvitop_program,
    program_base_env,
    scenario_text,
)

from tests.e2e.tmux import TmuxSession, tmux_available  # noqa: E402
from tests.fakenvml.harness import build_library  # noqa: E402


def one_round(programs: list[Program], pids: list[list[int]], gpus: int, duration: float,
              settle: float) -> list[float]:
    """Each program's CPU (% of one core) over the same `duration`."""
    lib = build_library()
    with tempfile.TemporaryDirectory(prefix="gputui-side-") as tmp_name:
        sessions: list[TmuxSession] = []
        try:
            for i, program in enumerate(programs):
                tmp = Path(tmp_name) / str(i)
                tmp.mkdir()
                scenario = tmp / "gpus.conf"
                scenario.write_text(scenario_text(gpus, pids))
                env = lib.env(scenario, base=program_base_env(tmp))
                env.update(dict(program.env))
                session = TmuxSession(list(program.command), env=env, width=WIDTH,
                                      height=HEIGHT, name=f"side{i}", cwd=tmp)
                sessions.append(session)
                session.start()
            procs = []
            for program, session in zip(programs, sessions, strict=True):
                session.wait_for(program.ready, timeout=60, interval=0.05)
                if session.pid is None:
                    raise RuntimeError(f"{program.label} is not running")
                procs.append(psutil.Process(session.pid))
            time.sleep(settle)
            before = [sum(p.cpu_times()[:2]) for p in procs]
            start = time.monotonic()
            time.sleep(duration)
            after = [sum(p.cpu_times()[:2]) for p in procs]
            wall = time.monotonic() - start
        finally:
            for session in sessions:
                session.send_keys("q")
            for session in sessions:
                try:
                    session.wait_exit(timeout=30)
                finally:
                    session.close()
    return [100.0 * (b - a) / wall for a, b in zip(before, after, strict=True)]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--gpus", type=int, default=8, help="fake GPUs, 1-64 (8)")
    ap.add_argument("--rounds", type=int, default=6, help="rounds (6)")
    ap.add_argument("--duration", type=float, default=40.0, help="seconds measured (40)")
    ap.add_argument("--settle", type=float, default=5.0,
                    help="seconds after the first frames before measuring (5)")
    ap.add_argument("--compare", default="nvitop", metavar="nvitop|PATH",
                    help="the program beside this gputui (nvitop)")
    args = ap.parse_args(argv)
    if not 1 <= args.gpus <= 64 or args.rounds < 1 or args.duration <= 0:
        print("gputui: --gpus 1-64, --rounds >= 1, --duration > 0", file=sys.stderr)
        return 2
    if not tmux_available():
        print("gputui: cpu_side_by_side needs tmux", file=sys.stderr)
        return 1
    try:
        other = (nvitop_program() if args.compare == "nvitop"
                 else gputui_program(tree=Path(args.compare)))
        programs = [gputui_program(), other]
    except SetupError as exc:
        print(f"gputui: {exc}", file=sys.stderr)
        return 1
    cpu: list[list[float]] = [[] for _ in programs]
    with gpu_processes(args.gpus, 2) as pids:
        for r in range(args.rounds):
            got = one_round(programs, pids, args.gpus, args.duration, args.settle)
            for mine, value in zip(cpu, got, strict=True):
                mine.append(value)
            print(f"round {r + 1}: " + ", ".join(
                f"{p.label} {v:.2f} %" for p, v in zip(programs, got, strict=True))
                + f" (load {os.getloadavg()[0]:.1f})", flush=True)
    ratios = [a / b for a, b in zip(cpu[0], cpu[1], strict=True) if b > 0]
    for program, values in zip(programs, cpu, strict=True):
        print(f"{program.label:>24}: median {statistics.median(values):.2f} % of one core")
    if ratios:
        print(f"{programs[0].label} ÷ {programs[1].label} per round: "
              + ", ".join(f"{x:.2f}" for x in ratios)
              + f" (median {statistics.median(ratios):.2f}); {args.gpus} fake GPUs, 2 real "
              f"processes each, {WIDTH}x{HEIGHT}, {args.duration:g} s a round")
    return 0


if __name__ == "__main__":
    sys.exit(main())
