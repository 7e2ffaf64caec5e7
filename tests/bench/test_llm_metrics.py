"""TTFT/TPOT/ITL arithmetic, MFU and MBU against a known peak, attention FLOPs and backend."""

from __future__ import annotations

import sys
from typing import Any

import pytest

from gputui.bench import flops, llm_metrics
from gputui.bench.result import Result


def test_ttft_tpot_itl_from_scripted_token_times() -> None:
    # Two requests of 4 new tokens: [TTFT, ITL1, ITL2, ITL3] in ms.
    gaps = [[10.0, 2.0, 2.0, 2.0], [12.0, 3.0, 1.0, 5.0]]
    s = llm_metrics.summarize(gaps, batch_size=2, prompt_tokens=8, new_tokens=4,
                              weight_bytes=1000, kv_read_bytes=200, kv_cache_bytes=200,
                              peak_bytes_per_s=1e6)
    assert s.requests == 2
    assert s.ttft_ms is not None and s.ttft_ms.mean == 11.0 and s.ttft_ms.n == 2
    # TPOT per request = (latency - TTFT) / (new - 1): the first token is not in it.
    assert s.tpot_ms is not None and s.tpot_ms.p50 == pytest.approx((6 / 3 + 9 / 3) / 2)
    assert s.itl_ms is not None and s.itl_ms.n == 6 and s.itl_ms.mean == pytest.approx(15 / 6)
    # Prefill: 2 × 8 tokens per request over 22 ms of TTFT; decode: 2 sequences × 3 steps
    # per request over 15 ms of decoding.
    assert s.prefill_tokens_per_s == pytest.approx(32 / 0.022)
    assert s.decode_tokens_per_s == pytest.approx(12 / 0.015)
    # Bytes per decode step × steps/s: (1000 + 200) × 6 steps / 15 ms.
    assert s.decode_bytes_per_s == pytest.approx(1200 * 6 / 0.015)
    assert s.mbu == pytest.approx(1200 * 6 / 0.015 / 1e6)
    assert s.ttft_ms.few  # two requests: marked as resting on few values


def test_one_new_token_has_no_tpot_and_no_peak_no_mbu() -> None:
    s = llm_metrics.summarize([[5.0], [7.0]], batch_size=1, prompt_tokens=4, new_tokens=1,
                              weight_bytes=10)
    assert s.tpot_ms is None and s.decode_tokens_per_s is None and s.mbu is None
    assert s.ttft_ms is not None and s.ttft_ms.p50 == 6.0


def test_llm_and_flops_fields_round_trip_through_the_result() -> None:
    s = llm_metrics.summarize([[10.0, 2.0]], batch_size=1, prompt_tokens=3, new_tokens=2)
    f = flops.make(100.0, "analytic", 2e10, 989.4, counted=90.0, dtype="bf16")
    r = Result(id="x", benchmark="lm-infer", status="ok", llm=s, flops=f)
    back = Result.from_dict(r.to_dict())
    assert back.llm == s and back.flops == f


def test_energy_per_output_token_round_trips_and_is_absent_where_unmeasured() -> None:
    """vLLM's gpu_energy_per_output_token_j: kept where measured; a result saved without
    it (a CPU run) reads and writes back unchanged."""
    from dataclasses import replace

    from gputui.bench.lm_view import llm_rows

    s = llm_metrics.summarize([[10.0, 2.0]], batch_size=1, prompt_tokens=3, new_tokens=2)
    assert "energy_per_output_token_j" not in s.to_dict()
    measured = replace(s, energy_per_output_token_j=0.125)
    assert measured.to_dict()["energy_per_output_token_j"] == 0.125
    r = Result(id="x", benchmark="lm-infer", status="ok", llm=measured)
    back = Result.from_dict(r.to_dict())
    assert back.llm is not None and back.llm.energy_per_output_token_j == 0.125
    assert ("energy", "0.125 J per output token") in llm_rows(back)


def test_mfu_from_a_known_peak_and_none_without() -> None:
    f = flops.make(1e9, "analytic", 2e5, 989.4)
    assert f.achieved_tflops == pytest.approx(200.0)
    assert f.mfu == pytest.approx(200.0 / 989.4)
    assert flops.make(1e9, "analytic", 2e5, None).mfu is None
    # fp32 with TF32 matmuls allowed is held against the TF32 peak.
    assert flops.peak_dtype("fp32", True) == "tf32"
    assert flops.peak_dtype("fp32", False) == "fp32"
    assert flops.peak_dtype("bf16", True) == "bf16"


def test_attention_flops_as_flashattention_counts() -> None:
    fwd = 4 * 2 * 1024 * 1024 * 16 * 128
    assert flops.attention_flops(2, 1024, 16, 128, causal=False, backward=False) == fwd
    assert flops.attention_flops(2, 1024, 16, 128, causal=True, backward=False) == fwd / 2
    assert flops.attention_flops(2, 1024, 16, 128, causal=False, backward=True) == fwd * 3.5


# ---- worker side (torch): the device's peak on a faked device row ---------------------

torch = pytest.importorskip("torch")


def _ctx(device: str, name: str | None, precision: str = "bf16") -> Any:
    from gputui.bench.request import make_request
    from gputui.bench.result import ResultBuilder
    from gputui.bench.stats import Throughput
    from gputui.bench.worker.cancel import CancelFlag
    from gputui.bench.worker.context import Ctx

    ctx = Ctx(request=make_request("lm-train", precision=precision),
              device=torch.device(device), env={"device_name": name}, emit=lambda e: None,
              cancel=CancelFlag())
    ctx.result = ResultBuilder(id="", benchmark="lm-train")
    ctx.result.throughput = Throughput(value=1e5, median=None, p10=None, p90=None,
                                       unit="tokens/s")
    return ctx


def test_mfu_on_a_faked_h100_row_and_null_on_the_cpu() -> None:
    from gputui.bench.worker.kinds.flop_count import attach
    from gputui.bench.worker.kinds.lm_infer import peak_bytes_per_s

    gpu = _ctx("cuda", "NVIDIA H100 80GB HBM3")
    attach(gpu, 1e9, "analytic")
    assert gpu.result.flops.peak_tflops == 989.4
    assert gpu.result.flops.mfu == pytest.approx(100.0 / 989.4)
    assert peak_bytes_per_s(gpu) == 3350e9
    cpu = _ctx("cpu", None)
    attach(cpu, 1e9, "analytic")
    assert cpu.result.flops.achieved_tflops == pytest.approx(100.0)
    assert cpu.result.flops.mfu is None and cpu.result.flops.peak_tflops is None
    assert peak_bytes_per_s(cpu) is None


def test_the_backend_label_is_unknown_where_torchs_dispatch_recorder_fails(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """TorchDispatchMode is private to torch: missing, or raising, it costs the label
    only."""
    import torch.nn.functional as F
    import torch.utils._python_dispatch as dispatch

    from gputui.bench.worker.kinds.attention import backend_label

    q = torch.randn(1, 2, 16, 8)
    calls: list[int] = []

    def attend() -> None:
        calls.append(1)
        F.scaled_dot_product_attention(q, q, q)

    assert backend_label(attend) == "flash (cpu)"

    class Broken(dispatch.TorchDispatchMode):
        def __enter__(self) -> Broken:
            raise RuntimeError("dispatch modes changed")

    monkeypatch.setattr(dispatch, "TorchDispatchMode", Broken)
    assert backend_label(attend) == "unknown"
    monkeypatch.delattr(dispatch, "TorchDispatchMode")
    assert backend_label(attend) == "unknown"
    monkeypatch.setitem(sys.modules, "torch.utils._python_dispatch", None)
    assert backend_label(attend) == "unknown"
    assert len(calls) == 1  # only the working recorder called it


def test_sdpa_backend_names() -> None:
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    from gputui.bench.worker.kinds.attention import backend_of, ops_of

    q = torch.randn(1, 2, 16, 8)
    assert backend_of(ops_of(lambda: F.scaled_dot_product_attention(q, q, q))) == "flash (cpu)"
    with sdpa_kernel(SDPBackend.MATH):
        names = ops_of(lambda: F.scaled_dot_product_attention(q, q, q, is_causal=True))
    assert backend_of(names) == "math"
    assert backend_of(["aten._scaled_dot_product_efficient_attention.default"]) == "efficient"
    assert backend_of(["aten._scaled_dot_product_cudnn_attention.default"]) == "cudnn"
