"""A stand-in training job, reported with gputui.track.

It shares the fake NVML's clock: the first line on stdin is the time.monotonic() value
at which the fake's scenario time was 0 (both are CLOCK_MONOTONIC), so "slow from
second N" here and "throttle from second N" in the scenario mean the same moment.

Timed by sleeps (the default): prints "stepping" once its first step is reported, then
runs until --until seconds of scenario time, or --steps steps (or until killed).

--driven: no sleeps; the steps' end times are on a clock the test moves. Each later
line on stdin is a scenario time T: the job reports every step that ends by T (the
steps' times are the first line's value plus scenario seconds), then prints "at T".
"""

from __future__ import annotations

import argparse
import sys
import time

from gputui import track


def step_length(args: argparse.Namespace, start: float) -> float:
    """How long a step that starts at scenario second `start` takes."""
    slow = args.slow_step_s is not None and args.slow_from <= start < args.slow_until
    return float(args.slow_step_s if slow else args.step_s)


def driven(args: argparse.Namespace, t0: float) -> int:
    now = [t0]
    tracker = track.Tracker(clock=lambda: now[0])
    tracker.start(name=args.name)
    end = 0.0  # scenario second the last step ended
    for line in sys.stdin:
        until = float(line)
        while end + (length := step_length(args, end)) <= until:
            end += length
            now[0] = t0 + end
            tracker.step(samples=args.samples, tokens=args.tokens)
        print(f"at {until!r}", flush=True)
    tracker.close()
    return 0


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
    ap.add_argument("--driven", action="store_true", help="steps on the test's clock")
    args = ap.parse_args()
    t0 = float(sys.stdin.readline())
    if args.driven:
        return driven(args, t0)
    if args.name is not None:
        track.start(name=args.name)
    first = True
    done = 0
    while (now := time.monotonic() - t0) < args.until and done != args.steps:
        time.sleep(step_length(args, now))
        track.step(samples=args.samples, tokens=args.tokens)
        done += 1
        if first:
            print("stepping", flush=True)
            first = False
    return 0


if __name__ == "__main__":
    sys.exit(main())
