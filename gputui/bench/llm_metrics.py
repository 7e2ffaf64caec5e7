"""LLM serving figures from per-token times: TTFT, TPOT, ITL, prefill/decode rates, decode
bandwidth and MBU. Torch-free arithmetic; the percentiles are the one statistics module's.

A request is a batch of B prompts of P tokens, prefilled at once, then N new tokens each
(greedy): the first comes out of the prefill, the other N − 1 from one decode step each.
The worker gives, per request, the times between its token boundaries: [TTFT, ITL₁ … ITLₙ₋₁]
(the first from the request's start to the first token, the others between tokens).

- TTFT: start of the request → first token ready (prefill and its sampling).
- TPOT per request = (latency − TTFT) / (N − 1): the first token is not in it (vLLM's and
  MLPerf's definition); None with a single new token.
- ITL: every gap between two consecutive tokens, pooled over requests.
- decode_bytes_per_s: bytes a decode step must read (weights + the KV cache it attends over)
  × decode steps per second; MBU = that ÷ the device's peak memory bandwidth.
- energy_per_output_token_j: the GPU's energy over the timed requests ÷ the tokens they
  generated (vLLM's gpu_energy_per_output_token_j); None without an energy reading.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from gputui.bench.stats import Spread, spread

TPOT_DEFINITION = "(request latency − TTFT) / (new tokens − 1), per request"
DECODE_BYTES_DEFINITION = ("(weight bytes + KV-cache bytes read per decode step) × decode "
                           "steps per second")


def _num(v: Any) -> float | None:
    if isinstance(v, bool) or not isinstance(v, int | float):
        return None
    return float(v) if math.isfinite(v) else None


def _int(v: Any) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def _spread(v: Any) -> Spread | None:
    return Spread.from_dict(v) if isinstance(v, Mapping) else None


@dataclass(frozen=True)
class LlmStats:
    """The result's `llm` field."""

    batch_size: int
    prompt_tokens: int
    new_tokens: int
    requests: int
    ttft_ms: Spread | None
    tpot_ms: Spread | None
    itl_ms: Spread | None
    prefill_tokens_per_s: float | None
    decode_tokens_per_s: float | None  # all sequences of the batch
    kv_cache_bytes: int | None
    weight_bytes: int | None
    decode_bytes_per_s: float | None
    peak_bytes_per_s: float | None
    mbu: float | None  # a fraction
    decode: str | None = None  # "eager" or how it was compiled
    energy_per_output_token_j: float | None = None

    def to_dict(self) -> dict[str, Any]:
        def sp(s: Spread | None) -> dict[str, Any] | None:
            return s.to_dict() if s is not None else None

        return {"batch_size": self.batch_size, "prompt_tokens": self.prompt_tokens,
                "new_tokens": self.new_tokens, "requests": self.requests,
                "ttft_ms": sp(self.ttft_ms), "tpot_ms": sp(self.tpot_ms),
                "itl_ms": sp(self.itl_ms),
                "prefill_tokens_per_s": self.prefill_tokens_per_s,
                "decode_tokens_per_s": self.decode_tokens_per_s,
                "kv_cache_bytes": self.kv_cache_bytes, "weight_bytes": self.weight_bytes,
                "decode_bytes_per_s": self.decode_bytes_per_s,
                "peak_bytes_per_s": self.peak_bytes_per_s, "mbu": self.mbu,
                "decode": self.decode, "tpot_definition": TPOT_DEFINITION,
                "decode_bytes_definition": DECODE_BYTES_DEFINITION,
                # Only where measured: results saved without it read back unchanged.
                **({"energy_per_output_token_j": self.energy_per_output_token_j}
                   if self.energy_per_output_token_j is not None else {})}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> LlmStats:
        decode = d.get("decode")
        return cls(batch_size=_int(d.get("batch_size")) or 0,
                   prompt_tokens=_int(d.get("prompt_tokens")) or 0,
                   new_tokens=_int(d.get("new_tokens")) or 0,
                   requests=_int(d.get("requests")) or 0,
                   ttft_ms=_spread(d.get("ttft_ms")), tpot_ms=_spread(d.get("tpot_ms")),
                   itl_ms=_spread(d.get("itl_ms")),
                   prefill_tokens_per_s=_num(d.get("prefill_tokens_per_s")),
                   decode_tokens_per_s=_num(d.get("decode_tokens_per_s")),
                   kv_cache_bytes=_int(d.get("kv_cache_bytes")),
                   weight_bytes=_int(d.get("weight_bytes")),
                   decode_bytes_per_s=_num(d.get("decode_bytes_per_s")),
                   peak_bytes_per_s=_num(d.get("peak_bytes_per_s")), mbu=_num(d.get("mbu")),
                   decode=decode if isinstance(decode, str) else None,
                   energy_per_output_token_j=_num(d.get("energy_per_output_token_j")))


def _rate(amount: float, ms: float) -> float | None:
    return amount / (ms / 1000.0) if ms > 0 else None


def summarize(token_ms: Sequence[Sequence[float]], *, batch_size: int, prompt_tokens: int,
              new_tokens: int, weight_bytes: int | None = None,
              kv_read_bytes: int | None = None, kv_cache_bytes: int | None = None,
              peak_bytes_per_s: float | None = None, decode: str | None = None) -> LlmStats:
    """LlmStats from each request's token gaps [TTFT, ITL₁ … ITLₙ₋₁] in ms."""
    reqs = [list(r) for r in token_ms if len(r) == new_tokens and new_tokens >= 1]
    ttft = [r[0] for r in reqs]
    decode_ms = [sum(r[1:]) for r in reqs]
    tpot = [d / (new_tokens - 1) for d in decode_ms] if new_tokens > 1 else []
    itl = [x for r in reqs for x in r[1:]]
    steps = (new_tokens - 1) * len(reqs)
    total_decode_ms = sum(decode_ms)
    steps_per_s = _rate(steps, total_decode_ms) if steps else None
    per_step = ((weight_bytes or 0) + (kv_read_bytes or 0)
                if weight_bytes is not None or kv_read_bytes is not None else None)
    bw = per_step * steps_per_s if per_step is not None and steps_per_s is not None else None
    mbu = bw / peak_bytes_per_s if bw is not None and peak_bytes_per_s else None
    return LlmStats(
        batch_size=batch_size, prompt_tokens=prompt_tokens, new_tokens=new_tokens,
        requests=len(reqs), ttft_ms=spread(ttft), tpot_ms=spread(tpot), itl_ms=spread(itl),
        prefill_tokens_per_s=_rate(batch_size * prompt_tokens * len(reqs), sum(ttft))
        if reqs else None,
        decode_tokens_per_s=_rate(batch_size * steps, total_decode_ms) if steps else None,
        kv_cache_bytes=kv_cache_bytes, weight_bytes=weight_bytes, decode_bytes_per_s=bw,
        peak_bytes_per_s=peak_bytes_per_s, mbu=mbu, decode=decode)

