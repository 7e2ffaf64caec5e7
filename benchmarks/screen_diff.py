#!/usr/bin/env python3
"""CPU time of the terminal writer's diff alone (`ScreenDiff.write`, then `catch_up`, as the
driver calls them) on Textual's real output of the monitor. The writes of a `ui_tick.py`
run (N GPUs, processes whose CPU % and running time move) are recorded once with this
tree, then fed to the ScreenDiff of this tree and, with `--compare PATH`, of another
gputui source tree, alternately (the VM's speed drifts: both see the same drift). Each
round feeds the first frames (not timed) and then the ticks' writes `--passes` times to
a new ScreenDiff; its figure is CPU ms per tick. Prints the medians of the rounds, and
whether both trees sent the same bytes.

    python benchmarks/screen_diff.py [--gpus 8] [--procs-per-gpu 2] [--ticks 60]
        [--rounds 5] [--passes 5] [--size 160x50] [--compare PATH] [--json]

Not a test.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent


def replay(path: str, passes: int) -> dict[str, object]:
    """Feed the recorded writes to this tree's ScreenDiff (the one on sys.path)."""
    from gputui.ui.terminal_writer import ScreenDiff

    recorded = json.loads(Path(path).read_text())
    size, setup, ticks = tuple(recorded["size"]), recorded["setup"], recorded["ticks"]
    cpu = 0.0
    digest = hashlib.sha256()
    for i in range(passes):
        diff = ScreenDiff()
        diff.resize(size)
        for data in setup:
            diff.write(data)
            diff.catch_up()
        sent = []
        cpu0 = time.process_time()
        for data in ticks:
            sent.append(diff.write(data))
            diff.catch_up()
        cpu += time.process_time() - cpu0
        if i == 0:
            for out in sent:
                digest.update(out.encode() + b"\0")
    return {"cpu_ms_per_tick": round(1000 * cpu / (passes * len(ticks)), 4),
            "bytes_per_tick": round(sum(len(out.encode()) for out in sent) / len(ticks), 1),
            "sent_sha256": digest.hexdigest()[:16]}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--gpus", type=int, default=8, help="GPUs in each frame (8)")
    ap.add_argument("--procs-per-gpu", type=int, default=2, help="processes per GPU (2)")
    ap.add_argument("--ticks", type=int, default=60, help="ticks recorded (60)")
    ap.add_argument("--rounds", type=int, default=5, help="rounds; medians reported (5)")
    ap.add_argument("--passes", type=int, default=5, help="passes over the ticks a round (5)")
    ap.add_argument("--size", default="160x50", help="screen, COLSxROWS (160x50)")
    ap.add_argument("--compare", metavar="PATH", help="another gputui source tree")
    ap.add_argument("--json", action="store_true", help="print the figures as JSON")
    ap.add_argument("--replay", metavar="FILE", help=argparse.SUPPRESS)  # one round
    args = ap.parse_args(argv)
    if args.replay:
        sys.path.insert(0, os.getcwd())
        print(json.dumps(replay(args.replay, args.passes)))
        return 0
    try:
        width, height = (int(x) for x in args.size.lower().split("x"))
    except ValueError:
        print(f"screen_diff: --size must be COLSxROWS, not {args.size!r}", file=sys.stderr)
        return 2
    if min(args.gpus, args.ticks, args.rounds, args.passes) < 1 or args.procs_per_gpu < 0:
        print("screen_diff: --gpus, --ticks, --rounds and --passes must be at least 1, "
              "--procs-per-gpu at least 0", file=sys.stderr)
        return 2
    if args.compare and not Path(args.compare, "gputui").is_dir():
        print(f"screen_diff: --compare {args.compare}: not a gputui source tree",
              file=sys.stderr)
        return 2
    sys.path[:0] = [str(ROOT), str(HERE)]
    from ui_tick import Writes, measure

    record = Writes()
    measure(args.gpus, args.ticks, (width, height), args.procs_per_gpu, record=record)
    trees = {"gputui": ROOT}
    if args.compare:
        trees[f"gputui@{Path(args.compare).name}"] = Path(args.compare).resolve()
    runs: dict[str, list[dict[str, object]]] = {label: [] for label in trees}
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp, "writes.json")
        path.write_text(json.dumps({"size": [width, height], **asdict(record)}))
        for _ in range(args.rounds):
            for label, tree in trees.items():  # alternately: load drifts hit both alike
                env = {**os.environ, "PYTHONPATH": str(tree)}
                out = subprocess.run(
                    [sys.executable, str(Path(__file__).resolve()), "--replay", str(path),
                     "--passes", str(args.passes)],
                    cwd=tree, env=env, capture_output=True, text=True, check=False)
                if out.returncode != 0:
                    print(f"screen_diff: {label} failed: {out.stderr.strip()[-500:]}",
                          file=sys.stderr)
                    return 1
                runs[label].append(json.loads(out.stdout))
    medians = {label: {"cpu_ms_per_tick": statistics.median(r["cpu_ms_per_tick"] for r in rs),
                       "bytes_per_tick": rs[0]["bytes_per_tick"],
                       "sent_sha256": rs[0]["sent_sha256"]}
               for label, rs in runs.items()}
    same = len({m["sent_sha256"] for m in medians.values()}) == 1
    if args.json:
        print(json.dumps({"gpus": args.gpus, "size": args.size, "ticks": args.ticks,
                          "median": medians, "same_bytes": same, "runs": runs}, indent=2))
        return 0
    for label, m in medians.items():
        print(f"{label:<24} {m['cpu_ms_per_tick']:7.3f} ms CPU per tick   "
              f"{m['bytes_per_tick']:8.0f} bytes per tick   sent {m['sent_sha256']}")
    print(f"({args.gpus} GPUs, {args.procs_per_gpu} processes each, {args.size}, "
          f"{args.ticks} ticks x {args.passes} passes, median of {args.rounds} alternating "
          f"rounds; {'the same bytes sent' if same else 'DIFFERENT BYTES SENT'}; "
          f"load {os.getloadavg()[0]:.2f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
