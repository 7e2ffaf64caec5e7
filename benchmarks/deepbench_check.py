"""Check `gputui bench run deepbench` against a bare torch loop, shape by shape (a
measurement script, not a test: run it where a GPU is lent).

    python benchmarks/deepbench_check.py [--device cuda] [--op gemm] [--duration 0.5]

Runs the deepbench kind (quick shapes) through the real CLI with --json, then times each
GEMM row's product again with a plain loop of `torch.mm` between two CUDA events (the
operands laid out as the row says), and prints both medians and their ratio. On the CPU
the kind's scaled shapes (`ran`) are what the bare loop times.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from typing import Any


def bare_us(m: int, n: int, k: int, a_t: bool, b_t: bool, dtype: str, device: str,
            duration_s: float) -> float:
    import torch

    dt = getattr(torch, {"fp32": "float32", "tf32": "float32", "fp16": "float16",
                         "bf16": "bfloat16"}[dtype])
    torch.backends.cuda.matmul.allow_tf32 = dtype == "tf32"
    a = torch.randn(k, m, device=device, dtype=dt).t() if a_t else torch.randn(
        m, k, device=device, dtype=dt)
    b = torch.randn(n, k, device=device, dtype=dt).t() if b_t else torch.randn(
        k, n, device=device, dtype=dt)
    c = torch.empty(m, n, device=device, dtype=dt)
    for _ in range(3):
        torch.mm(a, b, out=c)
    times: list[float] = []
    t_end = time.perf_counter() + duration_s
    while time.perf_counter() < t_end or len(times) < 5:
        if device.startswith("cuda"):
            start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(
                enable_timing=True)
            start.record()
            torch.mm(a, b, out=c)
            stop.record()
            stop.synchronize()
            times.append(start.elapsed_time(stop) * 1000.0)
        else:
            t0 = time.perf_counter()
            torch.mm(a, b, out=c)
            times.append((time.perf_counter() - t0) * 1e6)
    return sorted(times)[len(times) // 2]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default="cuda")
    p.add_argument("--op", default="gemm")
    p.add_argument("--duration", type=float, default=0.5)
    args = p.parse_args(argv)
    cmd = [sys.executable, "-m", "gputui", "bench", "run", "deepbench", "--device",
           args.device, "--op", args.op, "--json"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    if proc.returncode != 0:
        print(proc.stderr[-2000:], file=sys.stderr)
        return 1
    doc: dict[str, Any] = json.loads(proc.stdout)
    precision = doc["precision"]
    print(f"deepbench on {doc.get('device_name')} ({precision}), headline "
          f"{doc['throughput']['value']:.3g} TFLOP/s, took {doc.get('duration_s') or 0:.1f} s")
    print(f"{'op':9} {'shape':28} {'median µs':>10} {'TFLOP/s':>9} {'% peak':>7} "
          f"{'bare µs':>9} {'ratio':>6}")
    for row in doc["extra"]["deepbench_rows"]:
        bare = None
        if row["op"] == "gemm" and row["median_us"]:
            m, n, k, a_t, b_t = row["ran"].split(",")
            bare = bare_us(int(m), int(n), int(k), a_t == "t", b_t == "t", precision,
                           args.device, args.duration)
        figure = row["tflops"] if row["op"] != "allreduce" else row["busbw_gbps"]
        cells = [f"{row['op']:9}", f"{row['shape']:28}",
                 f"{row['median_us'] or 0:10.1f}", f"{figure or 0:9.3g}",
                 f"{row['pct_of_peak'] or 0:7.1f}",
                 f"{bare:9.1f}" if bare else f"{'':9}",
                 f"{row['median_us'] / bare:6.2f}" if bare else (row["note"] or "")]
        print(" ".join(cells))
    return 0


if __name__ == "__main__":
    sys.exit(main())
