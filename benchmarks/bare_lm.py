"""Bare LLM loops, written without gputui, for benchmarks/gpu_check.py and
benchmarks/lm_train_overhead.py to hold gputui's lm-train, lm-infer and attention against.

- `bare_train`: nanoGPT's model (model.py, condensed) and a plain training loop: AdamW
  (fused on CUDA), bf16 autocast on CUDA, no gradient accumulation or clipping.
- `bare_decode`: a Llama-2 block as gpt-fast writes it (torch's RMSNorm, the mask rows and
  rotary tables indexed once per step), a static KV cache, greedy decoding one token at a
  time, eager; decode tokens/s. gputui's lm-infer model issues the same operators per decode
  step (tests/bench/test_lm_parity.py holds them equal).
- `bare_sdpa`: scaled_dot_product_attention timed with CUDA events.

Each is timed with one synchronisation at each end of a run of seconds, after a warm-up.
"""

from __future__ import annotations

import time
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

GPT2 = {"n_layer": 12, "n_head": 12, "n_embd": 768, "block_size": 1024, "vocab_size": 50304}
GPT_TINY = {"n_layer": 2, "n_head": 4, "n_embd": 128, "block_size": 64, "vocab_size": 1024}
LLAMA2_7B = {"n_layer": 32, "n_head": 32, "dim": 4096, "ffn": 11008, "vocab": 32000}
LLAMA_TINY = {"n_layer": 2, "n_head": 4, "dim": 128, "ffn": 344, "vocab": 1024}


# ---- nanoGPT ----------------------------------------------------------------------------------

class CausalSelfAttention(nn.Module):
    def __init__(self, c: dict[str, int]) -> None:
        super().__init__()
        self.c_attn = nn.Linear(c["n_embd"], 3 * c["n_embd"])
        self.c_proj = nn.Linear(c["n_embd"], c["n_embd"])
        self.n_head = c["n_head"]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(C, dim=2)
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.c_proj(y.transpose(1, 2).contiguous().view(B, T, C))


class Block(nn.Module):
    def __init__(self, c: dict[str, int]) -> None:
        super().__init__()
        self.ln_1 = nn.LayerNorm(c["n_embd"])
        self.attn = CausalSelfAttention(c)
        self.ln_2 = nn.LayerNorm(c["n_embd"])
        self.c_fc = nn.Linear(c["n_embd"], 4 * c["n_embd"])
        self.c_proj = nn.Linear(4 * c["n_embd"], c["n_embd"])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln_1(x))
        return x + self.c_proj(F.gelu(self.c_fc(self.ln_2(x))))


class GPT(nn.Module):
    def __init__(self, c: dict[str, int]) -> None:
        super().__init__()
        self.wte = nn.Embedding(c["vocab_size"], c["n_embd"])
        self.wpe = nn.Embedding(c["block_size"], c["n_embd"])
        self.h = nn.ModuleList([Block(c) for _ in range(c["n_layer"])])
        self.ln_f = nn.LayerNorm(c["n_embd"])
        self.lm_head = nn.Linear(c["n_embd"], c["vocab_size"], bias=False)
        self.wte.weight = self.lm_head.weight

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        pos = torch.arange(idx.size(1), device=idx.device)
        x = self.wte(idx) + self.wpe(pos)
        for block in self.h:
            x = block(x)
        return self.lm_head(self.ln_f(x))


def bare_train(config: dict[str, int], batch: int, device: str, bf16: bool, *,
               steps: int | None = None, duration_s: float | None = None,
               warmup: int = 10, threads: int | None = None) -> dict[str, Any]:
    """tokens/s of a plain nanoGPT training loop."""
    if threads:
        torch.set_num_threads(threads)
    torch.manual_seed(0)
    dev = torch.device(device)
    if dev.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = False
    model = GPT(config).to(dev)
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=6e-4, betas=(0.9, 0.95), fused=dev.type == "cuda")
    T, V = config["block_size"], config["vocab_size"]
    data = [torch.randint(0, V, (batch, T + 1), device=dev) for _ in range(2)]

    def step(i: int) -> None:
        d = data[i % 2]
        x, y = d[:, :-1].contiguous(), d[:, 1:].contiguous()
        with torch.autocast(dev.type, dtype=torch.bfloat16, enabled=bf16):
            logits = model(x)
            loss = F.cross_entropy(logits.view(-1, logits.size(-1)), y.view(-1))
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    n, secs = _run(step, dev, steps, duration_s, warmup)
    return {"value": batch * T * n / secs, "unit": "tokens/s", "steps": n, "timed_s": secs}


def _sync(dev: torch.device) -> None:
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)


def _run(step: Any, dev: torch.device, steps: int | None, duration_s: float | None,
         warmup: int) -> tuple[int, float]:
    """(steps, seconds): a fixed count, or as many as fit in duration_s (checked every
    16 steps, which costs one sync each time on CUDA: negligible next to seconds)."""
    for i in range(warmup):
        step(i)
    _sync(dev)
    t0 = time.perf_counter()
    n = 0
    while True:
        step(n)
        n += 1
        if steps is not None and n >= steps:
            break
        if duration_s is not None and n % 16 == 0:
            _sync(dev)
            if time.perf_counter() - t0 >= duration_s:
                break
    _sync(dev)
    return n, time.perf_counter() - t0


# ---- gpt-fast-style Llama decode ----------------------------------------------------------------

class LlamaLayer(nn.Module):
    def __init__(self, c: dict[str, int], batch: int, max_seq: int, dtype: torch.dtype) -> None:
        super().__init__()
        d, f = c["dim"], c["ffn"]
        self.n_head, self.hd = c["n_head"], d // c["n_head"]
        self.wqkv = nn.Linear(d, 3 * d, bias=False)
        self.wo = nn.Linear(d, d, bias=False)
        self.w1 = nn.Linear(d, f, bias=False)
        self.w3 = nn.Linear(d, f, bias=False)
        self.w2 = nn.Linear(f, d, bias=False)
        self.n1 = nn.RMSNorm(d, eps=1e-5)
        self.n2 = nn.RMSNorm(d, eps=1e-5)
        shape = (batch, self.n_head, max_seq, self.hd)
        self.register_buffer("k", torch.zeros(shape, dtype=dtype))
        self.register_buffer("v", torch.zeros(shape, dtype=dtype))

    def forward(self, x: torch.Tensor, rope: torch.Tensor, mask: torch.Tensor,
                pos: torch.Tensor) -> torch.Tensor:
        B, T, C = x.shape
        q, k, v = self.wqkv(self.n1(x)).split(C, dim=-1)
        q, k = _rope(q.view(B, T, self.n_head, self.hd), rope), _rope(
            k.view(B, T, self.n_head, self.hd), rope)
        q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.view(B, T, self.n_head,
                                                                 self.hd).transpose(1, 2)
        self.k.index_copy_(2, pos, k)
        self.v.index_copy_(2, pos, v)
        y = F.scaled_dot_product_attention(q, self.k, self.v, attn_mask=mask)
        x = x + self.wo(y.transpose(1, 2).contiguous().view(B, T, C))
        h = self.n2(x)
        return x + self.w2(F.silu(self.w1(h)) * self.w3(h))


def _rope(x: torch.Tensor, rope: torch.Tensor) -> torch.Tensor:
    xs = x.float().reshape(*x.shape[:-1], -1, 2)
    r = rope.view(1, xs.size(1), 1, xs.size(3), 2)
    out = torch.stack([xs[..., 0] * r[..., 0] - xs[..., 1] * r[..., 1],
                       xs[..., 1] * r[..., 0] + xs[..., 0] * r[..., 1]], -1)
    return out.flatten(3).type_as(x)


def bare_decoder(config: dict[str, int], batch: int, max_seq: int, device: str,
                 dtype: torch.dtype) -> Any:
    """A greedy step `forward(tok, pos) -> next tok` over random weights and a static cache:
    gpt-fast's Transformer.forward — the mask rows and rotary tables indexed once per step,
    then the layers, the final norm and the output layer on the last position."""
    dev = torch.device(device)
    with torch.device("meta"):
        layers = nn.ModuleList(LlamaLayer(config, batch, max_seq, dtype)
                               for _ in range(config["n_layer"]))
        emb = nn.Embedding(config["vocab"], config["dim"])
        norm = nn.RMSNorm(config["dim"], eps=1e-5)
        out = nn.Linear(config["dim"], config["vocab"], bias=False)
    mods = nn.ModuleList([layers, emb, norm, out]).to(dtype).to_empty(device=dev)
    with torch.no_grad():
        for p in mods.parameters():
            p.normal_(0, 0.02)
        for layer in layers:
            layer.k.zero_()
            layer.v.zero_()
    hd = config["dim"] // config["n_head"]
    freqs = 1.0 / (10000 ** (torch.arange(0, hd, 2, device=dev).float() / hd))
    ang = torch.outer(torch.arange(max_seq, device=dev).float(), freqs)
    rope = torch.stack([ang.cos(), ang.sin()], -1)
    causal = torch.tril(torch.ones(max_seq, max_seq, dtype=torch.bool, device=dev))

    def forward(tok: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
        x = emb(tok)
        r, mask = rope[pos], causal[None, None, pos]
        for layer in layers:
            x = layer(x, r, mask, pos)
        return out(norm(x[:, -1:])).argmax(-1)

    return forward


def bare_decode(config: dict[str, int], batch: int, prompt: int, new: int, device: str,
                dtype: torch.dtype, duration_s: float, warmup: int = 2) -> dict[str, Any]:
    """Decode tokens/s (all sequences) of a plain eager static-KV greedy loop."""
    dev = torch.device(device)
    forward = bare_decoder(config, batch, prompt + new, device, dtype)
    prompts = torch.randint(0, config["vocab"], (batch, prompt), device=dev)
    decode_s, steps = 0.0, 0
    with torch.no_grad():
        for r in range(10_000):
            tok = forward(prompts, torch.arange(prompt, device=dev))
            pos = torch.full((1,), prompt, dtype=torch.long, device=dev)
            _sync(dev)
            t0 = time.perf_counter()
            for _ in range(new - 1):
                tok = forward(tok, pos)
                pos += 1
            _sync(dev)
            if r >= warmup:
                decode_s += time.perf_counter() - t0
                steps += new - 1
                if decode_s >= duration_s:
                    break
    return {"value": batch * steps / decode_s, "unit": "tokens/s", "decode_steps": steps,
            "timed_s": decode_s}


# ---- SDPA ---------------------------------------------------------------------------------------

def bare_sdpa(batch: int, heads: int, seq: int, head_dim: int, causal: bool, backward: bool,
              duration_s: float, warmup: int = 5) -> dict[str, Any]:
    """TFLOP/s of SDPA in bf16 on CUDA, FlashAttention's FLOP count."""
    dev = torch.device("cuda")
    q, k, v, dout = (torch.randn(batch, heads, seq, head_dim, device=dev,
                                 dtype=torch.bfloat16, requires_grad=backward)
                     for _ in range(4))

    def step(_: int) -> None:
        if backward:
            o = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
            torch.autograd.grad(o, (q, k, v), dout)
        else:
            with torch.no_grad():
                F.scaled_dot_product_attention(q, k, v, is_causal=causal)

    n, secs = _run(step, dev, None, duration_s, warmup)
    fwd = 4 * batch * seq * seq * heads * head_dim / (2 if causal else 1)
    flops = fwd * (3.5 if backward else 1.0)
    return {"value": flops * n / secs / 1e12, "unit": "TFLOP/s", "steps": n, "timed_s": secs,
            "flops_per_step": flops}
