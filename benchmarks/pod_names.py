"""What naming pods and sharing out energy cost the monitor (a benchmark, not a test).

Builds a fake node under a temporary directory: --pods pods in kubelet's log layout
(/var/log/pods/<ns>_<pod>_<uid>/<container>/ and the /var/log/containers links) and a
procfs with --procs GPU processes in those pods, then measures, in this process:
  first      the first process's names: /var/log/containers listed (the one-time cost)
  pods       the first container /var/log/containers does not name: /var/log/pods listed
             once as well (the other one-time cost)
  known      a process of a pod already listed (its cgroup read, a dict lookup)
  unknown    a container and pod neither directory names, both unchanged since listed
             (a stat each, no listing)
  energy     one tick of gputui.telemetry.energy over 8 GPUs with --procs processes
Each figure is the median of --repeats rounds (wall ms, and µs where small).

    python benchmarks/pod_names.py [--pods 10000] [--procs 8] [--repeats 5] [--json]

The VM's speed drifts: compare alternating runs, never one figure against another run's.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from gputui.telemetry.container import ContainerNames  # noqa: E402
from gputui.telemetry.energy import EnergyAccounts  # noqa: E402
from gputui.telemetry.model import GpuProcess  # noqa: E402
from tests.factories import gpu  # noqa: E402


def uid(i: int) -> str:
    return f"{i:08x}-0000-4000-8000-000000000000"


def cid(i: int) -> str:
    return f"{i:064x}"


def cgroup(i: int) -> str:
    return (f"0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod"
            f"{uid(i).replace('-', '_')}.slice/cri-containerd-{cid(i)}.scope\n")


def build(base: Path, pods: int, procs: int) -> tuple[Path, Path]:
    procfs, rootfs = base / "proc", base / "root"
    pods_dir, links = rootfs / "var/log/pods", rootfs / "var/log/containers"
    links.mkdir(parents=True)
    pods_dir.mkdir(parents=True)
    for i in range(pods):
        d = pods_dir / f"ns{i % 40}_pod-{i}_{uid(i)}" / "main"
        d.mkdir(parents=True)
        os.symlink(d / "0.log", links / f"pod-{i}_ns{i % 40}_main-{cid(i)}.log")
    for pid in range(1000, 1000 + procs + 1):
        (procfs / str(pid)).mkdir(parents=True)
        (procfs / str(pid) / "cgroup").write_text(cgroup(pid % pods))
    (procfs / "9999").mkdir()
    (procfs / "9999" / "cgroup").write_text(cgroup(pods + 5))  # a container no log names
    return procfs, rootfs


def timed(fn: object) -> float:
    t = time.perf_counter()
    fn()  # type: ignore[operator]
    return time.perf_counter() - t


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pods", type=int, default=10_000)
    ap.add_argument("--procs", type=int, default=8)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    rounds: dict[str, list[float]] = {"first_ms": [], "pods_ms": [], "known_us": [],
                                      "unknown_us": [], "energy_tick_us": []}
    with tempfile.TemporaryDirectory() as tmp:
        t = time.perf_counter()
        procfs, rootfs = build(Path(tmp), args.pods, args.procs)
        build_s = time.perf_counter() - t
        for _ in range(args.repeats):
            names = ContainerNames(procfs, rootfs)
            rounds["first_ms"].append(1e3 * timed(lambda n=names: n.get(1000, 1.0)))
            rounds["known_us"].append(1e6 * timed(lambda n=names: n.get(1001, 1.0)))
            rounds["pods_ms"].append(1e3 * timed(lambda n=names: n.get(9999, 1.0)))
            rounds["unknown_us"].append(1e6 * timed(
                lambda n=names: (n.kubelet.container(cid(args.pods + 7)),
                                 n.kubelet.pod(uid(args.pods + 7)))))
            assert names.kubelet.scans == 2, names.kubelet.scans  # each directory once
        gpus = [gpu(i, energy_j=1000.0) for i in range(8)]
        procs = [GpuProcess(i % 8, 1000 + i, 2**30, sm_util_pct=10 + i)
                 for i in range(args.procs)]
        acc = EnergyAccounts(idle_w=60.0)
        acc.update(gpus, procs, [], 0.0)
        for k in range(args.repeats):
            later = [gpu(i, energy_j=1000.0 + 300.0 * (k + 1)) for i in range(8)]
            rounds["energy_tick_us"].append(1e6 * timed(
                lambda g=later, n=k: acc.update(g, procs, [], float(n + 1))))
    out = {"pods": args.pods, "procs": args.procs, "build_s": round(build_s, 2),
           **{k: round(statistics.median(v), 2) for k, v in rounds.items()},
           **{f"{k}_all": [round(x, 2) for x in v] for k, v in rounds.items()}}
    if args.json:
        print(json.dumps(out))
    else:
        for k, v in out.items():
            print(f"{k:>18}: {v}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
