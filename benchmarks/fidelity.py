"""Does gputui measure what a bare PyTorch loop measures?

For ResNet-18 training and inference and LSTM language-model training on CPU, run the
benchmark through gputui's runner and real worker (a child process, events, timing
windows) and a hand-written PyTorch loop with the same model, shapes, optimizer and thread
count, also in a fresh child process; print both throughputs and their ratio.
Target: ratio ≥ 0.97.

Like for like: both sides report total samples ÷ wall time of the timed loop (warm-up
excluded). For gputui that is the result's headline `throughput.value` (the sum of every
window's samples over the time from the synchronised start of the timed loop to the end of
its last window: gputui.bench.stats); the bare loop times its own timed loop the same way.
Each side's figure is the median over rounds, and the rounds alternate which side runs
first so that slow drift (thermal, other load) hits both. The table gives the ratio and
|ratio − 1|; a ratio under the target is flagged FAIL. The machine's `uptime` (load) is
printed before and after: on a loaded machine the spread between rounds says how much the
numbers can be trusted.

    python benchmarks/fidelity.py [--rounds 5] [--threads N] [--quick]

This is a measurement script, not a test: it takes a few minutes and its numbers depend
on the machine.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, replace

from gputui.bench.request import make_request
from gputui.bench.runner import BenchRun

TARGET = 0.97


@dataclass(frozen=True)
class Case:
    label: str
    benchmark: str
    model: str
    batch: int
    steps: int
    warmup: int
    image_size: int | None = None
    seq_len: int | None = None
    # LM sizes: the catalog's CPU defaults for rnn-train.
    vocab: int = 1000
    hidden: int = 128
    layers: int = 2


# Timed loops of roughly 3-5 s each on a 2-core CPU: long enough for a stable mean.
CASES = (
    Case("resnet18 train", "cnn-train", "resnet18", batch=16, steps=30, warmup=3,
         image_size=64),
    Case("resnet18 infer", "cnn-infer", "resnet18", batch=32, steps=40, warmup=3,
         image_size=64),
    Case("lstm train", "rnn-train", "lstm", batch=16, steps=200, warmup=10, seq_len=32),
)


def gputui_throughput(case: Case, threads: int) -> tuple[float, str]:
    """gputui's headline (throughput.value: samples ÷ timed-loop seconds) for one run."""
    request = make_request(
        case.benchmark, model=case.model, device="cpu", precision="fp32",
        batch_size=case.batch, steps=case.steps, warmup=case.warmup,
        image_size=case.image_size, seq_len=case.seq_len, threads=threads,
        mode="throughput" if case.benchmark.endswith("infer") else None,
    )
    result = BenchRun(request, telemetry=False).run()
    if result.status != "ok" or result.throughput is None or result.headline is None:
        raise SystemExit(f"gputui run failed: {result.error}")
    # The counts the headline rests on, checked against what was asked for.
    if result.steps != case.steps or result.samples != case.steps * samples_per_step(case):
        raise SystemExit(f"gputui ran {result.steps} steps / {result.samples} samples, "
                         f"expected {case.steps} / {case.steps * samples_per_step(case)}")
    return result.headline, result.throughput.unit


def samples_per_step(case: Case) -> int:
    return case.batch * (case.seq_len or 1) if case.benchmark.startswith("rnn") else case.batch


def bare_throughput(case: Case, threads: int) -> float:
    """The same measurement in a fresh interpreter, as gputui's worker is one."""
    proc = subprocess.run(
        [sys.executable, os.path.abspath(__file__), "--bare-case", json.dumps(asdict(case)),
         "--threads", str(threads)],
        capture_output=True, text=True, timeout=1800,
    )
    if proc.returncode != 0:
        raise SystemExit(f"bare loop failed:\n{proc.stderr[-2000:]}")
    return float(json.loads(proc.stdout.strip().splitlines()[-1])["samples_per_s"])


def bare_loop(case: Case, threads: int) -> float:
    """The loop a careful engineer would write by hand: samples ÷ timed-loop wall time."""
    import torch
    from torch import nn

    torch.set_num_threads(threads)
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(0)
    pool = 2  # as gputui's device-resident data (workloads.DEVICE_POOL): two batches alternate
    if case.benchmark.startswith("rnn"):
        assert case.seq_len is not None

        class LM(nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.embed = nn.Embedding(case.vocab, case.hidden)
                self.rnn = nn.LSTM(case.hidden, case.hidden, num_layers=case.layers,
                                   batch_first=True)
                self.head = nn.Linear(case.hidden, case.vocab)

            def forward(self, t: torch.Tensor) -> torch.Tensor:
                out, _ = self.rnn(self.embed(t))
                return self.head(out)

        model: nn.Module = LM()
        seqs = [torch.randint(0, case.vocab, (case.batch, case.seq_len + 1), generator=gen)
                for _ in range(pool)]
        batches = [(s[:, :-1].contiguous(), s[:, 1:].contiguous()) for s in seqs]
    else:
        import torchvision.models as tvm

        assert case.image_size is not None
        model = tvm.resnet18(weights=None, num_classes=1000)
        batches = [(torch.randn(case.batch, 3, case.image_size, case.image_size, generator=gen),
                    torch.randint(0, 1000, (case.batch,), generator=gen)) for _ in range(pool)]
    per_step = samples_per_step(case)

    if case.benchmark.endswith("infer"):
        model.eval()

        def step(i: int) -> None:
            with torch.inference_mode():
                model(batches[i % pool][0])
    else:
        model.train()
        # The optimizer gputui records (settings.optimizer): the fused SGD kernel where this
        # torch has one for the device, else the default implementation.
        try:
            opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, fused=True)
        except (RuntimeError, TypeError, ValueError):
            opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
        loss_fn = nn.CrossEntropyLoss()

        def step(i: int) -> None:
            x, y = batches[i % pool]
            out = model(x)
            loss = loss_fn(out.reshape(-1, out.shape[-1]), y.reshape(-1))
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)

    for i in range(case.warmup):
        step(i)
    t0 = time.perf_counter()
    for i in range(case.steps):
        step(i)  # gputui's timed loop also starts at step index 0 after its warm-up
    wall = time.perf_counter() - t0
    return per_step * case.steps / wall


def uptime() -> str:
    try:
        return subprocess.run(["uptime"], capture_output=True, text=True,
                              timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        load = os.getloadavg() if hasattr(os, "getloadavg") else ()
        return "load average: " + ", ".join(f"{x:.2f}" for x in load)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--quick", action="store_true", help="fewer steps (smoke test)")
    parser.add_argument("--bare-case", help=argparse.SUPPRESS)  # internal: the child side
    args = parser.parse_args(argv)
    if args.bare_case:
        case = Case(**json.loads(args.bare_case))
        print(json.dumps({"samples_per_s": bare_loop(case, args.threads)}), flush=True)
        return 0
    cases = CASES
    if args.quick:
        cases = tuple(replace(c, steps=max(3, c.steps // 10), warmup=1) for c in CASES)

    up_before = uptime()
    print(f"uptime before: {up_before}", file=sys.stderr, flush=True)
    rows: list[tuple[str, list[float], list[float], str]] = []
    t_start = time.monotonic()
    for case in cases:
        ours: list[float] = []
        bare: list[float] = []
        unit = ""
        for r in range(args.rounds):
            # Alternate the order so neither side always runs first (cold caches, turbo).
            if r % 2 == 0:
                tp, unit = gputui_throughput(case, args.threads)
                ours.append(tp)
                bare.append(bare_throughput(case, args.threads))
            else:
                bare.append(bare_throughput(case, args.threads))
                tp, unit = gputui_throughput(case, args.threads)
                ours.append(tp)
            print(f"  {case.label} round {r + 1}: gputui {ours[-1]:.1f}  bare {bare[-1]:.1f}"
                  f" {unit}  (ratio {ours[-1] / bare[-1]:.3f})", file=sys.stderr, flush=True)
        rows.append((case.label, ours, bare, unit))
    up_after = uptime()

    import torch

    print(f"\ngputui fidelity on CPU ({args.threads} threads, torch {torch.__version__}, "
          f"{args.rounds} rounds, {time.monotonic() - t_start:.0f} s)")
    print("figure: total samples ÷ timed-loop wall time, median over rounds; "
          "both sides in a child process")
    print(f"uptime before: {up_before}\nuptime after:  {up_after}\n")
    header = (f"{'workload':<16} {'gputui':>10} {'bare loop':>10} {'unit':<9} {'ratio':>6}"
              f" {'|ratio-1|':>9} {'paired':>6} {'rounds gputui/bare (min-max)':>30}  verdict")
    print(header)
    print("-" * len(header))
    failed = False
    for label, ours, bare, unit in rows:
        mo, mb = statistics.median(ours), statistics.median(bare)
        ratio = mo / mb
        verdict = "ok" if ratio >= TARGET else "FAIL"
        failed |= ratio < TARGET
        paired = statistics.median(o / b for o, b in zip(ours, bare, strict=True))
        spread = (f"{min(ours):.0f}-{max(ours):.0f} / {min(bare):.0f}-{max(bare):.0f}")
        print(f"{label:<16} {mo:>10.1f} {mb:>10.1f} {unit:<9} {ratio:>6.3f}"
              f" {abs(ratio - 1):>9.3f} {paired:>6.3f} {spread:>30}  {verdict}")
    print(f"\ntarget ratio ≥ {TARGET} (FAIL below it); ratio = median gputui ÷ median bare; "
          "paired = median of the per-round ratios (same-round runs share the load)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
