"""NVML calls and CPU time per sampler tick for 8 fake GPUs at 1 Hz (a benchmark, not a test).

Runs the real NvmlSource + Sampler in-process against the fake libnvidia-ml.so.1
(built from tests/fakenvml/fakenvml.c with gcc), advancing the fake's clock by one
second per tick, and reports per-tick NVML calls (total and by function) and the
sampler's CPU time per tick (the mean over the ticks: every 3rd reads the process lists,
every 10th the slow counters), for the field sets the TUI and `watch` use. Each GPU runs
one process this host can see (a `sleep`), so the host-side process reads are counted;
the "tui" sets evaluate the alert rules and build a frame for the UI, as the monitor does.

    python benchmarks/nvml_tick.py [--ticks 120] [--rounds 5] [--only SUBSTRING]

With PYTHONPATH set, the gputui found there is measured (e.g. PYTHONPATH=/other/tree for a
before/after comparison); instruction counts per tick come from running one set under
callgrind twice, e.g. `--only "tui, GPM GPUs" --rounds 1 --ticks 30` and `--ticks 120`
(the live monitor with everything on): (difference) / 90.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if not os.environ.get("PYTHONPATH"):  # else the tree PYTHONPATH names (a before/after run)
    sys.path.insert(0, str(ROOT))

from gputui.telemetry.nvml import ALL_FIELDS, MONITOR_FIELDS, NvmlSource  # noqa: E402
from gputui.telemetry.sampler import Sampler  # noqa: E402
from tests.fakenvml.harness import (  # noqa: E402
    FakeNvml,
    build_library,
    derive_scenario,
    scenario_path,
)

FIELD_SETS = {
    "tui (fields it shows)": MONITOR_FIELDS,
    "tui --record (no PCIe throughput)": ALL_FIELDS - {"pcie_throughput"},
    "watch/snapshot (all fields)": ALL_FIELDS,
    # The same sets on 8 Hopper GPUs whose GPM counters, memory sensor, encoder/decoder,
    # PCIe replay and row-remap reads all answer: what those calls add.
    "tui, GPM GPUs": MONITOR_FIELDS,
    # The same while the GPU detail screen is open: it asks for per-link NVLink rates.
    "tui, GPM GPUs, detail open": MONITOR_FIELDS | {"link_rates"},
    "watch/snapshot, GPM GPUs": ALL_FIELDS,
    # 8 Hopper GPUs in MIG mode, each split into 7 MIG devices (1g.10gb, one process
    # each) with GPM: the MIG reads' cost. MIG off costs one
    # nvmlDeviceGetMigMode per GPU per open, nothing per tick.
    "tui, MIG GPUs (8 x 7)": MONITOR_FIELDS,
    "watch/snapshot, MIG GPUs (8 x 7)": ALL_FIELDS,
}
# Per-device extras for the "GPM GPUs" sets.
GPM_KEYS = {k: v for i in range(8) for k, v in (
    (f"gpu.{i}.gpm_supported", 1), (f"gpu.{i}.nvlink", 1), (f"gpu.{i}.nvlink_links", 18),
    (f"gpu.{i}.mem_temp_c", 60),
    (f"gpu.{i}.temp_mem_max_c", 95))}


def _mig_keys() -> dict[str, object]:
    keys: dict[str, object] = dict(GPM_KEYS)
    for i in range(8):
        keys[f"gpu.{i}.mig_mode"] = 1
        for m in range(7):
            pre = f"gpu.{i}.mig.{m}"
            keys.update({f"{pre}.profile": "1g.10gb", f"{pre}.gpu_instance_id": 7 + m,
                         f"{pre}.mem_used": 1 << 30, f"{pre}.gpm_sm_util": 40,
                         f"{pre}.processes": f"{1000 + 10 * i + m}:{1 << 30}"})
    return keys


MIG_KEYS = _mig_keys()


WARMUP_TICKS = 10


def measure(fake: FakeNvml, label: str, fields: frozenset[str], ticks: int,
            scenario: Path | None = None) -> dict[str, object]:
    fake.use(scenario or scenario_path("eight_gpus"), frozen_time=0.0)
    src = NvmlSource(process_every=3, slow_every=10, fields=fields)
    now = [0.0]
    # GPM takes a new pair only MIN_SAMPLE_GAP_S after the last: its clock is the fake's.
    src.gpm_clock = lambda: now[0]  # type: ignore[method-assign]
    src.open_system()
    # The monitor's sampler also evaluates the alert rules and builds a Frame for the UI
    # each tick (ui/app.py): the "tui" sets do the same, handing the frame to a no-op.
    tui = "tui" in label
    sampler = Sampler(interval=1.0, nvml=src, alerts=tui)
    if tui:
        sampler.subscribe_frames(lambda frame: None)
    # Not measured: the first ticks open the devices (static facts, GPM buffers) and
    # look the processes up, once per session.
    for t in range(WARMUP_TICKS):
        fake.set_time(float(t))
        now[0] = float(t)
        sampler.tick()
    fake.reset_counts()
    cpu: list[float] = []
    for t in range(WARMUP_TICKS, WARMUP_TICKS + ticks):
        fake.set_time(float(t))
        now[0] = float(t)
        c0 = time.process_time()
        sampler.tick()
        cpu.append(time.process_time() - c0)
    calls = fake.call_count()
    by_fn = {}
    for name in ("nvmlDeviceGetUtilizationRates", "nvmlDeviceGetPcieThroughput",
                 "nvmlDeviceGetComputeRunningProcesses_v3", "nvmlDeviceGetViolationStatus",
                 "nvmlGpmSampleGet", "nvmlGpmMetricsGet", "nvmlDeviceGetFieldValues",
                 "nvmlDeviceGetEncoderUtilization", "nvmlDeviceGetRemappedRows",
                 "nvmlDeviceGetMigMode", "nvmlDeviceGetMigDeviceHandleByIndex",
                 "nvmlDeviceGetMemoryInfo", "nvmlGpmMigSampleGet"):
        by_fn[name] = fake.count_for(name) / ticks
    sampler.close()
    return {"calls_per_tick": calls / ticks, "cpu_ms_median": statistics.median(cpu) * 1e3,
            "cpu_ms_mean": statistics.mean(cpu) * 1e3, "by_fn": by_fn}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ticks", type=int, default=120)
    ap.add_argument("--rounds", type=int, default=5,
                    help="rounds over all field sets, one after the other (default 5): the "
                         "figure is the median of the rounds' means, because a shared "
                         "VM's speed drifts by tens of percent between runs")
    ap.add_argument("--calls", action="store_true", help="also list NVML calls by function")
    ap.add_argument("--only", default="", help="only the field set with this label")
    args = ap.parse_args()
    lib = build_library()
    sleepers: list[subprocess.Popen[bytes]] = []
    with tempfile.TemporaryDirectory() as tmp:
        fake = FakeNvml(lib, Path(tmp))
        try:
            print(f"8 fake GPUs, {args.ticks} ticks at 1 Hz (fake clock), in-process, "
                  f"{args.rounds} rounds")
            print(f"{'field set':<34} {'NVML calls/tick':>16} {'CPU ms/tick':>12} "
                  f"{'rounds (min-max)':>17}")
            # One training process per GPU that this host can see, as on a real box: the
            # sampler reads its user, command, CPU % and RSS from /proc.
            sleepers = [subprocess.Popen(["sleep", "3600"]) for _ in range(8)]
            procs = {f"gpu.{i}.processes": {p.pid: (58 + i) * 10**9}
                     for i, p in enumerate(sleepers)}
            plain_scenario = derive_scenario("eight_gpus", procs, Path(tmp) / "plain8.conf")
            gpm_scenario = derive_scenario("eight_gpus", {**GPM_KEYS, **procs},
                                           Path(tmp) / "gpm8.conf")
            mig_scenario = derive_scenario("eight_gpus", MIG_KEYS, Path(tmp) / "mig8.conf")
            results: dict[str, list[dict[str, object]]] = {
                label: [] for label in FIELD_SETS if not args.only or label == args.only}
            for _ in range(args.rounds):
                for label, fields in FIELD_SETS.items():
                    if args.only and label != args.only:
                        continue
                    scenario = (gpm_scenario if "GPM" in label
                                else mig_scenario if "MIG" in label else plain_scenario)
                    results[label].append(measure(fake, label, frozenset(fields), args.ticks,
                                                  scenario))
            for label, rounds in results.items():
                # Mean CPU per tick: the process ticks (every 3rd) and the slow ticks
                # (every 10th) cost more, and they are part of what the sampler costs.
                medians = [float(r["cpu_ms_mean"]) for r in rounds]  # type: ignore[arg-type]
                calls = float(rounds[0]["calls_per_tick"])  # type: ignore[arg-type]
                print(f"{label:<34} {calls:>16.1f} {statistics.median(medians):>12.2f} "
                      f"{min(medians):>8.2f}-{max(medians):.2f}")
                if args.calls:
                    for fn, n in rounds[0]["by_fn"].items():  # type: ignore[union-attr]
                        print(f"    {fn:<44} {n:6.2f}/tick")
        finally:
            for p in sleepers:
                p.kill()
            fake.close()


if __name__ == "__main__":
    main()
