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
    # PCIe replay and row-remap reads all answer (#15): what those calls add.
    "tui, GPM GPUs": MONITOR_FIELDS,
    "watch/snapshot, GPM GPUs": ALL_FIELDS,
}
# Per-device extras for the "GPM GPUs" sets.
GPM_KEYS = {k: v for i in range(8) for k, v in (
    (f"gpu.{i}.gpm_supported", 1), (f"gpu.{i}.nvlink", 1), (f"gpu.{i}.mem_temp_c", 60),
    (f"gpu.{i}.temp_mem_max_c", 95))}


def measure(fake: FakeNvml, fields: frozenset[str], ticks: int,
            scenario: Path | None = None) -> dict[str, object]:
    fake.use(scenario or scenario_path("eight_gpus"), frozen_time=0.0)
    src = NvmlSource(process_every=3, slow_every=10, fields=fields)
    src.open_system()
    sampler = Sampler(interval=1.0, nvml=src)
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
                 "nvmlDeviceGetComputeRunningProcesses_v3", "nvmlDeviceGetViolationStatus",
                 "nvmlGpmSampleGet", "nvmlGpmMetricsGet", "nvmlDeviceGetFieldValues",
                 "nvmlDeviceGetEncoderUtilization", "nvmlDeviceGetRemappedRows"):
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
            gpm_scenario = derive_scenario("eight_gpus", GPM_KEYS, Path(tmp) / "gpm8.conf")
            for label, fields in FIELD_SETS.items():
                r = measure(fake, frozenset(fields), args.ticks,
                            gpm_scenario if "GPM" in label else None)
                print(f"{label:<34} {r['calls_per_tick']:>16.1f} {r['cpu_ms_median']:>21.2f}")
                for fn, n in r["by_fn"].items():  # type: ignore[union-attr]
                    print(f"    {fn:<44} {n:6.2f}/tick")
        finally:
            fake.close()


if __name__ == "__main__":
    main()
