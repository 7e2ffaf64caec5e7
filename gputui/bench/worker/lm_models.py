"""The transformer modules the LLM benchmarks run, and their static KV cache.

GPT is GPT-2 as nanoGPT builds it; Llama is Llama-2 as gpt-fast builds it (shapes and the
difference between them: gputui.bench.lm_shapes). Weights are random (normal, std 0.02);
nothing is downloaded.

Inference uses a static, pre-allocated KV cache (gpt-fast's): one (B, H, max_seq, head_dim)
buffer per layer for K and for V, written at the positions in `input_pos` and attended over
in full with a causal mask row per query. Shapes never change from step to step, so a decode
step can be captured in a CUDA graph, and nothing is recomputed: a decode step runs the
model over one token per sequence.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from gputui.bench.lm_shapes import LMShape


class KVCache(nn.Module):
    def __init__(self, batch: int, heads: int, max_seq: int, head_dim: int,
                 dtype: torch.dtype, device: torch.device) -> None:
        super().__init__()
        shape = (batch, heads, max_seq, head_dim)
        self.register_buffer("k", torch.zeros(shape, dtype=dtype, device=device),
                             persistent=False)
        self.register_buffer("v", torch.zeros(shape, dtype=dtype, device=device),
                             persistent=False)

    def update(self, input_pos: torch.Tensor, k: torch.Tensor,
               v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Write K/V (B, H, T, hd) at `input_pos` (T positions); return the whole cache."""
        self.k.index_copy_(2, input_pos, k)
        self.v.index_copy_(2, input_pos, v)
        return self.k, self.v

    @property
    def nbytes(self) -> int:
        return self.k.numel() * self.k.element_size() * 2


def _attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, cache: KVCache | None,
            mask_rows: torch.Tensor | None, input_pos: torch.Tensor | None) -> torch.Tensor:
    if cache is None or input_pos is None:
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)
    k, v = cache.update(input_pos, k, v)
    assert mask_rows is not None
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask_rows)


def _mask_rows(mask: torch.Tensor | None, input_pos: torch.Tensor | None) -> torch.Tensor | None:
    """The causal mask's rows of the positions being run, (1, 1, T, max_seq): indexed once
    per forward pass and shared by every layer, as gpt-fast does (one gather, not one per
    layer: an eager decode step is bound by its launches)."""
    if mask is None or input_pos is None:
        return None
    return mask[None, None, input_pos]


# ---- GPT-2 (nanoGPT) -------------------------------------------------------------------------

class GptAttention(nn.Module):
    def __init__(self, s: LMShape) -> None:
        super().__init__()
        self.n_head = s.n_head
        self.c_attn = nn.Linear(s.d_model, 3 * s.d_model, bias=True)
        self.c_proj = nn.Linear(s.d_model, s.d_model, bias=True)
        self.cache: KVCache | None = None

    def forward(self, x: torch.Tensor, mask_rows: torch.Tensor | None = None,
                input_pos: torch.Tensor | None = None) -> torch.Tensor:
        B, T, C = x.shape
        q, k, v = self.c_attn(x).split(C, dim=2)
        q, k, v = (t.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
                   for t in (q, k, v))
        y = _attend(q, k, v, self.cache, mask_rows, input_pos)
        return self.c_proj(y.transpose(1, 2).contiguous().view(B, T, C))


class GptMlp(nn.Module):
    def __init__(self, s: LMShape) -> None:
        super().__init__()
        self.c_fc = nn.Linear(s.d_model, s.ffn, bias=True)
        self.gelu = nn.GELU()
        self.c_proj = nn.Linear(s.ffn, s.d_model, bias=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.c_proj(self.gelu(self.c_fc(x)))


class GptBlock(nn.Module):
    def __init__(self, s: LMShape) -> None:
        super().__init__()
        self.ln_1 = nn.LayerNorm(s.d_model, bias=True)
        self.attn = GptAttention(s)
        self.ln_2 = nn.LayerNorm(s.d_model, bias=True)
        self.mlp = GptMlp(s)

    def forward(self, x: torch.Tensor, mask_rows: torch.Tensor | None = None,
                input_pos: torch.Tensor | None = None) -> torch.Tensor:
        x = x + self.attn(self.ln_1(x), mask_rows, input_pos)
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    def __init__(self, s: LMShape) -> None:
        super().__init__()
        self.shape = s
        self.wte = nn.Embedding(s.vocab, s.d_model)
        self.wpe = nn.Embedding(s.seq_len, s.d_model)
        self.h = nn.ModuleList(GptBlock(s) for _ in range(s.n_layer))
        self.ln_f = nn.LayerNorm(s.d_model, bias=True)
        self.lm_head = nn.Linear(s.d_model, s.vocab, bias=False)
        self.tie()
        self.mask: torch.Tensor | None = None

    def tie(self) -> None:
        self.lm_head.weight = self.wte.weight

    @torch.no_grad()
    def init_weights(self) -> None:
        """nanoGPT's: normal(0, 0.02), zero biases, residual projections 0.02/√(2L)."""
        for name, p in self.named_parameters():
            if name.endswith("bias"):
                p.zero_()
            elif "ln" in name:
                p.fill_(1.0)
            elif name.endswith("c_proj.weight"):
                p.normal_(0.0, 0.02 / math.sqrt(2 * self.shape.n_layer))
            else:
                p.normal_(0.0, 0.02)

    def forward(self, idx: torch.Tensor, input_pos: torch.Tensor | None = None,
                last_only: bool = False) -> torch.Tensor:
        T = idx.shape[1]
        pos = input_pos if input_pos is not None else torch.arange(T, device=idx.device)
        x = self.wte(idx) + self.wpe(pos)
        mask_rows = _mask_rows(self.mask, input_pos)
        for block in self.h:
            x = block(x, mask_rows, input_pos)
        # The last position is taken before the final norm (it normalises each token alone).
        return self.lm_head(self.ln_f(x[:, -1:] if last_only else x))

    def attention_layers(self) -> list[nn.Module]:
        return [b.attn for b in self.h]


# ---- Llama-2 (gpt-fast) ----------------------------------------------------------------------

def rms_norm(dim: int) -> nn.RMSNorm:
    """Llama-2's RMSNorm (eps 1e-5) as torch's own module: one fused kernel on CUDA, where
    the same arithmetic written out takes eight launches per call — an eager batch-1 decode
    step is bound by its launches, and the bare loop this is checked against uses it too."""
    return nn.RMSNorm(dim, eps=1e-5)


def rope_tables(seq_len: int, head_dim: int, base: float = 10000.0,
                device: torch.device | None = None) -> torch.Tensor:
    """(seq_len, head_dim/2, 2) cos/sin of the rotary angles (Llama-2's base 10,000)."""
    freqs = 1.0 / (base ** (torch.arange(0, head_dim, 2, device=device)[: head_dim // 2]
                            .float() / head_dim))
    t = torch.arange(seq_len, device=device, dtype=torch.float32)
    angles = torch.outer(t, freqs)
    return torch.stack([angles.cos(), angles.sin()], dim=-1)


def apply_rope(x: torch.Tensor, rope: torch.Tensor) -> torch.Tensor:
    """Rotate (B, T, H, hd) by the tables of its positions (T, hd/2, 2): pairs as Meta's."""
    xs = x.float().reshape(*x.shape[:-1], -1, 2)
    r = rope.view(1, xs.size(1), 1, xs.size(3), 2)
    out = torch.stack([xs[..., 0] * r[..., 0] - xs[..., 1] * r[..., 1],
                       xs[..., 1] * r[..., 0] + xs[..., 0] * r[..., 1]], dim=-1)
    return out.flatten(3).type_as(x)


class LlamaAttention(nn.Module):
    def __init__(self, s: LMShape) -> None:
        super().__init__()
        self.n_head = s.n_head
        self.wqkv = nn.Linear(s.d_model, 3 * s.d_model, bias=False)
        self.wo = nn.Linear(s.d_model, s.d_model, bias=False)
        self.cache: KVCache | None = None

    def forward(self, x: torch.Tensor, rope: torch.Tensor,
                mask_rows: torch.Tensor | None = None,
                input_pos: torch.Tensor | None = None) -> torch.Tensor:
        B, T, C = x.shape
        hd = C // self.n_head
        q, k, v = self.wqkv(x).split(C, dim=-1)
        q = apply_rope(q.view(B, T, self.n_head, hd), rope)
        k = apply_rope(k.view(B, T, self.n_head, hd), rope)
        v = v.view(B, T, self.n_head, hd)
        q, k, v = (t.transpose(1, 2) for t in (q, k, v))
        y = _attend(q, k, v, self.cache, mask_rows, input_pos)
        return self.wo(y.transpose(1, 2).contiguous().view(B, T, C))


class SwiGLU(nn.Module):
    def __init__(self, s: LMShape) -> None:
        super().__init__()
        self.w1 = nn.Linear(s.d_model, s.ffn, bias=False)
        self.w3 = nn.Linear(s.d_model, s.ffn, bias=False)
        self.w2 = nn.Linear(s.ffn, s.d_model, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


class LlamaBlock(nn.Module):
    def __init__(self, s: LMShape) -> None:
        super().__init__()
        self.attention_norm = rms_norm(s.d_model)
        self.attention = LlamaAttention(s)
        self.ffn_norm = rms_norm(s.d_model)
        self.feed_forward = SwiGLU(s)

    def forward(self, x: torch.Tensor, rope: torch.Tensor,
                mask_rows: torch.Tensor | None = None,
                input_pos: torch.Tensor | None = None) -> torch.Tensor:
        x = x + self.attention(self.attention_norm(x), rope, mask_rows, input_pos)
        return x + self.feed_forward(self.ffn_norm(x))


class Llama(nn.Module):
    def __init__(self, s: LMShape) -> None:
        super().__init__()
        self.shape = s
        self.tok_embeddings = nn.Embedding(s.vocab, s.d_model)
        self.layers = nn.ModuleList(LlamaBlock(s) for _ in range(s.n_layer))
        self.norm = rms_norm(s.d_model)
        self.output = nn.Linear(s.d_model, s.vocab, bias=False)
        self.rope: torch.Tensor | None = None
        self.mask: torch.Tensor | None = None

    def tie(self) -> None:
        pass  # Llama's output layer is its own

    @torch.no_grad()
    def init_weights(self) -> None:
        for name, p in self.named_parameters():
            if "norm" in name:
                p.fill_(1.0)
            else:
                p.normal_(0.0, 0.02)

    def forward(self, idx: torch.Tensor, input_pos: torch.Tensor | None = None,
                last_only: bool = False) -> torch.Tensor:
        assert self.rope is not None, "build() makes the rotary tables"
        T = idx.shape[1]
        rope = self.rope[input_pos] if input_pos is not None else self.rope[:T]
        x = self.tok_embeddings(idx)
        mask_rows = _mask_rows(self.mask, input_pos)
        for block in self.layers:
            x = block(x, rope, mask_rows, input_pos)
        return self.output(self.norm(x[:, -1:] if last_only else x))

    def attention_layers(self) -> list[nn.Module]:
        return [b.attention for b in self.layers]


# ---- building -------------------------------------------------------------------------------

def build(s: LMShape, device: torch.device, dtype: torch.dtype = torch.float32,
          seed: int = 0) -> GPT | Llama:
    """The model with random weights in `dtype` on `device`, made on the meta device first so
    a 7 B model never exists in fp32 on the host."""
    cls = GPT if s.arch == "gpt" else Llama
    with torch.device("meta"):
        model = cls(s)
    model = model.to(dtype=dtype).to_empty(device=device)
    model.tie()  # to_empty makes new tensors: the head must share the embedding again
    torch.manual_seed(seed)
    model.init_weights()
    if isinstance(model, Llama):
        _buffer(model, "rope", rope_tables(s.seq_len, s.head_dim, device=device))
    return model


def setup_cache(model: GPT | Llama, batch: int, max_seq: int) -> int:
    """Allocate a static KV cache for `batch` sequences of up to `max_seq` tokens, in the
    model's dtype; return its size in bytes."""
    s = model.shape
    p = next(model.parameters())
    total = 0
    for layer in model.attention_layers():
        cache = KVCache(batch, s.n_head, max_seq, s.head_dim, p.dtype, p.device)
        layer.cache = cache
        total += cache.nbytes
    _buffer(model, "mask",
            torch.tril(torch.ones(max_seq, max_seq, dtype=torch.bool, device=p.device)))
    return total


def _buffer(model: nn.Module, name: str, value: torch.Tensor) -> None:
    """Set a non-persistent buffer made after construction: a buffer (not a plain tensor
    attribute) is what torch.compile and CUDA graphs treat as the module's own state."""
    model.__dict__.pop(name, None)
    model._buffers.pop(name, None)
    model.register_buffer(name, value, persistent=False)


def weight_bytes(model: nn.Module) -> int:
    """Bytes a forward step reads of the parameters: each counted once (a tied head is the
    embedding), without the tables that are only looked up (Llama's token embedding, GPT's
    position table: a step gathers B rows of them, gpt-fast's model size skips them too).
    A table that is also a Linear's weight (GPT's tied token embedding) is read whole."""
    looked_up = {id(m.weight) for m in model.modules() if isinstance(m, nn.Embedding)}
    looked_up -= {id(p) for m in model.modules() if not isinstance(m, nn.Embedding)
                  for p in m.parameters(recurse=False)}
    return sum(p.numel() * p.element_size() for p in model.parameters()
               if id(p) not in looked_up)


def param_count(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())
