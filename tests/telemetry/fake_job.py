"""A stand-in training job: steps timed by sleeps, reported with gputui.track.

It shares the fake NVML's clock: the first line on stdin is the time.monotonic() value
at which the fake's scenario time was 0 (both are CLOCK_MONOTONIC), so "slow from
second N" here and "throttle from second N" in the scenario mean the same moment.
Prints "stepping" once its first step is reported, then runs until --until seconds of
scenario time, or --steps steps (or until killed).
"""

from __future__ import annotations

import argparse
import sys
import time

from gputui import track


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--name", default=None)
    ap.add_argument("--samples", type=int, default=32)
    ap.add_argument("--tokens", type=int, default=0)
    ap.add_argument("--step-s", type=float, default=0.1)
    ap.add_argument("--slow-step-s", type=float, default=None)
    ap.add_argument("--slow-from", type=float, default=float("inf"))
    ap.add_argument("--slow-until", type=float, default=float("inf"))
    ap.add_argument("--until", type=float, default=float("inf"))
    ap.add_argument("--steps", type=int, default=None, help="stop after this many steps")
    args = ap.parse_args()
    t0 = float(sys.stdin.readline())
    if args.name is not None:
        track.start(name=args.name)
    first = True
    done = 0
    while (now := time.monotonic() - t0) < args.until and done != args.steps:
        slow = args.slow_step_s is not None and args.slow_from <= now < args.slow_until
        time.sleep(args.slow_step_s if slow else args.step_s)
        track.step(samples=args.samples, tokens=args.tokens)
        done += 1
        if first:
            print("stepping", flush=True)
            first = False
    return 0


if __name__ == "__main__":
    sys.exit(main())
