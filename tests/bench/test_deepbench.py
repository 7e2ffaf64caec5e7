"""deepbench: DeepBench's lists as shipped, the FLOP counts, and the kind run in-process on
the CPU with tiny shapes (the worker's subprocess path is the same code: `kinds.run`)."""

from __future__ import annotations

import importlib.util
import time
from typing import Any

import pytest

from gputui.bench import events
from gputui.bench.deepbench import problems
from gputui.bench.deepbench.problems import AllReduce, Conv, Gemm, Rnn
from gputui.bench.kind_extras import DeepbenchExtra
from gputui.bench.request import make_request
from gputui.bench.result import Result

needs_torch = pytest.mark.skipif(importlib.util.find_spec("torch") is None,
                                 reason="needs torch (the bench extra)")


def run_kind(**spec: Any) -> tuple[Result, list[events.Event]]:
    """The deepbench kind on the CPU, in this process, as the worker's main runs it."""
    import torch

    from gputui.bench.result import ResultBuilder
    from gputui.bench.worker.cancel import CancelFlag
    from gputui.bench.worker.context import Ctx
    from gputui.bench.worker.kinds import run

    req = make_request("deepbench", device="cpu", **spec).resolved("cpu")
    seen: list[events.Event] = []
    ctx = Ctx(request=req, device=torch.device("cpu"), env={}, emit=seen.append,
              cancel=CancelFlag())
    ctx.result = ResultBuilder(id="t", benchmark="deepbench", device="cpu", status="ok",
                               precision=req.precision)
    run(ctx)
    return ctx.result.build(), seen


def rows_of(r: Result) -> DeepbenchExtra:
    extra = r.extra.of(DeepbenchExtra)
    assert extra is not None
    return extra


# DeepBench's own rows (its headers' first rows of each list), named as it writes them.
@pytest.mark.parametrize(("op", "pset", "length", "first"), [
    ("gemm", "train", 160, "1760,16,1760,n,n"),
    ("gemm", "infer", 75, "5124,700,2048,n,n"),
    ("conv", "train", 94, "700,161,1,4,32,20,5,0,0,2,2"),
    ("conv", "infer", 107, "700,161,1,1,32,20,5,0,0,2,2"),
    ("rnn", "train", 53, "vanilla,1760,16,50"),
    ("rnn", "infer", 69, "lstm,512,1,25"),
    ("allreduce", "train", 7, "100000"),
])
def test_each_list_is_deepbenchs(op: str, pset: str, length: int, first: str) -> None:
    full = problems.full_list(op, pset)
    assert len(full) == length and full[0].name == first
    quick = problems.quick_list(op, pset)
    assert quick and all(q in full for q in quick)  # the subset is DeepBench's rows
    assert len(quick) < len(full)


def test_quick_gemm_spans_the_families() -> None:
    quick = [g for g in problems.quick_list("gemm", "train") if isinstance(g, Gemm)]
    assert any(g.a_t for g in quick) and any(g.b_t for g in quick)  # transposed
    assert any(g.n <= 16 for g in quick)  # skinny
    assert any(g.n >= 7000 for g in quick)  # large N
    assert any(g.m == g.k and g.n >= 7000 for g in quick)  # square
    assert any(g.k >= 500000 for g in quick)  # DeepBench's long-K rows
    cells = {p.cell for p in problems.quick_list("rnn", "train") if isinstance(p, Rnn)}
    assert cells == {"vanilla", "lstm", "gru"}


def test_flops_are_the_formulas() -> None:
    assert Gemm(1760, 16, 1760, False, False).flops(train=True) == 2 * 1760 * 16 * 1760
    # 224×224×3, 16 images, 64 filters of 7×7, pad 3, stride 2: 112×112 out.
    conv = Conv(224, 224, 3, 16, 64, 7, 7, 3, 3, 2, 2)
    assert conv.out_hw == (112, 112)
    fwd = 2 * 16 * 64 * 112 * 112 * 3 * 7 * 7
    assert conv.flops(train=False) == fwd and conv.flops(train=True) == 3 * fwd
    # Non-square filter and strides: DeepSpeech's first layer (S=20 wide, R=5 high).
    speech = Conv(700, 161, 1, 4, 32, 20, 5, 0, 0, 2, 2)
    assert speech.out_hw == ((161 - 5) // 2 + 1, (700 - 20) // 2 + 1)
    lstm = Rnn("lstm", 512, 16, 25)
    assert lstm.flops(train=False) == 4 * 4 * 512 * 512 * 16 * 25
    assert Rnn("gru", 512, 16, 25).flops(train=True) == 3 * 4 * 3 * 512 * 512 * 16 * 25
    assert AllReduce(100000).bytes == 400000 and AllReduce(100000).flops(True) is None


def test_cpu_scaling_keeps_filters_and_transposes() -> None:
    g = Gemm(35, 8457, 2048, True, False).scaled(8)
    assert (g.m, g.n, g.k, g.a_t, g.b_t) == (4, 1057, 256, True, False)
    c = Conv(7, 7, 832, 16, 128, 5, 5, 2, 2, 1, 1).scaled(8)
    assert (c.w, c.h, c.c, c.n, c.k, c.s, c.r) == (5, 5, 104, 2, 16, 5, 5)
    assert Rnn("gru", 512, 4, 1).scaled(8) == Rnn("gru", 64, 1, 1)


@pytest.mark.parametrize(("bad", "fragment"), [
    ({"op": "fft"}, "bad op 'fft'"),
    ({"problem_set": "eval"}, "bad set 'eval'"),
    ({"shape_set": "some"}, "bad shapes 'some'"),
    ({"op": "allreduce", "problem_set": "infer"}, "for training"),
])
def test_bad_selection_is_a_usage_error(bad: dict[str, str], fragment: str) -> None:
    from gputui.errors import UsageError

    with pytest.raises(UsageError, match=fragment):
        make_request("deepbench", **bad)
    with pytest.raises(UsageError, match="applies to deepbench"):
        make_request("matmul", op="gemm")


@needs_torch
def test_gemm_rows_tflops_are_flops_over_median_time() -> None:
    r, _ = run_kind(op="gemm", steps=2, warmup=0, params={"scale": 32})
    ex = rows_of(r)
    assert [row.shape for row in ex.rows] == [g.name for g in problems.quick_list("gemm",
                                                                                    "train")]
    for row, g in zip(ex.rows, problems.quick_list("gemm", "train"), strict=True):
        ran = g.scaled(32)
        assert isinstance(ran, Gemm) and row.ran == ran.name
        assert row.flops == 2 * ran.m * ran.n * ran.k
        assert row.median_us is not None and row.median_us > 0 and row.calls == 2
        assert row.tflops == pytest.approx(row.flops / (row.median_us * 1e-6) / 1e12)
        assert row.pct_of_peak is None  # a CPU has no dense peak
    # The headline is the same rows' FLOPs over their summed times.
    assert r.throughput is not None and r.throughput.unit == "TFLOP/s"
    total_s = sum(row.median_us * 1e-6 for row in ex.rows if row.median_us)
    assert r.throughput.value == pytest.approx(sum(row.flops or 0 for row in ex.rows)
                                               / total_s / 1e12)


@needs_torch
def test_all_ops_in_the_result_json() -> None:
    r, _ = run_kind(op="all", problem_set="train", steps=1, warmup=0, params={"scale": 64})
    doc = r.to_dict()
    rows = doc["extra"]["deepbench_rows"]
    assert {row["op"] for row in rows} == set(problems.OPS)
    timed = [row for row in rows if row["op"] != "allreduce"]
    assert timed and all(row["tflops"] == pytest.approx(
        row["flops"] / (row["median_us"] * 1e-6) / 1e12) for row in timed)
    assert len(rows) == len(problems.select("all", "train", "quick"))
    conv = next(row for row in rows if row["op"] == "conv")
    assert conv["shape"] == "700,161,1,32,32,20,5,0,0,2,2" and conv["tflops"] > 0
    assert conv["flops"] == 3 * Conv(700, 161, 1, 32, 32, 20, 5, 0, 0, 2, 2).scaled(64)\
        .flops(train=False)
    rnn = next(row for row in rows if row["op"] == "rnn")
    assert rnn["shape"] == "vanilla,1760,16,50" and rnn["tflops"] > 0
    # One process on a CPU: all-reduce rows say what they need, with no figure.
    ar = [row for row in rows if row["op"] == "allreduce"]
    assert [row["shape"] for row in ar] == ["100000", "4194304", "64500000"]
    assert all(row["busbw_gbps"] is None and "2+ CUDA GPUs" in row["note"] for row in ar)
    assert doc["settings"]["problem_set"] == "train" and doc["settings"]["scale"] == 64
    # The record reads back as written.
    assert rows_of(Result.from_dict(doc)) == rows_of(r)


@needs_torch
def test_inference_rnn_is_forward_only() -> None:
    r, _ = run_kind(op="rnn", problem_set="infer", steps=1, warmup=0, params={"scale": 64})
    rows = rows_of(r).rows
    assert rows[0].shape == "lstm,512,1,25"
    ran = problems.quick_list("rnn", "infer")[0].scaled(64)
    assert rows[0].flops == ran.flops(train=False)


@needs_torch
def test_transposed_operands_are_transposed() -> None:
    import torch

    from gputui.bench.worker.kinds.deepbench import gemm_operands

    gen = torch.Generator().manual_seed(0)
    a, b, c = gemm_operands(Gemm(6, 5, 4, True, True), torch.device("cpu"), torch.float32,
                            gen)
    assert a.shape == (6, 4) and a.stride() == (1, 6)  # Aᵀ of a contiguous 4×6
    assert b.shape == (4, 5) and b.stride() == (1, 4)  # Bᵀ of a contiguous 5×4
    a, b, c = gemm_operands(Gemm(6, 5, 4, False, False), torch.device("cpu"),
                            torch.float32, gen)
    assert a.stride() == (4, 1) and b.stride() == (5, 1) and c.shape == (6, 5)


@needs_torch
def test_gemm_time_agrees_with_a_plain_matmul_loop() -> None:
    """Not a speed threshold: the kind's median call and a plain timed torch.matmul loop
    of the same product must agree within 3× (they time the same work)."""
    import torch

    from gputui.bench.worker.cancel import CancelFlag
    from gputui.bench.worker.context import Ctx
    from gputui.bench.worker.kinds.deepbench import timed_row

    g = Gemm(192, 192, 192, False, False)
    req = make_request("deepbench", device="cpu", op="gemm", steps=30,
                       warmup=3).resolved("cpu")
    ctx = Ctx(request=req, device=torch.device("cpu"), env={}, emit=lambda _e: None,
              cancel=CancelFlag())
    threads = torch.get_num_threads()
    # One thread: on a shared 2-core VM, OpenMP threads waiting on a busy core turn a
    # sub-millisecond product into a scheduler quantum, for both loops alike but not evenly.
    torch.set_num_threads(1)
    try:
        row = timed_row(ctx, g, 1, True, torch.float32, None)
        a, b = torch.randn(192, 192), torch.randn(192, 192)
        for _ in range(3):
            torch.matmul(a, b)
        times = []
        for _ in range(30):
            t0 = time.perf_counter()
            torch.matmul(a, b)
            times.append(time.perf_counter() - t0)
    finally:
        torch.set_num_threads(threads)
    plain_us = sorted(times)[len(times) // 2] * 1e6
    assert row.median_us is not None
    assert 1 / 3 < row.median_us / plain_us < 3
