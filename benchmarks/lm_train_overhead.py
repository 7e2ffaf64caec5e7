#!/usr/bin/env python3
"""Does gputui's lm-train measure what a bare nanoGPT loop of the same config measures?

Not a test: alternating rounds, each run in a fresh process — A: `gputui bench run lm-train`
(the worker, its timed loop, windows, energy meter, FLOP count after timing), B: the plain
nanoGPT-style loop in benchmarks/bare_lm.py (same model shape, batch, AdamW, precision,
threads). Prints each round's tokens/s and the median of the per-round ratios gputui ÷ bare.

    python benchmarks/lm_train_overhead.py [--rounds 5] [--steps 30] [--device cpu]

The CPU default is the tiny GPT (gputui's CPU default model) with one thread; on CUDA it is
GPT-2 124M, batch 12, bf16.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def gputui_run(args: argparse.Namespace) -> float:
    if args.worker:
        # The worker alone, without the `gputui bench run` parent that reads its events,
        # samples the machine and saves the result (it shares the CPU with the worker).
        spec = {"benchmark": "lm-train", "device": args.device, "model": args.model,
                "batch_size": args.batch, "warmup": args.warmup, "steps": args.steps,
                "precision": "fp32" if args.device == "cpu" else "bf16",
                "threads": args.threads if args.device == "cpu" else None}
        out = subprocess.run([sys.executable, "-m", "gputui.bench.worker", "--spec-json",
                              json.dumps(spec)], capture_output=True, text=True, check=True,
                             timeout=900)
        last = json.loads(out.stdout.strip().splitlines()[-1])
        return float(last["result"]["throughput"]["value"])
    cmd = [sys.executable, "-m", "gputui", "bench", "run", "lm-train", "--device", args.device,
           "--json", "--batch-size", str(args.batch), "--warmup", str(args.warmup),
           "--steps", str(args.steps), "--model", args.model]
    if args.device == "cpu":
        cmd += ["--threads", str(args.threads), "--precision", "fp32"]
    else:
        cmd += ["--precision", "bf16"]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True, timeout=900)
    return float(json.loads(out.stdout)["throughput"]["value"])


def bare_run(args: argparse.Namespace) -> float:
    code = (f"import sys, json; sys.path.insert(0, {HERE!r}); import bare_lm; "
            f"cfg = bare_lm.{'GPT_TINY' if args.model == 'gpt-tiny' else 'GPT2'}; "
            f"print(json.dumps(bare_lm.bare_train(cfg, {args.batch}, {args.device!r}, "
            f"{args.device != 'cpu'}, steps={args.steps}, warmup={args.warmup}, "
            f"threads={args.threads if args.device == 'cpu' else None})))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, timeout=900)
    return float(json.loads(out.stdout)["value"])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--model", choices=("gpt-tiny", "gpt2"), default=None)
    ap.add_argument("--batch", type=int, default=None)
    ap.add_argument("--worker", action="store_true",
                    help="run gputui's worker directly instead of `gputui bench run`")
    args = ap.parse_args()
    args.model = args.model or ("gpt-tiny" if args.device == "cpu" else "gpt2")
    args.batch = args.batch or (4 if args.model == "gpt-tiny" else 12)
    ratios = []
    for r in range(args.rounds):
        order = ("gputui", "bare") if r % 2 == 0 else ("bare", "gputui")
        got = {side: gputui_run(args) if side == "gputui" else bare_run(args) for side in order}
        ratios.append(got["gputui"] / got["bare"])
        print(f"round {r + 1} ({order[0]} first): gputui {got['gputui']:,.0f}  "
              f"bare {got['bare']:,.0f} tokens/s  ratio {ratios[-1]:.3f}", flush=True)
    med = statistics.median(ratios)
    geo = statistics.geometric_mean(ratios)
    print(f"{args.model} batch {args.batch} on {args.device}"
          f"{' (worker alone)' if args.worker else ''}: median ratio gputui/bare {med:.3f} "
          f"over {args.rounds} rounds ({'≥' if med >= 0.95 else '<'} 0.95); geometric mean "
          f"{geo:.3f}, range {min(ratios):.3f} … {max(ratios):.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
