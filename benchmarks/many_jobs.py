"""What thousands of live training jobs cost the monitor, per tick (a benchmark, not a test).

Holds --jobs live job files (gputui.track's layout, each with a full ring of steps and
its lock held by this process, as a running job holds its own) in a private runtime
dir, then:
  read   JobSource.read() --ticks times in this process: wall and CPU ms per tick, and
         the descriptors this process has open while it reads none (before and after);
  watch  `gputui watch --interval 1 --count --watch-ticks --format jsonl` in a child
         under `ulimit -n --nofile` (1024, the usual) on the fake NVML (tests/fakenvml,
         eight GPUs): its exit status, its first line on stderr, the time from its first
         tick's rows to its last (on pace: one second a tick), the largest gap between two
         ticks' rows (on pace: 1.0 s) and its CPU time per tick.

    python benchmarks/many_jobs.py [--jobs 5000] [--ticks 20] [--watch-ticks 10]
                                   [--nofile 1024] [--json]

With PYTHONPATH set, the gputui found there is measured (e.g. PYTHONPATH=/other/tree for a
before/after comparison; a tree that holds a descriptor per job needs --nofile above
--jobs for its watch to run at all). The VM's speed drifts: compare alternating runs.
"""

from __future__ import annotations

import argparse
import importlib.util
import itertools
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[1]
if not os.environ.get("PYTHONPATH"):  # else the tree PYTHONPATH names (a before/after run)
    sys.path.insert(0, str(ROOT))

from gputui.telemetry.jobs import JobSource  # noqa: E402
from tests.fakenvml.harness import build_library, scenario_path  # noqa: E402


def _job_files() -> ModuleType:
    """This tree's tests/telemetry/job_files.py, whichever tree is measured."""
    spec = importlib.util.spec_from_file_location(
        "job_files", ROOT / "tests" / "telemetry" / "job_files.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def open_descriptors() -> int:
    return len(os.listdir("/proc/self/fd"))


def read_cost(directory: Path, ticks: int, jobs: int) -> dict[str, float]:
    source = JobSource(str(directory))
    before = open_descriptors()
    t0 = time.perf_counter()
    first = source.read()
    first_ms = (time.perf_counter() - t0) * 1e3
    if len(first) != jobs:
        raise SystemExit(f"read {len(first)} jobs of {jobs}")
    wall, cpu = [], []
    for _ in range(ticks):
        w0, c0 = time.perf_counter(), time.process_time()
        source.read()
        cpu.append((time.process_time() - c0) * 1e3)
        wall.append((time.perf_counter() - w0) * 1e3)
    held = open_descriptors() - before
    source.close()
    return {"first_ms": first_ms, "wall_ms_median": statistics.median(wall),
            "wall_ms_max": max(wall), "cpu_ms_median": statistics.median(cpu),
            "descriptors_held": held}


def watch_pace(runtime: Path, ticks: int, nofile: int) -> dict[str, object]:
    env = build_library().env(scenario_path("eight_gpus"))
    env["XDG_RUNTIME_DIR"] = str(runtime)
    tree = (os.environ.get("PYTHONPATH") or str(ROOT)).split(os.pathsep)[0]
    env["PYTHONPATH"] = tree

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))

    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    proc = subprocess.run([sys.executable, "-m", "gputui", "watch", "--interval", "1",
                           "--count", str(ticks), "--format", "jsonl"], env=env,
                          capture_output=True, text=True, timeout=60 + 10 * ticks,
                          preexec_fn=limit, cwd=tree)  # `-m` puts the cwd first on sys.path
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    times = sorted({json.loads(line)["time"] for line in proc.stdout.splitlines()})
    stamps = [datetime.fromisoformat(t.replace("Z", "+00:00")).timestamp() for t in times]
    gaps = [b - a for a, b in itertools.pairwise(stamps)]
    cpu_s = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    return {"exit": proc.returncode, "stderr": (proc.stderr.strip().splitlines() or [""])[0],
            "ticks": len(stamps), "max_gap_s": max(gaps) if gaps else None,
            "span_s": stamps[-1] - stamps[0] if stamps else None,
            "cpu_ms_per_tick": cpu_s * 1e3 / max(1, len(stamps))}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=5000)
    ap.add_argument("--ticks", type=int, default=20)
    ap.add_argument("--watch-ticks", type=int, default=10, help="0: no watch run")
    ap.add_argument("--nofile", type=int, default=1024, help="watch's descriptor limit")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    runtime = Path(tempfile.mkdtemp(prefix="gputui-many-jobs-"))
    fds: list[int] = []
    try:
        runtime.chmod(0o700)
        directory = runtime / "gputui" / "jobs"
        fds = _job_files().hold_many(directory, args.jobs, time.monotonic(), steps=128)
        report: dict[str, object] = {"jobs": args.jobs, "python": sys.version.split()[0],
                                     "read": read_cost(directory, args.ticks, args.jobs)}
        if args.watch_ticks:
            report["watch"] = watch_pace(runtime, args.watch_ticks, args.nofile)
    finally:
        for fd in fds:
            os.close(fd)
        shutil.rmtree(runtime, ignore_errors=True)
    if args.json:
        print(json.dumps(report))
    else:
        r = report["read"]
        assert isinstance(r, dict)
        print(f"{args.jobs} jobs: JobSource.read {r['wall_ms_median']:.1f} ms a tick "
              f"(max {r['wall_ms_max']:.1f}, CPU {r['cpu_ms_median']:.1f}; first "
              f"{r['first_ms']:.1f}), descriptors held between reads: {r['descriptors_held']}")
        w = report.get("watch")
        if isinstance(w, dict):
            pace = (f", first to last {w['span_s']:.2f} s (on pace: {w['ticks'] - 1}), "
                    f"largest gap {w['max_gap_s']:.2f} s" if w["max_gap_s"] is not None
                    else "")
            print(f"watch (ulimit -n {args.nofile}): exit {w['exit']}, {w['ticks']} ticks"
                  f"{pace}, CPU {w['cpu_ms_per_tick']:.0f} ms a tick"
                  + (f"; stderr: {w['stderr']}" if w["stderr"] else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
