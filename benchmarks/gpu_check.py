#!/usr/bin/env python3
"""Does gputui measure what a careful hand-written benchmark measures on this GPU?

Not a test: a maintainer runs it on an NVIDIA machine, in one command:

    python benchmarks/gpu_check.py [--rounds N] [--budget S] [--json FILE]
    python benchmarks/gpu_check.py --plan     # what it would run and how long (no GPU needed)

By default it fits one command of at most 8 minutes on one GPU: one round per workload, runs
of seconds (sized for it), the LLM rows first, and a budget (--budget, 480 s) it never runs
past — a run that would not fit is skipped and named. It prints its planned time first, and
each figure as it comes, so a command cut short still leaves its numbers.

It runs gputui's matmul (bf16, 8192³), membw (device copy) and cnn-train (resnet50, AMP =
fp16 autocast with loss scaling, batch 256, channels-last, device-resident data), each side by
side with a bare loop written here (torch.mm timed with CUDA events; a tensor copy; a plain
resnet50 AMP training loop), in alternating A/B rounds, every run in a fresh process. The
LLM rows (bare loops in benchmarks/bare_lm.py): lm-train GPT-2 bf16 batch 12 against a plain
nanoGPT loop (tokens/s, MFU), lm-infer Llama-2-7B bf16 batch 1 eager decode tokens/s against
a plain static-KV greedy loop, and attention (bf16, head dim 128, sequence 4k, 4 sequences,
16 heads, no mask, forward) against SDPA timed directly. Then it
compares `gputui snapshot --json` with `nvidia-smi --query-gpu=…` for the same fields. It
prints one table: gputui vs bare (median of rounds, ratio), % of the GPU's dense peak, and the
ratio to a published reference where one matches.

On a machine without CUDA it exits 1 with one line saying so.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from typing import Any

MATMUL_N = 8192
COPY_BYTES = 1 << 30  # 1 GiB per array: far beyond any L2
CNN_BATCH = 256


# ----------------------------------------------------------------------------- bare loops
# Each runs in its own process (`--bare NAME`) and prints one JSON object on stdout.

def _timed(fn: Any, duration_s: float, warmup: int) -> tuple[int, float]:
    """(iterations, seconds) of `fn` run back to back for about `duration_s`, CUDA events."""
    import torch

    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    # Calibrate on a short burst, then time one long run: the long run is what counts, and
    # it lasts seconds so that it sees the clocks the GPU holds under its power limit.
    start.record()
    for _ in range(10):
        fn()
    end.record()
    end.synchronize()
    per_ms = max(start.elapsed_time(end) / 10, 1e-3)
    iters = max(10, int(duration_s * 1000 / per_ms))
    start.record()
    for _ in range(iters):
        fn()
    end.record()
    end.synchronize()
    return iters, start.elapsed_time(end) / 1000


def bare_matmul(duration_s: float) -> dict[str, Any]:
    import torch

    n = MATMUL_N
    a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    c = torch.empty(n, n, device="cuda", dtype=torch.bfloat16)
    iters, secs = _timed(lambda: torch.mm(a, b, out=c), duration_s, warmup=20)
    return {"value": 2 * n**3 * iters / secs / 1e12, "unit": "TFLOP/s", "iters": iters,
            "timed_s": secs}


def bare_copy(duration_s: float) -> dict[str, Any]:
    import torch

    n = COPY_BYTES // 4
    a = torch.ones(n, device="cuda", dtype=torch.float32)
    b = torch.empty(n, device="cuda", dtype=torch.float32)
    iters, secs = _timed(lambda: b.copy_(a), duration_s, warmup=20)
    # Bytes read plus bytes written, as STREAM and gputui count a copy.
    return {"value": 2 * COPY_BYTES * iters / secs / 1e9, "unit": "GB/s", "iters": iters,
            "timed_s": secs}


def bare_cnn_train(duration_s: float) -> dict[str, Any]:
    import torch
    import torchvision

    torch.backends.cudnn.benchmark = True
    model = torchvision.models.resnet50().cuda().to(memory_format=torch.channels_last)
    model.train()
    x = torch.randn(CNN_BATCH, 3, 224, 224, device="cuda").to(memory_format=torch.channels_last)
    y = torch.randint(0, 1000, (CNN_BATCH,), device="cuda")
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    loss_fn = torch.nn.CrossEntropyLoss()
    scaler = torch.amp.GradScaler("cuda")

    def step() -> None:
        with torch.autocast("cuda", dtype=torch.float16):
            loss = loss_fn(model(x), y)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        opt.zero_grad(set_to_none=True)

    iters, secs = _timed(step, duration_s, warmup=30)
    return {"value": CNN_BATCH * iters / secs, "unit": "images/s", "iters": iters,
            "timed_s": secs}


# What one run costs besides its timed seconds, from the 2026 H200 plan: a fresh Python,
# torch's import and a CUDA context (STARTUP_S, gputui's side starts a worker process too)
# and each workload's own set-up — building the model (Llama-2-7B: 13.5 GB of random
# weights), warm-up steps, cuDNN's autotuning, gputui's FLOP count after the timed loop.
STARTUP_S = 15.0
SETUP_S = {"lm-infer": 25.0, "lm-train": 15.0, "attention": 5.0, "matmul": 5.0,
           "membw": 5.0, "cnn-train": 20.0}
# Timed points of one gputui run (each --duration or --train-duration long): matmul's
# dtypes on a Hopper GPU, membw's six kernels, attention's causal × pass at one shape.
GPUTUI_POINTS = {"matmul": 4, "membw": 6, "attention": 4}
SNAPSHOT_S = 15.0

LM_BATCH = 12
DECODE = {"prompt": 128, "new": 128}
ATTN = {"batch": 4, "heads": 16, "seq": 4096, "head_dim": 128}
ATTN_POINT = f"d{ATTN['head_dim']} s{ATTN['seq']} full fwd"


def _bare_lm() -> Any:
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import bare_lm

    return bare_lm


def bare_lm_train(duration_s: float) -> dict[str, Any]:
    lm = _bare_lm()
    return lm.bare_train(lm.GPT2, LM_BATCH, "cuda", True, duration_s=duration_s, warmup=10)


def bare_lm_decode(duration_s: float) -> dict[str, Any]:
    import torch

    lm = _bare_lm()
    return lm.bare_decode(lm.LLAMA2_7B, 1, DECODE["prompt"], DECODE["new"], "cuda",
                          torch.bfloat16, duration_s)


def bare_attention(duration_s: float) -> dict[str, Any]:
    return _bare_lm().bare_sdpa(ATTN["batch"], ATTN["heads"], ATTN["seq"], ATTN["head_dim"],
                                causal=False, backward=False, duration_s=duration_s)


# In running order: the LLM rows first (their CUDA paths are the least travelled).
BARE = {"lm-infer": bare_lm_decode, "lm-train": bare_lm_train, "attention": bare_attention,
        "matmul": bare_matmul, "membw": bare_copy, "cnn-train": bare_cnn_train}
TRAINING = ("cnn-train", "lm-train", "lm-infer")  # runs timed by --train-duration


def timed_s(name: str, side: str, duration: float, train_duration: float) -> float:
    """Seconds of timed work in one run of `name` on `side` ("gputui" or "bare")."""
    dur = train_duration if name in TRAINING else duration
    return dur * (GPUTUI_POINTS.get(name, 1) if side == "gputui" else 1)


def planned_s(name: str, side: str, duration: float, train_duration: float) -> float:
    return STARTUP_S + SETUP_S[name] + timed_s(name, side, duration, train_duration)


def plan(names: list[str], rounds: int, duration: float,
         train_duration: float) -> list[tuple[str, str, float]]:
    """(workload, side, planned seconds) of every run, in order (A/B alternating)."""
    runs = []
    for name in names:
        for r in range(rounds):
            for side in ("gputui", "bare") if r % 2 == 0 else ("bare", "gputui"):
                runs.append((name, side, planned_s(name, side, duration, train_duration)))
    return runs


# ----------------------------------------------------------------------------- gputui runs

@dataclass
class Figure:
    value: float | None
    pct_of_peak: float | None = None
    peak: float | None = None
    reference: str | None = None
    reference_value: float | None = None
    notes: list[str] = field(default_factory=list)


def gputui_cmd(name: str, duration_s: float) -> list[str]:
    base = [sys.executable, "-m", "gputui", "bench", "run", name, "--device", "cuda", "--json",
            "--duration", str(duration_s)]
    if name == "matmul":
        return [*base, "--precision", "bf16", "--size", str(MATMUL_N)]
    if name == "membw":
        return [*base, "--bytes", str(COPY_BYTES)]
    if name == "lm-train":
        return [*base, "--model", "gpt2", "--precision", "bf16", "--batch-size",
                str(LM_BATCH)]
    if name == "lm-infer":
        return [*base, "--model", "llama2-7b", "--precision", "bf16", "--batch-size", "1",
                "--prompt-len", str(DECODE["prompt"]), "--new-tokens", str(DECODE["new"])]
    if name == "attention":
        # One point: the bare loop's shape (FlashAttention's 16k tokens, hidden 2,048).
        return [sys.executable, "-m", "gputui.bench.worker", "--spec-json", json.dumps({
            "benchmark": "attention", "device": "cuda", "precision": "bf16",
            "duration_s": duration_s, "params": {
                "tokens": ATTN["batch"] * ATTN["seq"], "hidden": ATTN["heads"] * ATTN["head_dim"],
                "head_dim": ATTN["head_dim"], "min_seq": ATTN["seq"], "max_seq": ATTN["seq"]}})]
    return [*base, "--model", "resnet50", "--precision", "fp16", "--batch-size", str(CNN_BATCH),
            "--channels-last"]


def _point(result: dict[str, Any], label: str) -> dict[str, Any] | None:
    for p in result.get("points") or []:
        if p.get("label") == label or p.get("dtype") == label:
            return p
    return None


def _headline(tp: dict[str, Any] | None) -> float | None:
    if not tp:
        return None
    for key in ("value", "mean", "median"):
        if tp.get(key) is not None:
            return float(tp[key])
    return None


def gputui_figure(name: str, result: dict[str, Any]) -> Figure:
    fig = Figure(value=None)
    cmp = _reference(result)
    if cmp is not None:
        fig.reference, fig.reference_value = cmp.reference.describe(), cmp.reference.value
    if name in ("matmul", "membw"):
        p = _point(result, "bf16" if name == "matmul" else "copy")
        if p is None:
            fig.notes.append("no bf16/copy point in the result")
            return fig
        fig.value = float(p["throughput"]) if p.get("throughput") is not None else None
        fig.pct_of_peak = p.get("pct_of_peak")
        fig.peak = p.get("peak_tflops") if name == "matmul" else p.get("peak_gbps")
        if p.get("timed_s") is not None:
            fig.notes.append(f"timed {float(p['timed_s']):.1f} s")
        return fig
    if name == "attention":
        p = _point(result, ATTN_POINT)
        fig.value = float(p["throughput"]) if p and p.get("throughput") is not None else None
        fig.pct_of_peak, fig.peak = (p or {}).get("pct_of_peak"), (p or {}).get("peak_tflops")
        if p:
            fig.notes.append(f"backend {p.get('backend')}")
        return fig
    if name == "lm-infer":
        llm = result.get("llm") or {}
        fig.value = llm.get("decode_tokens_per_s")
        if llm.get("mbu") is not None:
            fig.notes.append(f"MBU {100 * llm['mbu']:.0f} %, decode {llm.get('decode')}")
        return fig
    fig.value = _headline(result.get("throughput"))
    flops = result.get("flops") or {}
    if flops.get("mfu") is not None:
        fig.pct_of_peak = 100 * flops["mfu"]
        # % of peak of the bare loop: the same FLOPs per token at its rate.
        fig.peak = flops["peak_tflops"] / flops["per_sample"] * 1e12
    return fig


def _reference(result: dict[str, Any]) -> Any:
    """gputui's own matching of a result to a published reference (settings must all match)."""
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    from gputui.bench import references

    return references.for_result(result)


def run_json(cmd: list[str], timeout_s: float) -> dict[str, Any]:
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, check=False)
    if proc.returncode != 0 or not proc.stdout.strip():
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
        raise RuntimeError(f"{' '.join(cmd[1:6])}… exited {proc.returncode}: {' | '.join(tail)}")
    if cmd[1:3] == ["-m", "gputui.bench.worker"]:
        # The worker speaks JSON lines; its last event carries the result document.
        last = json.loads(proc.stdout.strip().splitlines()[-1])
        if last.get("event") != "result":
            raise RuntimeError(f"worker ended with {last.get('event')}: {last.get('message')}")
        return dict(last["result"])
    return json.loads(proc.stdout)


# ----------------------------------------------------------------------------- snapshot

SMI_FIELDS: list[tuple[str, str, str]] = [
    # (nvidia-smi field, gputui snapshot field, how to compare)
    ("name", "name", "exact"),
    ("uuid", "uuid", "exact"),
    ("pci.bus_id", "pci_bus_id", "exact"),
    ("driver_version", "driver_version", "exact"),
    ("memory.total", "mem_total_bytes", "mib"),
    ("memory.used", "mem_used_bytes", "mib~"),
    ("power.limit", "power_limit_w", "w"),
    ("power.draw", "power_w", "w~"),
    ("temperature.gpu", "temp_c", "c~"),
    ("clocks.max.sm", "clock_sm_max_mhz", "exact"),
    ("clocks.max.memory", "clock_mem_max_mhz", "exact"),
    ("clocks.sm", "clock_sm_mhz", "info"),
    ("pcie.link.gen.max", "pcie_gen_max", "exact"),
    ("pcie.link.width.max", "pcie_width_max", "exact"),
    ("pcie.link.width.current", "pcie_width", "exact"),
    ("pstate", "pstate", "pstate"),
    ("utilization.gpu", "util_gpu_pct", "info"),
]


def compare_snapshot() -> list[tuple[str, str, str, str]]:
    smi = shutil.which("nvidia-smi")
    snap = run_json([sys.executable, "-m", "gputui", "snapshot", "--json"], 60)
    gpu = (snap.get("gpus") or [{}])[0]
    gpu = {**gpu, "driver_version": snap.get("driver_version")}
    if smi is None:
        return [("nvidia-smi", "-", "not found", "skipped")]
    q = ",".join(f for f, _, _ in SMI_FIELDS)
    out = subprocess.run([smi, "-i", "0", f"--query-gpu={q}", "--format=csv,noheader,nounits"],
                         capture_output=True, text=True, timeout=30, check=False).stdout
    values = [v.strip() for v in out.strip().split(",")]
    rows = []
    for (sf, gf, how), sv in zip(SMI_FIELDS, values, strict=False):
        gv = gpu.get(gf)
        rows.append((sf, _show(gv, how), sv, _verdict(gv, sv, how)))
    return rows


def _show(v: Any, how: str) -> str:
    if v is None:
        return "null"
    if how.startswith("mib"):
        return f"{v / 2**20:.0f} MiB"
    return str(v)


def _num(s: str) -> float | None:
    try:
        return float(s.replace("P", ""))
    except ValueError:
        return None


def _verdict(gv: Any, sv: str, how: str) -> str:
    if how == "info":
        return "(varies)"
    if gv is None:
        return "N/A in gputui" if sv in ("[N/A]", "N/A", "[Not Supported]") else "MISSING"
    if how == "exact":
        return "same" if str(gv).lower() == sv.lower() or _num(sv) == gv else "DIFFERENT"
    s = _num(sv)
    if s is None:
        return "?"
    g = float(gv)
    if how == "pstate":
        return "same" if g == s else "(varies)"
    if how == "mib":
        return "same" if abs(g / 2**20 - s) < 1 else "DIFFERENT"
    tol = {"mib~": 256.0, "w": 0.5, "w~": max(15.0, 0.1 * s), "c~": 3.0}[how]
    g = g / 2**20 if how.startswith("mib") else g
    return "close" if abs(g - s) <= tol else f"DIFFERENT (Δ {g - s:+.1f})"


# ----------------------------------------------------------------------------- main

def check_cuda() -> str | None:
    """The GPU's name, or None; one-line reason on stderr. Runs in a child (no CUDA here)."""
    code = ("import torch,sys\n"
            "if not torch.cuda.is_available(): sys.exit(3)\n"
            "print(torch.cuda.get_device_name(0))")
    try:
        p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           timeout=120, check=False)
    except subprocess.TimeoutExpired:
        print("gpu_check: probing CUDA timed out after 120 s", file=sys.stderr)
        return None
    if p.returncode == 0 and p.stdout.strip():
        return p.stdout.strip().splitlines()[-1]
    if "No module named 'torch'" in p.stderr:
        why = "torch is not installed (pip install torch)"
    else:
        why = "no CUDA GPU is visible to torch"
    print(f"gpu_check: {why}; run this on an NVIDIA machine", file=sys.stderr)
    return None


def fmt(v: float | None, nd: int = 1) -> str:
    return "—" if v is None else f"{v:,.{nd}f}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=1,
                    help="alternating A/B rounds per workload (default 1; 3 give a median "
                    "that one slow run cannot move, in ~3× the time)")
    ap.add_argument("--duration", type=float, default=3.0,
                    help="seconds of timed work per matmul/membw/attention point (default 3)")
    ap.add_argument("--train-duration", type=float, default=12.0,
                    help="seconds of timed work per cnn-train, lm-train and lm-infer run "
                    "(default 12: past the first seconds of boost clocks)")
    ap.add_argument("--budget", type=float, default=480.0,
                    help="never run past this many seconds: a run that would not fit is "
                    "skipped (default 480, one command of 8 minutes)")
    ap.add_argument("--plan", action="store_true",
                    help="print what would run and its planned time, then exit")
    ap.add_argument("--only", choices=sorted(BARE), action="append",
                    help="run only this workload (repeatable)")
    ap.add_argument("--json", metavar="FILE", help="also write every figure as JSON")
    ap.add_argument("--bare", choices=sorted(BARE), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)

    if args.bare:
        dur = args.train_duration if args.bare in TRAINING else args.duration
        print(json.dumps(BARE[args.bare](dur)))
        return 0

    names = args.only or list(BARE)
    runs = plan(names, args.rounds, args.duration, args.train_duration)
    total = sum(s for _, _, s in runs) + SNAPSHOT_S
    plan_line = (f"gpu_check plan: {len(runs)} runs ({', '.join(names)}; {args.rounds} "
                 f"round(s), {args.duration:g} s points, {args.train_duration:g} s "
                 f"training/decoding runs) + the snapshot check: about {total / 60:.1f} min; "
                 f"budget {args.budget:g} s")
    if args.plan:
        print(plan_line, file=sys.stderr)
        for name, side, secs in runs:
            print(f"  {name:<10} {side:<7} ~{secs:.0f} s", file=sys.stderr)
        return 0
    deadline = time.monotonic() + args.budget

    gpu_name = check_cuda()
    if gpu_name is None:
        return 1
    print(plan_line, file=sys.stderr, flush=True)
    smi = shutil.which("nvidia-smi")
    driver = "?"
    if smi:
        driver = subprocess.run([smi, "--query-gpu=driver_version", "--format=csv,noheader"],
                                capture_output=True, text=True, check=False).stdout.strip()
    print(f"gpu_check: {gpu_name}, driver {driver}, {args.rounds} alternating A/B rounds",
          file=sys.stderr)

    report: dict[str, Any] = {"gpu": gpu_name, "driver": driver, "rounds": args.rounds,
                              "workloads": {}}
    rows = []
    for name in names:
        dur = args.train_duration if name in TRAINING else args.duration
        g_runs: list[Figure] = []
        b_runs: list[float] = []
        errors: list[str] = []
        for r in range(args.rounds):
            for side in ("gputui", "bare") if r % 2 == 0 else ("bare", "gputui"):
                planned = planned_s(name, side, args.duration, args.train_duration)
                left = deadline - time.monotonic() - SNAPSHOT_S
                if planned > left:
                    errors.append(f"{side}: skipped, {planned:.0f} s planned and "
                                  f"{max(left, 0):.0f} s of the budget left")
                    continue
                # A run may take twice its plan (a slow start), never the rest of the budget.
                limit = min(left, 2 * planned + 30)
                got: float | None = None
                try:
                    if side == "gputui":
                        fig = gputui_figure(name, run_json(gputui_cmd(name, dur), limit))
                        g_runs.append(fig)
                        got = fig.value
                    else:
                        cmd = [sys.executable, os.path.abspath(__file__), "--bare", name,
                               "--duration", str(args.duration),
                               "--train-duration", str(args.train_duration)]
                        got = float(run_json(cmd, limit)["value"])
                        b_runs.append(got)
                except (RuntimeError, subprocess.TimeoutExpired, ValueError, KeyError) as e:
                    errors.append(f"{side}: {e}")
                print(f"  {name} round {r + 1} {side}: {fmt(got)} "
                      f"({time.monotonic() - deadline + args.budget:.0f} s in)",
                      file=sys.stderr, flush=True)
        g_vals = [f.value for f in g_runs if f.value is not None]
        g = statistics.median(g_vals) if g_vals else None
        b = statistics.median(b_runs) if b_runs else None
        last = g_runs[-1] if g_runs else Figure(None)
        ratio = g / b if g and b else None
        peak_pct_bare = 100 * b / last.peak if b and last.peak else None
        ref = (f"{g / last.reference_value:.2f}× {last.reference}"
               if g and last.reference_value else "no matching reference")
        unit = {"matmul": "TFLOP/s", "membw": "GB/s", "cnn-train": "images/s",
                "lm-train": "tokens/s", "lm-infer": "tokens/s", "attention": "TFLOP/s"}[name]
        rows.append((name, unit, g, b, ratio, last.pct_of_peak, peak_pct_bare, ref, errors))
        report["workloads"][name] = {
            "unit": unit, "gputui": g_vals, "bare": b_runs, "gputui_median": g,
            "bare_median": b, "ratio": ratio, "pct_of_peak": last.pct_of_peak,
            "peak": last.peak, "reference": ref, "errors": errors, "notes": last.notes}

    print(f"\n{gpu_name} · driver {driver} · median of {args.rounds} alternating rounds")
    head = f"{'workload':<34} {'gputui':>10} {'bare':>10} {'ratio':>6} {'% peak':>13}  reference"
    print(head)
    print("-" * len(head))
    labels = {"matmul": f"matmul bf16 {MATMUL_N}³, TFLOP/s",
              "membw": f"device copy {COPY_BYTES >> 30} GiB, GB/s (r+w)",
              "cnn-train": f"resnet50 AMP b{CNN_BATCH} CL, images/s",
              "lm-train": f"GPT-2 bf16 b{LM_BATCH}, tokens/s (MFU)",
              "lm-infer": "Llama-2-7B bf16 b1 decode, tok/s",
              "attention": f"SDPA bf16 {ATTN_POINT}, TFLOP/s"}
    for name, _unit, g, b, ratio, pct, pct_b, ref, errors in rows:
        pct_s = f"{fmt(pct, 0)} / {fmt(pct_b, 0)}" if pct is not None else "—"
        print(f"{labels[name]:<34} {fmt(g):>10} {fmt(b):>10} "
              f"{fmt(ratio, 3) if ratio else '—':>6} {pct_s:>13}  {ref}")
        for e in errors:
            print(f"    ! {e}")
    print("(% peak: gputui / bare, against gputui's dense peak table)")

    print("\ngputui snapshot --json vs nvidia-smi (GPU 0)")
    try:
        snap_rows = compare_snapshot()
    except (RuntimeError, subprocess.TimeoutExpired, ValueError) as e:
        snap_rows = [("snapshot", "-", "-", f"FAILED: {e}")]
    for f, gv, sv, verdict in snap_rows:
        print(f"  {f:<26} {gv:>22} {sv:>22}  {verdict}")
    report["snapshot_vs_smi"] = snap_rows

    if args.json:
        tmp = args.json + ".tmp"
        with open(tmp, "w") as fh:
            json.dump(report, fh, indent=2)
        os.replace(tmp, args.json)
    failed = any(r[8] for r in rows)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
