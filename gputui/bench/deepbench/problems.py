"""DeepBench's problems, typed: each one's name as DeepBench writes it, its FLOPs, and the
smaller copy a CPU runs; and the selection `deepbench` runs (op × set × quick/full).

FLOPs (one call of the row's operation):
- GEMM: 2·m·n·k, as DeepBench counts it. Its training list is a list of GEMMs: training
  and inference time the same product.
- Convolution: forward 2·N·K·P·Q·C·R·S (P×Q the output, from the padding and strides).
  Training runs the forward pass, the gradient of the input and the gradient of the
  filter — the three DeepBench times — each the same count: 3× forward.
- RNN: one unidirectional layer, input size = hidden size. DeepBench runs cuDNN with
  CUDNN_SKIP_INPUT (no input product); PyTorch's RNN layers always multiply the input,
  so that product runs and is counted: per time step and gate, 2·H·H for the input and
  2·H·H for the recurrence, per sequence of the batch: forward 4·gates·H²·N·T (gates:
  vanilla 1, LSTM 4, GRU 3; element-wise work not counted). Training: forward, gradient
  of the input, gradient of the weights: 3× forward.
- All-reduce: no FLOPs; bus bandwidth as nccl-tests reports it (bytes = 4 × floats).

CPU scaling: every size divided by `scale` (the catalog's CPU default 8; 1 on CUDA:
DeepBench's own sizes), never below 1; a convolution's width and height never below its
filter's. Filters, padding, strides, cell types and transposes are kept.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import ClassVar

from gputui.bench.deepbench import conv_lists, gemm_lists, rnn_lists

OPS: tuple[str, ...] = ("gemm", "conv", "rnn", "allreduce")
OP_CHOICES: tuple[str, ...] = (*OPS, "all")
SETS: tuple[str, ...] = ("train", "infer")
SHAPE_SETS: tuple[str, ...] = ("quick", "full")
SOURCE = ("baidu-research/DeepBench code/kernels/*_problems.h, commit "
          "da81ba7820739e2e506dc27f382d15be5479f98f")


def _down(v: int, scale: int, floor: int = 1) -> int:
    return max(floor, v // scale)


@dataclass(frozen=True)
class Gemm:
    """C = op(A)·op(B): A is m×k and B k×n as used; a_t/b_t: stored transposed."""

    op: ClassVar[str] = "gemm"
    m: int
    n: int
    k: int
    a_t: bool
    b_t: bool

    @property
    def name(self) -> str:
        return (f"{self.m},{self.n},{self.k},{'t' if self.a_t else 'n'},"
                f"{'t' if self.b_t else 'n'}")

    def flops(self, train: bool) -> int:
        return 2 * self.m * self.n * self.k

    def scaled(self, scale: int) -> Gemm:
        return replace(self, m=_down(self.m, scale), n=_down(self.n, scale),
                       k=_down(self.k, scale))


@dataclass(frozen=True)
class Conv:
    """NCHW input N×C×H×W, K filters of C×R×S (R high, S wide)."""

    op: ClassVar[str] = "conv"
    w: int
    h: int
    c: int
    n: int
    k: int
    s: int
    r: int
    pad_w: int
    pad_h: int
    wstride: int
    hstride: int

    @property
    def name(self) -> str:
        return ",".join(str(v) for v in (self.w, self.h, self.c, self.n, self.k, self.s,
                                         self.r, self.pad_w, self.pad_h, self.wstride,
                                         self.hstride))

    @property
    def out_hw(self) -> tuple[int, int]:
        return ((self.h + 2 * self.pad_h - self.r) // self.hstride + 1,
                (self.w + 2 * self.pad_w - self.s) // self.wstride + 1)

    def flops(self, train: bool) -> int:
        p, q = self.out_hw
        fwd = 2 * self.n * self.k * p * q * self.c * self.r * self.s
        return 3 * fwd if train else fwd

    def scaled(self, scale: int) -> Conv:
        return replace(self, w=_down(self.w, scale, self.s), h=_down(self.h, scale, self.r),
                       c=_down(self.c, scale), n=_down(self.n, scale),
                       k=_down(self.k, scale))


GATES = {"vanilla": 1, "lstm": 4, "gru": 3}


@dataclass(frozen=True)
class Rnn:
    """One unidirectional layer; DeepBench's "vanilla" is a ReLU RNN."""

    op: ClassVar[str] = "rnn"
    cell: str
    hidden: int
    batch: int
    steps: int

    @property
    def name(self) -> str:
        return f"{self.cell},{self.hidden},{self.batch},{self.steps}"

    def flops(self, train: bool) -> int:
        fwd = 4 * GATES[self.cell] * self.hidden ** 2 * self.batch * self.steps
        return 3 * fwd if train else fwd

    def scaled(self, scale: int) -> Rnn:
        return replace(self, hidden=_down(self.hidden, scale), batch=_down(self.batch, scale),
                       steps=_down(self.steps, scale))


@dataclass(frozen=True)
class AllReduce:
    """A sum over every GPU of `floats` float32 values (DeepBench's sizes count floats)."""

    op: ClassVar[str] = "allreduce"
    floats: int

    @property
    def name(self) -> str:
        return str(self.floats)

    @property
    def bytes(self) -> int:
        return 4 * self.floats

    def flops(self, train: bool) -> int | None:
        return None

    def scaled(self, scale: int) -> AllReduce:
        return replace(self, floats=_down(self.floats, scale))


Problem = Gemm | Conv | Rnn | AllReduce

# code/kernels/all_reduce_problems.h: all_reduce_kernels_size (one list, for training).
ALL_REDUCE_FLOATS: tuple[int, ...] = (100000, 3097600, 4194304, 6553600, 16777217, 38360000,
                                      64500000)

# The quick subsets: rows of DeepBench's lists (a test holds them to it) spanning each
# list's families — skinny (small n), square-ish, large N, transposed A and B (the
# inference lists have no transposed rows), long K; the convolutions' speech, ResNet,
# Inception and 1×1 strided layers; each cell type; the smallest, a middle and the
# largest all-reduce.
QUICK: dict[tuple[str, str], tuple[tuple[object, ...], ...]] = {
    ("gemm", "train"): (
        (1760, 16, 1760, False, False), (2560, 128, 2560, False, False),
        (2560, 7000, 2560, False, False), (2560, 7000, 2560, True, False),
        (2560, 7133, 2560, False, True), (5124, 9124, 2048, False, False),
        (35, 8457, 2048, False, False), (1024, 16, 500000, False, False),
        (7680, 24000, 2560, False, False), (7680, 24000, 2560, True, False),
        (512, 32, 512, False, True)),
    ("gemm", "infer"): (
        (5124, 700, 2048, False, False), (35, 700, 2048, False, False),
        (7680, 1, 2560, False, False), (3072, 4, 1024, False, False),
        (512, 1, 500000, False, False), (7680, 1500, 2560, False, False),
        (8448, 6000, 2816, False, False), (1024, 6000, 2560, False, False)),
    ("conv", "train"): (
        (700, 161, 1, 32, 32, 20, 5, 0, 0, 2, 2), (341, 79, 32, 32, 32, 10, 5, 0, 0, 2, 2),
        (224, 224, 3, 16, 64, 7, 7, 3, 3, 2, 2), (56, 56, 64, 16, 64, 3, 3, 1, 1, 1, 1),
        (28, 28, 192, 16, 32, 5, 5, 2, 2, 1, 1), (14, 14, 256, 16, 1024, 1, 1, 0, 0, 2, 2),
        (7, 7, 512, 16, 512, 3, 3, 1, 1, 1, 1)),
    ("conv", "infer"): (
        (700, 161, 1, 4, 32, 20, 5, 0, 0, 2, 2), (341, 79, 32, 4, 32, 10, 5, 0, 0, 2, 2),
        (224, 224, 3, 1, 64, 7, 7, 3, 3, 2, 2), (56, 56, 64, 1, 64, 3, 3, 1, 1, 1, 1),
        (28, 28, 192, 2, 32, 5, 5, 2, 2, 1, 1), (14, 14, 256, 1, 1024, 1, 1, 0, 0, 2, 2),
        (7, 7, 832, 2, 256, 1, 1, 0, 0, 1, 1)),
    ("rnn", "train"): (
        (1760, 16, 50, "vanilla"), (2560, 128, 50, "vanilla"), (512, 16, 25, "lstm"),
        (2048, 64, 25, "lstm"), (256, 64, 150, "lstm"), (2816, 32, 187, "gru"),
        (1024, 64, 1500, "gru")),
    ("rnn", "infer"): (
        (512, 1, 25, "lstm"), (2048, 4, 25, "lstm"), (256, 4, 150, "lstm"),
        (2816, 1, 187, "gru"), (2560, 4, 1500, "gru"), (512, 4, 1, "gru")),
    ("allreduce", "train"): ((100000,), (4194304,), (64500000,)),
}


def _gemm(row: tuple[object, ...]) -> Gemm:
    m, n, k, a_t, b_t = row
    return Gemm(int(m), int(n), int(k), bool(a_t), bool(b_t))


def _conv(row: tuple[object, ...]) -> Conv:
    return Conv(*(int(v) for v in row))


def _rnn(row: tuple[object, ...]) -> Rnn:
    hidden, batch, steps, cell = row
    return Rnn(str(cell), int(hidden), int(batch), int(steps))


def full_list(op: str, problem_set: str) -> list[Problem]:
    """DeepBench's list for `op` in `problem_set`, in its order ([] where it has none:
    all-reduce in inference)."""
    train = problem_set == "train"
    if op == "gemm":
        return [_gemm(r) for r in (gemm_lists.TRAINING if train else
                                   gemm_lists.INFERENCE_SERVER)]
    if op == "conv":
        return [_conv(r) for r in (conv_lists.TRAINING if train else
                                   conv_lists.INFERENCE_SERVER)]
    if op == "rnn":
        return [_rnn(r) for r in (rnn_lists.TRAINING if train else rnn_lists.INFERENCE_SERVER)]
    return [AllReduce(f) for f in ALL_REDUCE_FLOATS] if train else []


def quick_list(op: str, problem_set: str) -> list[Problem]:
    rows = QUICK.get((op, problem_set), ())
    make = {"gemm": _gemm, "conv": _conv, "rnn": _rnn}.get(op)
    return [make(r) if make else AllReduce(int(r[0])) for r in rows]


def ops_of(op: str) -> tuple[str, ...]:
    return OPS if op == "all" else (op,)


def select(op: str, problem_set: str, shape_set: str) -> list[Problem]:
    """The problems a run times, op by op in OPS's order."""
    pick = quick_list if shape_set == "quick" else full_list
    return [p for o in ops_of(op) for p in pick(o, problem_set)]


def usage_problem(op: object, problem_set: object, shape_set: object) -> str | None:
    """Why these settings are no DeepBench selection (one line), or None."""
    if op not in OP_CHOICES:
        return f"bad op {op!r} (choose from {', '.join(OP_CHOICES)})"
    if problem_set not in SETS:
        return f"bad set {problem_set!r} (choose from {', '.join(SETS)})"
    if shape_set not in SHAPE_SETS:
        return f"bad shapes {shape_set!r} (choose from {', '.join(SHAPE_SETS)})"
    if op == "allreduce" and problem_set == "infer":
        return "DeepBench's all-reduce list is for training: use --set train"
    return None
