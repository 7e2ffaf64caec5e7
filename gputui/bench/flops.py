"""Model FLOPs and MFU: the arithmetic, in one place. Torch-free.

- `per_sample` is the model FLOPs of one image or one token of one step. Training counts
  forward + backward (the backward pass is twice the forward); inference the forward only.
- GPT training uses the published formula 6N + 12·L·d·T per token (N: parameters without the
  lookup-only embedding tables — GPT's position table, Llama's token table; L layers, d model
  width, T sequence length), with no discount for the causal mask, as nanoGPT's estimate_mfu
  and torchtitan count. Forward-only kinds count a third of it; LLM generation counts the
  forward passes of the prompt too (`lm_generate_per_token`). Everything else is counted by
  torch.utils.flop_counter over one untimed step.
- MFU = achieved ÷ the dense peak of this device at the precision that ran (bench.peaks);
  fp32 with TF32 matmuls allowed is held against the TF32 peak. No peak (a CPU, a GPU not in
  the table), no MFU: None, never a guess.
- Attention (the `attention` kind) counts as FlashAttention's benchmarks do: 4·b·s²·h·d for
  the forward pass, halved when causal; the backward pass 2.5× the forward.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from gputui.bench.lm_shapes import LMShape, n_params_for_flops

Method = Literal["analytic", "counted"]

GPT_TRAIN_FORMULA = ("6N + 12·L·d·T per token (N without lookup-only embedding tables; no causal "
                     "discount)")
LM_GENERATE_FORMULA = ("(6N + 12·L·d·T) / 3 × (P + G − 1) / G per generated token: the forward "
                       "passes of the P prompt tokens and the G − 1 decode steps of each "
                       "sequence, shared by its G generated tokens; T = P + G, N without "
                       "lookup-only embedding tables")


def lm_train_per_token(s: LMShape) -> int:
    """6N + 12·L·d·T: model FLOPs of one token of a training step (forward + backward)."""
    return 6 * n_params_for_flops(s) + 12 * s.n_layer * s.d_model * s.seq_len


def lm_forward_per_token(s: LMShape) -> float:
    return lm_train_per_token(s) / 3


def lm_generate_per_token(s: LMShape, prompt: int, new: int) -> float:
    """Model FLOPs per generated token of a request: each sequence runs its P prompt tokens
    through one forward pass (the prefill) and G − 1 decode steps of one token, and yields G
    tokens — the throughput's time holds all of it, so all of it is counted (as gpt-fast
    does). T in the attention term is the context the static cache spans, P + G."""
    return lm_forward_per_token(s.with_seq_len(prompt + new)) * (prompt + new - 1) / new


RNN_FORMULA = ("2·g·(h·h + h·h)·layers + 2·h·V per token forward (g gates: 4 LSTM, 3 GRU), "
               "×3 for training")


def rnn_per_token(kind: str, hidden: int, layers: int, vocab: int, train: bool) -> float:
    """Embedding → LSTM/GRU → vocabulary projection: its matmuls per token (bias adds and
    gate nonlinearities are not counted, as in 6N). cuDNN's fused RNN hides these from
    torch's counter, so the analytic figure is the one used."""
    gates = 4 if kind == "lstm" else 3
    fwd = 2.0 * gates * (hidden * hidden + hidden * hidden) * layers + 2.0 * hidden * vocab
    return 3 * fwd if train else fwd


def attention_flops(batch: int, seq_len: int, heads: int, head_dim: int, causal: bool,
                    backward: bool) -> float:
    """FlashAttention's count: 4·b·s²·h·d forward (halved when causal); fwd+bwd is 3.5×."""
    fwd = 4.0 * batch * seq_len * seq_len * heads * head_dim / (2 if causal else 1)
    return fwd * 3.5 if backward else fwd


def peak_dtype(precision: str | None, tf32_matmul: bool | None) -> str | None:
    """The peak-table dtype a run is held against: fp32 runs with TF32 matmuls allowed ran
    on the TF32 tensor cores."""
    if precision is None:
        return None
    if precision == "fp32" and tf32_matmul:
        return "tf32"
    return precision


def ratio(achieved: float | None, peak: float | None) -> float | None:
    """achieved ÷ peak (a fraction), None when either is unknown."""
    if achieved is None or peak is None or peak <= 0 or not math.isfinite(achieved):
        return None
    return achieved / peak


def _num(v: Any) -> float | None:
    if isinstance(v, bool) or not isinstance(v, int | float):
        return None
    return float(v) if math.isfinite(v) else None


@dataclass(frozen=True)
class Flops:
    """The result's `flops` field: model FLOPs per sample, achieved TFLOP/s and MFU."""

    per_sample: float | None
    method: str  # "analytic" or "counted"
    counted_per_sample: float | None = None
    achieved_tflops: float | None = None
    peak_tflops: float | None = None
    mfu: float | None = None  # a fraction: 0.42 is 42 %
    formula: str | None = None
    peak_dtype: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"per_sample": self.per_sample, "method": self.method,
                "counted_per_sample": self.counted_per_sample,
                "achieved_tflops": self.achieved_tflops, "peak_tflops": self.peak_tflops,
                "mfu": self.mfu, "formula": self.formula, "peak_dtype": self.peak_dtype}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Flops:
        method = d.get("method")
        formula, dtype = d.get("formula"), d.get("peak_dtype")
        return cls(per_sample=_num(d.get("per_sample")),
                   method=method if isinstance(method, str) else "counted",
                   counted_per_sample=_num(d.get("counted_per_sample")),
                   achieved_tflops=_num(d.get("achieved_tflops")),
                   peak_tflops=_num(d.get("peak_tflops")), mfu=_num(d.get("mfu")),
                   formula=formula if isinstance(formula, str) else None,
                   peak_dtype=dtype if isinstance(dtype, str) else None)


def make(per_sample: float | None, method: Method, throughput: float | None,
         peak_tflops: float | None, *, counted: float | None = None,
         formula: str | None = None, dtype: str | None = None) -> Flops:
    """achieved = per_sample × headline throughput (samples/s); mfu = achieved ÷ peak."""
    achieved = (per_sample * throughput / 1e12
                if per_sample is not None and throughput is not None else None)
    return Flops(per_sample=per_sample, method=method, counted_per_sample=counted,
                 achieved_tflops=achieved, peak_tflops=peak_tflops,
                 mfu=ratio(achieved, peak_tflops), formula=formula, peak_dtype=dtype)


def mfu_text(f: Flops | None) -> str:
    """"12.3 TFLOP/s, MFU 41.0 %" for displays; "" without FLOPs."""
    if f is None or f.achieved_tflops is None:
        return ""
    mfu = f"MFU {f.mfu * 100:.1f} %" if f.mfu is not None else "MFU N/A (no peak)"
    return f"{f.achieved_tflops:.3g} TFLOP/s, {mfu}"
