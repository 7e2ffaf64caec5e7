"""What `gputui.track.step()` costs a training loop, per call.

Three cases, each in this process with its own runtime dir (XDG_RUNTIME_DIR):
  reporting       the job's file is written (the usual case: one pwrite per call)
  no_runtime_dir  the runtime dir cannot be created (reporting off: the cheapest path)
  threads_8       reporting, from 8 threads at once (the lock contended); the figure is
                  the process's CPU time (all threads) per call, and the wall time per
                  call of all of them together; no empty loop taken off

The figure is the mean over --calls back-to-back calls, best of --repeats, minus an empty
loop of the same length: in this process's CPU time (time.process_time, what the call
takes from the training loop; wall time on a busy machine adds other processes' turns),
with the wall-clock figure beside it. Usage:
    python benchmarks/track_cost.py [--calls 1000000] [--repeats 5] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gputui import track


def per_call_us(step: object, calls: int, repeats: int,
                clock: object = time.process_time) -> float:
    fn = step  # a local: the loop measures the call, not a global lookup
    now = clock
    best = float("inf")
    for _ in range(repeats):
        t0 = now()  # type: ignore[operator]
        for _ in range(calls):
            pass
        empty = now() - t0  # type: ignore[operator]
        t0 = now()  # type: ignore[operator]
        for _ in range(calls):
            fn(samples=32, tokens=4096)  # type: ignore[operator]
        best = min(best, now() - t0 - empty)  # type: ignore[operator]
    return best / calls * 1e6


def threaded_us(step: object, calls: int, repeats: int, threads: int = 8) -> dict[str, float]:
    import threading

    each = calls // threads
    best_cpu = best_wall = float("inf")
    for _ in range(repeats):
        go = threading.Barrier(threads + 1)

        def report(go: threading.Barrier = go) -> None:
            fn = step
            go.wait()
            for _ in range(each):
                fn(samples=32, tokens=4096)  # type: ignore[operator]

        workers = [threading.Thread(target=report) for _ in range(threads)]
        for w in workers:
            w.start()
        c0, w0 = time.process_time(), time.perf_counter()
        go.wait()
        for w in workers:
            w.join()
        best_cpu = min(best_cpu, time.process_time() - c0)
        best_wall = min(best_wall, time.perf_counter() - w0)
    return {"cpu_us": best_cpu / (each * threads) * 1e6,
            "wall_us": best_wall / (each * threads) * 1e6}


def case(runtime: str, calls: int, repeats: int, threads: bool = False) -> dict[str, float]:
    os.environ["XDG_RUNTIME_DIR"] = runtime
    t = track.Tracker()
    t.step(samples=1)  # opens the file (or finds it cannot): not part of the per-call cost
    try:
        if threads:
            return threaded_us(t.step, calls, repeats)
        return {"cpu_us": per_call_us(t.step, calls, repeats),
                "wall_us": per_call_us(t.step, calls, repeats, time.perf_counter)}
    finally:
        t.close()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=1_000_000)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    base = tempfile.mkdtemp(prefix="gputui-track-cost-")
    try:
        reporting, blocked, threads = (os.path.join(base, d) for d in "abc")
        for d in (reporting, blocked, threads):
            os.mkdir(d, 0o700)
        open(os.path.join(blocked, "gputui"), "w").close()  # no directory can go there
        cases = {"reporting": case(reporting, args.calls, args.repeats),
                 "no_runtime_dir": case(blocked, args.calls, args.repeats),
                 "threads_8": case(threads, args.calls, args.repeats, threads=True)}
    finally:
        shutil.rmtree(base, ignore_errors=True)
    report = {"calls": args.calls, "repeats": args.repeats, "python": sys.version.split()[0],
              "mean_us": cases["reporting"]["cpu_us"], "cases": cases}
    if args.json:
        print(json.dumps(report))
    else:
        for name, us in cases.items():
            print(f"{name:>15}: {us['cpu_us']:.3f} µs CPU ({us['wall_us']:.3f} µs wall) "
                  "per track.step() call")
    return 0


if __name__ == "__main__":
    sys.exit(main())
