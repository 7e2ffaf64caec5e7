"""Does gputui measure what a bare PyTorch loop measures?

For ResNet-18 training and inference and LSTM language-model training on CPU, run the
benchmark through gputui's runner and real worker (a child process, events, timing
windows) and a hand-written PyTorch loop with the same model, shapes, optimizer and thread
count in this process; print both throughputs and their ratio. Target: ratio ≥ 0.97.

The rounds alternate gputui / bare so that slow drift (thermal, other load) hits both
sides. Each side's headline figure is its best round: on a shared machine other load can
only slow a run down, so the best round is the least disturbed one; medians are printed
beside it.

    python benchmarks/fidelity.py [--rounds 3] [--threads N] [--quick]

This is a measurement script, not a test: it takes a few minutes and its numbers depend
on the machine.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from dataclasses import dataclass

from gputui.bench.runner import BenchRun, make_spec

TARGET = 0.97
WINDOW_S = 0.5


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


CASES = (
    Case("resnet18 train", "cnn-train", "resnet18", batch=16, steps=12, warmup=2,
         image_size=64),
    Case("resnet18 infer", "cnn-infer", "resnet18", batch=32, steps=15, warmup=2,
         image_size=64),
    Case("lstm train", "rnn-train", "lstm", batch=16, steps=40, warmup=3, seq_len=32),
)


def gputui_throughput(case: Case, threads: int) -> tuple[float, str]:
    spec = make_spec(
        case.benchmark, model=case.model, device="cpu", precision="fp32",
        batch_size=case.batch, steps=case.steps, warmup=case.warmup,
        image_size=case.image_size, seq_len=case.seq_len, threads=threads,
        mode="throughput" if case.benchmark.endswith("infer") else None,
    )
    doc = BenchRun(spec, telemetry=False).run()
    if doc["status"] != "ok":
        raise SystemExit(f"gputui run failed: {doc.get('error')}")
    return float(doc["throughput"]["median"]), str(doc["throughput"]["unit"])


def bare_throughput(case: Case, threads: int) -> float:
    """The loop a careful engineer would write by hand; median samples/s over windows."""
    import torch
    from torch import nn

    torch.set_num_threads(threads)
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(0)
    pool = 4
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
        per_step = case.batch * case.seq_len
    else:
        import torchvision.models as tvm

        assert case.image_size is not None
        model = tvm.resnet18(weights=None, num_classes=1000)
        batches = [(torch.randn(case.batch, 3, case.image_size, case.image_size, generator=gen),
                    torch.randint(0, 1000, (case.batch,), generator=gen)) for _ in range(pool)]
        per_step = case.batch

    if case.benchmark.endswith("infer"):
        model.eval()

        def step(i: int) -> None:
            with torch.inference_mode():
                model(batches[i % pool][0])
    else:
        model.train()
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
    # Like for like with gputui's median-of-windows figure: throughput over ~0.5 s windows
    # (a window closes at a step boundary), then the median. A plain total/elapsed would
    # let one disturbed second on a shared machine decide the comparison.
    windows: list[float] = []
    t0 = time.perf_counter()
    done = 0
    for i in range(case.steps):
        step(case.warmup + i)
        done += 1
        now = time.perf_counter()
        if now - t0 >= WINDOW_S or i == case.steps - 1:
            windows.append(per_step * done / (now - t0))
            t0, done = now, 0
    return statistics.median(windows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--quick", action="store_true", help="fewer steps (smoke test)")
    args = parser.parse_args(argv)
    cases = CASES
    if args.quick:
        from dataclasses import replace

        cases = tuple(replace(c, steps=max(3, c.steps // 6), warmup=1) for c in CASES)

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
                  f" {unit}", file=sys.stderr, flush=True)
        rows.append((case.label, ours, bare, unit))

    import torch

    print(f"\ngputui fidelity on CPU ({args.threads} threads, torch {torch.__version__}, "
          f"{args.rounds} rounds, {time.monotonic() - t_start:.0f} s)\n")
    header = (f"{'workload':<16} {'gputui':>10} {'bare loop':>10} {'unit':<9} {'ratio':>6}"
              f"   {'median ratio':>12}")
    print(header)
    print("-" * len(header))
    worst = float("inf")
    for label, ours, bare, unit in rows:
        ratio = max(ours) / max(bare)
        median_ratio = statistics.median(ours) / statistics.median(bare)
        worst = min(worst, ratio)
        flag = "" if ratio >= TARGET else "  < target"
        print(f"{label:<16} {max(ours):>10.1f} {max(bare):>10.1f} {unit:<9} {ratio:>6.3f}"
              f"   {median_ratio:>12.3f}{flag}")
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"\n1-min load average at the end: {load:.1f} on {os.cpu_count()} CPUs")
    print(f"\ntarget ratio ≥ {TARGET}; worst {worst:.3f}")
    return 0 if worst >= TARGET else 1




if __name__ == "__main__":
    sys.exit(main())
