"""The transformer shapes the LLM benchmarks build, as plain data, and their parameter counts.

Torch-free: the catalog, the FLOP formulas and the CLI read these; the worker builds the
modules from them (gputui.bench.worker.lm_models).

- "gpt" is GPT-2 as nanoGPT builds it: learned token and position embeddings, pre-LayerNorm
  blocks, a 4× GELU MLP, a final LayerNorm, the LM head tied to the token embedding, biases
  on every Linear and LayerNorm.
- "llama" is Llama-2: RMSNorm, rotary position embeddings, a SwiGLU MLP, no biases, an
  untied output layer (the shape gpt-fast measured).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Literal

Arch = Literal["gpt", "llama"]


@dataclass(frozen=True)
class LMShape:
    arch: Arch
    n_layer: int
    n_head: int
    d_model: int
    vocab: int
    seq_len: int  # the context the model is built for (GPT: rows of the position table)
    d_ff: int | None = None  # llama's SwiGLU width; GPT's MLP is 4 × d_model

    @property
    def head_dim(self) -> int:
        return self.d_model // self.n_head

    @property
    def ffn(self) -> int:
        return self.d_ff if self.d_ff is not None else 4 * self.d_model

    def with_seq_len(self, seq_len: int) -> LMShape:
        return replace(self, seq_len=seq_len)

    def to_dict(self) -> dict[str, Any]:
        return {"arch": self.arch, "n_layer": self.n_layer, "n_head": self.n_head,
                "d_model": self.d_model, "seq_len": self.seq_len, "vocab": self.vocab,
                "d_ff": self.ffn, "n_params": n_params(self)}


SHAPES: dict[str, LMShape] = {
    # nanoGPT's GPT-2 (124 M) with the vocabulary padded to 50,304 (a multiple of 64).
    "gpt2": LMShape("gpt", 12, 12, 768, 50304, 1024),
    "gpt2-medium": LMShape("gpt", 24, 16, 1024, 50304, 1024),
    # CPU defaults: seconds on a laptop core, the same code path.
    "gpt-tiny": LMShape("gpt", 2, 4, 128, 1024, 64),
    # Llama-2-7B: 6.74 B parameters, 13.5 GB in bf16.
    "llama2-7b": LMShape("llama", 32, 32, 4096, 32000, 4096, d_ff=11008),
    "llama-tiny": LMShape("llama", 2, 4, 128, 1024, 64, d_ff=344),
}


def n_params(s: LMShape) -> int:
    """Every parameter, counted once (GPT's head is tied to the token embedding)."""
    d, f, L = s.d_model, s.ffn, s.n_layer
    if s.arch == "gpt":
        # attn: qkv (3d² + 3d) and proj (d² + d); mlp: d·f + f and f·d + d; 2 LayerNorms.
        block = (3 * d * d + 3 * d) + (d * d + d) + (d * f + f) + (f * d + d) + 4 * d
        return s.vocab * d + s.seq_len * d + L * block + 2 * d
    # llama: wqkv 3d², wo d², w1/w3 d·f each, w2 f·d, two RMSNorm weights; untied output.
    block = 4 * d * d + 3 * d * f + 2 * d
    return 2 * s.vocab * d + L * block + d


def lookup_table_params(s: LMShape) -> int:
    """Parameters of the embedding tables that are only looked up: a step gathers a few
    rows of them, it neither multiplies by nor reads the whole table. GPT's position table
    and Llama's token table; GPT's token table is also its (tied) output layer, a matmul
    over the whole table, so it is not one of them."""
    return s.seq_len * s.d_model if s.arch == "gpt" else s.vocab * s.d_model


def n_params_for_flops(s: LMShape) -> int:
    """N in 6N + 12·L·d·T: the parameters without the lookup-only embedding tables, as
    nanoGPT's estimate_mfu (position table out) and torchtitan (Llama's token table out)
    count them: a table lookup is no multiply-add."""
    return n_params(s) - lookup_table_params(s)


def shape_of(model: str, seq_len: int | None = None) -> LMShape:
    s = SHAPES[model]
    return s.with_seq_len(seq_len) if seq_len else s
