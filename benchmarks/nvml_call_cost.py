"""CPU cost per GPU and tick of each optional NVML read: GPM, samples, memory temperature,
encoder/decoder, row remapping (a benchmark, not a test).

Runs NvmlSource in-process against the fake libnvidia-ml.so.1 on one Hopper-like GPU
(GPM, NVLink, memory sensor, two processes with utilisation samples), the fake clock
moving 200 ms per read so that every sampled read has new samples, and reports the
process CPU time per call of each read and of a whole per-GPU tick with each field set.
First it measures the fake library's own cost per call (its lock, call counter and
clock: what a monitor measured against the fake pays and a real driver does not), as
the time of a direct ctypes call into it less that of a ctypes call into libc's `labs`.

    python benchmarks/nvml_call_cost.py [--reads 2000]
"""

from __future__ import annotations

import argparse
import ctypes
import ctypes.util
import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if not os.environ.get("PYTHONPATH"):  # else the tree PYTHONPATH names (a before/after run)
    sys.path.insert(0, str(ROOT))

import pynvml  # noqa: E402

from gputui.telemetry.nvml import (  # noqa: E402
    ALL_FIELDS,
    MONITOR_FIELDS,
    NvmlSource,
    counters,
)
from gputui.telemetry.nvml.processes import ProcessReader  # noqa: E402
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


def fake_call_ns(fake: FakeNvml, calls: int = 200_000) -> float:
    """ns of CPU the fake library itself spends per call (see the module's docstring)."""
    lib = ctypes.CDLL(str(fake.lib_info.inproc_path))
    handle = ctypes.c_void_p()
    if lib.nvmlDeviceGetHandleByIndex_v2(0, ctypes.byref(handle)) != 0:
        raise RuntimeError("the fake library has no GPU 0 open")
    temp = ctypes.c_uint()
    read = lib.nvmlDeviceGetTemperature
    labs = ctypes.CDLL(ctypes.util.find_library("c")).labs
    args = (handle, 0, ctypes.byref(temp))

    def per_call(fn: Callable[..., object], *a: object) -> float:
        c0 = time.process_time()
        for _ in range(calls):
            fn(*a)
        return (time.process_time() - c0) / calls * 1e9

    return min(per_call(read, *args) - per_call(labs, 3) for _ in range(3))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reads", type=int, default=2000)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        fake = FakeNvml(build_library(), Path(tmp))
        try:
            fake.use(SCENARIO, frozen_time=1.0)
            pynvml.nvmlInit()
            ns = fake_call_ns(fake)
            pynvml.nvmlShutdown()
            print(f"the fake library's own cost: {ns:.0f} ns of CPU per call "
                  f"({ns * 500 / 1e3:.0f} µs a second at 500 calls/s)")
            base = per_call_us(fake, lambda: None, args.reads)  # moving the fake clock
            print(f"one Hopper-like fake GPU, {args.reads} reads; µs of CPU per call "
                  f"(fake clock step {base:.1f} µs subtracted)")
            for label, fields in (("core fields only", frozenset()),
                                  ("live monitor (MONITOR_FIELDS)", MONITOR_FIELDS),
                                  ("watch/snapshot (ALL_FIELDS)", ALL_FIELDS)):
                src = NvmlSource(fields=fields - {"events"})
                src.open()
                dev = src.readers[0]
                tick = per_call_us(fake, lambda d=dev: d.read(slow=False, processes=False),
                                   args.reads)
                with_procs = per_call_us(
                    fake, lambda d=dev: d.read(slow=False, processes=True), args.reads)
                print(f"  {label:<32} per-GPU tick {tick - base:6.1f}   "
                      f"process list {with_procs - tick:6.1f}")
                src.close()
            src = NvmlSource(fields=ALL_FIELDS - {"events"})
            src.open()
            dev = src.readers[0]
            q, h = dev.q, dev.handle
            power = counters.SampleRange(pynvml.NVML_TOTAL_POWER_SAMPLES, "samples_power")
            procs = ProcessReader(0, with_util=True)
            reads: dict[str, Callable[[], object]] = {
                "GPM sample + metrics (nvmlGpmSampleGet, nvmlGpmMetricsGet)":
                    dev._read_gpm,
                "power samples (nvmlDeviceGetSamples, two calls)": lambda: power.read(q, h),
                "memory temperature (nvmlDeviceGetFieldValues)":
                    lambda: counters.mem_temp_c(q, h),
                "encoder utilization": lambda: q(pynvml.nvmlDeviceGetEncoderUtilization, h),
                "remapped rows (slow tick)": lambda: q(pynvml.nvmlDeviceGetRemappedRows, h),
                "process list + utilization (every 3 s)": lambda: procs.read(q, h),
            }
            for label, fn in reads.items():
                print(f"  {label:<60} {per_call_us(fake, fn, args.reads) - base:6.1f}")
            src.close()
        finally:
            fake.close()


if __name__ == "__main__":
    main()
