"""NVML calls and CPU time per sampler tick for 8 fake GPUs at 1 Hz (a benchmark, not a test).

Runs the real NvmlSource + Sampler in-process against the fake libnvidia-ml.so.1
(built from tests/fakenvml/fakenvml.c with gcc), advancing the fake's clock by one
second per tick, and reports per-tick NVML calls (total and by function) and the
sampler's CPU time per tick, for the field sets the TUI and `watch` use.

    python benchmarks/nvml_tick.py [--ticks 120]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from gputui.telemetry.nvml import ALL_FIELDS, MONITOR_FIELDS  # noqa: E402
from gputui.telemetry.sampler import Sampler  # noqa: E402
from tests.fakenvml.harness import FakeNvml, build_library, scenario_path  # noqa: E402

FIELD_SETS = {
    "tui (fields it shows)": MONITOR_FIELDS,
    "tui --record (no PCIe throughput)": ALL_FIELDS - {"pcie_throughput"},
    "watch/snapshot (all fields)": ALL_FIELDS,
}


def measure(fake: FakeNvml, fields: frozenset[str], ticks: int) -> dict[str, object]:
    fake.use(scenario_path("eight_gpus"), frozen_time=0.0)
    sampler = Sampler.open(interval=1.0, fields=fields)
    assert sampler.nvml is not None, sampler.nvml_error
    fake.reset_counts()
    cpu: list[float] = []
    for t in range(ticks):
        fake.set_time(float(t))
        c0 = time.process_time()
        sampler.tick()
        cpu.append(time.process_time() - c0)
    calls = fake.call_count()
    by_fn = {}
    for name in ("nvmlDeviceGetUtilizationRates", "nvmlDeviceGetPcieThroughput",
                 "nvmlDeviceGetComputeRunningProcesses_v3", "nvmlDeviceGetViolationStatus"):
        by_fn[name] = fake.count_for(name) / ticks
    sampler.close()
    return {"calls_per_tick": calls / ticks, "cpu_ms_median": statistics.median(cpu) * 1e3,
            "cpu_ms_mean": statistics.mean(cpu) * 1e3, "by_fn": by_fn}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ticks", type=int, default=120)
    args = ap.parse_args()
    lib = build_library()
    with tempfile.TemporaryDirectory() as tmp:
        fake = FakeNvml(lib, Path(tmp))
        try:
            print(f"8 fake GPUs, {args.ticks} ticks at 1 Hz (fake clock), in-process")
            print(f"{'field set':<34} {'NVML calls/tick':>16} {'CPU ms/tick (median)':>21}")
            for label, fields in FIELD_SETS.items():
                r = measure(fake, frozenset(fields), args.ticks)
                print(f"{label:<34} {r['calls_per_tick']:>16.1f} {r['cpu_ms_median']:>21.2f}")
                for fn, n in r["by_fn"].items():  # type: ignore[union-attr]
                    print(f"    {fn:<44} {n:6.2f}/tick")
        finally:
            fake.close()


if __name__ == "__main__":
    main()
