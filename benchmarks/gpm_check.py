#!/usr/bin/env python3
"""Do gputui's profiling figures say what the GPU is doing? GPM and per-process use under load.

Not a test: a maintainer runs it on an NVIDIA machine (Hopper or newer for GPM):

    python benchmarks/gpm_check.py [--seconds 8] [--json FILE]

For each of four known loads — idle, a bf16 matmul (tensor cores), an fp32 matmul with TF32
off (the FP32 pipes, no tensor cores) and a 1 GiB device copy (DRAM) — it starts the load
in a child process, waits until it is warmed up, takes `gputui snapshot --json` while it
runs, and prints what gputui reported for GPU 0: GPU util, SM active, SM occupancy, tensor,
DRAM, FP32 and FP16 pipe activity, PCIe bytes/s, the sub-second power range, HBM
temperature (against `nvidia-smi --query-gpu=temperature.memory`), the child's per-process
SM % / memory-controller %, and the verdict line the monitor would show. Each load has an
expectation (e.g. the bf16 matmul keeps the tensor pipes busy, the copy keeps DRAM busy
and the tensor pipes idle); the table says which held.

On a machine without CUDA it exits 1 with one line saying so.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

FIELDS = ("util_gpu_pct", "sm_active_pct", "sm_occupancy_pct", "tensor_active_pct",
          "dram_active_pct", "fp32_active_pct", "fp16_active_pct", "gpm_pcie_tx_bps",
          "gpm_pcie_rx_bps", "power_w_min", "power_w", "power_w_max", "clock_sm_mhz",
          "mem_temp_c")


def _load(name: str) -> Callable[[], None]:
    import torch

    if name == "idle":
        return lambda: time.sleep(0.05)
    if name in ("matmul-bf16", "matmul-fp32"):
        torch.backends.cuda.matmul.allow_tf32 = False  # fp32 must stay on the FP32 pipes
        dtype = torch.bfloat16 if name == "matmul-bf16" else torch.float32
        n = 8192 if name == "matmul-bf16" else 4096
        a = torch.randn(n, n, device="cuda", dtype=dtype)
        b = torch.randn(n, n, device="cuda", dtype=dtype)
        c = torch.empty(n, n, device="cuda", dtype=dtype)
        return lambda: torch.mm(a, b, out=c)
    if name == "copy":
        n = (1 << 30) // 4
        src = torch.ones(n, device="cuda")
        dst = torch.empty(n, device="cuda")
        return lambda: dst.copy_(src)
    raise SystemExit(f"gpm_check: unknown load {name}")


def run_load(name: str, seconds: float) -> int:
    """The child: warm up, say "ready", then keep the GPU busy for `seconds`."""
    import torch

    step = _load(name)
    for _ in range(5):
        step()
    torch.cuda.synchronize()
    print("ready", flush=True)
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        for _ in range(10):
            step()
        torch.cuda.synchronize()  # bounds the queue so the load ends on time
    return 0


@dataclass
class Expect:
    text: str
    holds: Callable[[dict[str, Any]], bool | None]


def _ge(field: str, v: float) -> Callable[[dict[str, Any]], bool | None]:
    return lambda g: None if g.get(field) is None else g[field] >= v


def _lt(field: str, v: float) -> Callable[[dict[str, Any]], bool | None]:
    return lambda g: None if g.get(field) is None else g[field] < v


EXPECT: dict[str, list[Expect]] = {
    "idle": [Expect("SM active < 5 %", _lt("sm_active_pct", 5))],
    "matmul-bf16": [Expect("SM active ≥ 80 %", _ge("sm_active_pct", 80)),
                    Expect("tensor active ≥ 40 %", _ge("tensor_active_pct", 40))],
    "matmul-fp32": [Expect("tensor active < 5 % (TF32 off)", _lt("tensor_active_pct", 5)),
                    Expect("FP32 active ≥ 20 %", _ge("fp32_active_pct", 20))],
    "copy": [Expect("DRAM active ≥ 50 %", _ge("dram_active_pct", 50)),
             Expect("tensor active < 5 %", _lt("tensor_active_pct", 5))],
}


def smi_mem_temp() -> str:
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return "no nvidia-smi"
    out = subprocess.run([smi, "-i", "0", "--query-gpu=temperature.memory",
                          "--format=csv,noheader,nounits"], capture_output=True, text=True,
                         timeout=30, check=False)
    return out.stdout.strip() or out.stderr.strip()[:60]


def measure(name: str, seconds: float) -> dict[str, Any]:
    child = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--load", name,
                              "--seconds", str(seconds)], stdout=subprocess.PIPE, text=True)
    try:
        line = child.stdout.readline() if child.stdout else ""
        if line.strip() != "ready":
            raise RuntimeError(f"the {name} load did not start (exit {child.wait()})")
        time.sleep(1.5)  # past the ramp: clocks and counters settle
        snap = subprocess.run([sys.executable, "-m", "gputui", "snapshot", "--json"],
                              capture_output=True, text=True, timeout=60, check=False)
        smi_temp = smi_mem_temp()
    finally:
        child.wait(timeout=seconds + 60)
    if snap.returncode != 0:
        raise RuntimeError(f"gputui snapshot exited {snap.returncode}: {snap.stderr[-200:]}")
    doc = json.loads(snap.stdout)
    gpu = (doc.get("gpus") or [{}])[0]
    procs = [p for p in doc.get("processes") or [] if p.get("pid") == child.pid]
    from gputui.telemetry.gpm import verdict

    return {
        "load": name,
        "gpu": {f: gpu.get(f) for f in FIELDS},
        "process": procs[0] if procs else None,
        "smi_mem_temp": smi_temp,
        "gpm_note": gpu.get("gpm_note"),
        "verdict": verdict(gpu.get("util_gpu_pct"), gpu.get("sm_active_pct"),
                           gpu.get("tensor_active_pct"), gpu.get("fp32_active_pct")),
        "checks": [(e.text, e.holds(gpu)) for e in EXPECT[name]],
    }


def _f(v: Any) -> str:
    if v is None:
        return "n/a"
    if isinstance(v, float):
        return f"{v:.3g}" if abs(v) >= 1e6 else f"{v:.1f}"
    return str(v)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=8.0, help="length of each load (8)")
    ap.add_argument("--json", metavar="FILE", help="also write the readings as JSON")
    ap.add_argument("--load", choices=sorted(EXPECT), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.load:
        return run_load(args.load, args.seconds)

    from gpu_check import check_cuda  # same probe and same one-line message

    gpu_name = check_cuda()
    if gpu_name is None:
        return 1
    rows = []
    for name in EXPECT:
        try:
            rows.append(measure(name, args.seconds))
        except (RuntimeError, subprocess.TimeoutExpired, ValueError) as e:
            rows.append({"load": name, "error": str(e)})
    print(f"\n{gpu_name}: gputui snapshot under known loads (GPU 0)")
    print(f"{'field':<20}" + "".join(f"{r['load']:>14}" for r in rows))
    for f in FIELDS:
        print(f"{f:<20}" + "".join(f"{_f(r.get('gpu', {}).get(f)):>14}" for r in rows))
    print(f"{'nvidia-smi mem temp':<20}" + "".join(f"{r.get('smi_mem_temp', ''):>14}"
                                                    for r in rows))
    for key in ("sm_util_pct", "mem_util_pct"):
        print(f"{'process ' + key:<20}" + "".join(
            f"{_f((r.get('process') or {}).get(key)) if r.get('process') else 'absent':>14}"
            for r in rows))
    for r in rows:
        if "error" in r:
            print(f"  {r['load']}: FAILED: {r['error']}")
            continue
        checks = ", ".join(f"{t}: {'ok' if ok else 'n/a' if ok is None else 'NO'}"
                           for t, ok in r["checks"])
        print(f"  {r['load']}: {checks}; verdict: {r['verdict'] or '—'}"
              + (f"; note: {r['gpm_note']}" if r.get("gpm_note") else ""))
    if args.json:
        tmp = args.json + ".tmp"
        with open(tmp, "w") as fh:
            json.dump({"gpu": gpu_name, "rows": rows}, fh, indent=2)
        os.replace(tmp, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
