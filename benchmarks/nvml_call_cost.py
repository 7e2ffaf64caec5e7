"""CPU cost per GPU and tick of each optional NVML read: GPM, samples, memory temperature,
encoder/decoder, row remapping (a benchmark, not a test).

Runs NvmlSource in-process against the fake libnvidia-ml.so.1 on one Hopper-like GPU
(GPM, NVLink, memory sensor, two processes with utilisation samples), the fake clock
moving 200 ms per read so that every sampled read has new samples, and reports the
process CPU time per call of each read and of a whole per-GPU tick with each field set.

    python benchmarks/nvml_call_cost.py [--reads 2000]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import pynvml  # noqa: E402

from gputui.telemetry.nvml import (  # noqa: E402
    ALL_FIELDS,
    FI_DEV_MEMORY_TEMP,
    MONITOR_FIELDS,
    NvmlSource,
)
from tests.fakenvml.harness import FakeNvml, build_library  # noqa: E402

SCENARIO = {"device_count": 1, "gpu.0.gpm_supported": 1, "gpu.0.nvlink": 1,
            "gpu.0.mem_temp_c": 60, "gpu.0.temp_mem_max_c": 95,
            "gpu.0.processes": {1: 2**30, 2: 2**29},
            "gpu.0.process_util": "1:50:20:0:0,2:10:5:0:0"}


def per_call_us(fake: FakeNvml, fn: Callable[[], object], reads: int) -> float:
    t = [1.0]
    c0 = time.process_time()
    for _ in range(reads):
        t[0] += 0.2
        fake.set_time(t[0])
        fn()
    return (time.process_time() - c0) / reads * 1e6


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reads", type=int, default=2000)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        fake = FakeNvml(build_library(), Path(tmp))
        try:
            fake.use(SCENARIO, frozen_time=1.0)
            base = per_call_us(fake, lambda: None, args.reads)  # moving the fake clock
            print(f"one Hopper-like fake GPU, {args.reads} reads; µs of CPU per call "
                  f"(fake clock step {base:.1f} µs subtracted)")
            for label, fields in (("core fields only", frozenset()),
                                  ("live monitor (MONITOR_FIELDS)", MONITOR_FIELDS),
                                  ("watch/snapshot (ALL_FIELDS)", ALL_FIELDS)):
                src = NvmlSource(fields=fields - {"events"})
                src.open()
                dev = src._devs[0]
                tick = per_call_us(fake, lambda s=src, d=dev: s._read_fields(d, False),
                                   args.reads)
                procs = per_call_us(fake, lambda s=src, d=dev: s._read_processes(d), args.reads)
                print(f"  {label:<32} per-GPU tick {tick - base:6.1f}   "
                      f"process list {procs - base:6.1f}")
                src.close()
            src = NvmlSource(fields=ALL_FIELDS - {"events"})
            src.open()
            dev = src._devs[0]
            reads: dict[str, Callable[[], object]] = {
                "GPM sample + metrics (nvmlGpmSampleGet, nvmlGpmMetricsGet)":
                    lambda: src._read_gpm(dev),
                "power samples (nvmlDeviceGetSamples, two calls)":
                    lambda: src._read_samples(dev, pynvml.NVML_TOTAL_POWER_SAMPLES,
                                              "power_w", {}),
                "memory temperature (nvmlDeviceGetFieldValues)":
                    lambda: src._field_value(dev, "mem_temp", FI_DEV_MEMORY_TEMP),
                "encoder utilization": lambda: pynvml.nvmlDeviceGetEncoderUtilization(
                    dev.handle),
                "remapped rows (slow tick)": lambda: pynvml.nvmlDeviceGetRemappedRows(
                    dev.handle),
                "process utilization (two calls, every 3 s)":
                    lambda: src._process_util(dev),
            }
            for label, fn in reads.items():
                print(f"  {label:<60} {per_call_us(fake, fn, args.reads) - base:6.1f}")
            src.close()
        finally:
            fake.close()


if __name__ == "__main__":
    main()
