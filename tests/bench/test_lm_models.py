"""The LLM benchmark models: parameter counts, FLOP formula, and the static KV cache."""

from __future__ import annotations

import pytest
import torch

from gputui.bench import flops
from gputui.bench.lm_shapes import (
    SHAPES,
    LMShape,
    lookup_table_params,
    n_params,
    n_params_for_flops,
)
from gputui.bench.worker.lm_models import build, param_count, setup_cache, weight_bytes

# Counted by hand. gpt-tiny (d 128, MLP 512, 2 layers, vocabulary 1,024, 64 positions): a
# block is qkv 3·128² + 384, proj 128² + 128, MLP 128·512 + 512 and 512·128 + 128, two
# LayerNorms 4·128 = 198,272; the model 1,024·128 (token table, also the tied head) +
# 64·128 (position table) + 2 blocks + final LayerNorm 256 = 536,064.
# llama-tiny (d 128, SwiGLU 344, 2 layers, vocabulary 1,024): a block is 4·128² +
# 3·128·344 + 2·128 = 197,888; the model 1,024·128 (token table) + 1,024·128 (output) + 2
# blocks + final norm 128 = 658,048.
HAND = {
    # name: (every parameter, N for 6N: without the lookup-only table, its size)
    "gpt-tiny": (536_064, 536_064 - 64 * 128, 64 * 128),
    "llama-tiny": (658_048, 658_048 - 1024 * 128, 1024 * 128),
}


@pytest.mark.parametrize("name", ["gpt-tiny", "llama-tiny"])
def test_parameter_counts_equal_the_hand_counts_and_the_models_own(name: str) -> None:
    s = SHAPES[name]
    total, for_flops, table = HAND[name]
    model = build(s, torch.device("cpu"))
    assert n_params(s) == param_count(model) == total
    assert lookup_table_params(s) == table
    assert n_params_for_flops(s) == for_flops
    # A decode step reads every weight once (GPT's tied head once, as the output layer),
    # but only gathers rows of a lookup-only table: its bytes are not read per step.
    assert weight_bytes(model) == 4 * for_flops
    assert weight_bytes(model.to(torch.bfloat16)) == 2 * for_flops


def test_published_sizes() -> None:
    # GPT-2 small with its own vocabulary has 124,439,808 parameters (Hugging Face's
    # count); nanoGPT prints 123.69 M for its padded vocabulary without position embeddings.
    assert n_params(LMShape("gpt", 12, 12, 768, 50257, 1024)) == 124_439_808
    assert n_params_for_flops(SHAPES["gpt2"]) == 123_689_472
    # Llama-2-7B has 6.74 B parameters; 6.61 B without its token table (32,000 × 4,096),
    # which a decode step gathers B rows of: 13.2 GB of bf16 weights read per step.
    assert round(n_params(SHAPES["llama2-7b"]) / 1e9, 2) == 6.74
    assert n_params_for_flops(SHAPES["llama2-7b"]) == n_params(SHAPES["llama2-7b"]) - 131_072_000


def test_generation_flops_count_the_prompt_share() -> None:
    """Per generated token: the forward passes of the prompt and of the G − 1 decode steps
    of a sequence, shared by its G tokens — (P + G − 1) / G forward passes."""
    s = SHAPES["llama-tiny"]
    fwd = flops.lm_forward_per_token(s.with_seq_len(128 + 128))
    assert flops.lm_generate_per_token(s, 128, 128) == pytest.approx(fwd * 255 / 128)
    # The same context with a longer prompt: more of each token's work is the prompt's.
    assert flops.lm_generate_per_token(s, 224, 32) == pytest.approx(
        flops.lm_forward_per_token(s.with_seq_len(256)) * 255 / 32)
    # One new token: the prompt's forward pass is all there is.
    assert flops.lm_generate_per_token(s, 16, 1) == pytest.approx(
        flops.lm_forward_per_token(s.with_seq_len(17)) * 16)


def test_train_flops_formula() -> None:
    s = LMShape("gpt", n_layer=3, n_head=2, d_model=16, vocab=100, seq_len=8)
    n = n_params(s) - 8 * 16
    assert flops.lm_train_per_token(s) == 6 * n + 12 * 3 * 16 * 8
    assert flops.lm_forward_per_token(s) == pytest.approx((6 * n + 12 * 3 * 16 * 8) / 3)


@pytest.mark.parametrize("name", ["gpt-tiny", "llama-tiny"])
def test_cached_decoding_equals_full_recompute(name: str) -> None:
    """Prefill a prompt into the static cache, then decode one token at a time: every
    step's logits equal a fresh forward pass over the whole sequence so far."""
    torch.manual_seed(0)
    s = SHAPES[name].with_seq_len(24)
    model = build(s, torch.device("cpu"), seed=1).eval()
    batch, prompt, new = 2, 6, 8
    setup_cache(model, batch, prompt + new)
    seq = torch.randint(0, s.vocab, (batch, prompt))
    with torch.no_grad():
        logits = model(seq, torch.arange(prompt), last_only=True)
        for step in range(new):
            full = model.forward(seq)[:, -1:]  # no input_pos: no cache, causal SDPA
            torch.testing.assert_close(logits, full, rtol=1e-5, atol=1e-5)
            nxt = logits.argmax(-1)
            pos = torch.tensor([prompt + step])
            seq = torch.cat([seq, nxt], dim=1)
            if step < new - 1:
                logits = model(nxt, pos, last_only=True)


def test_cache_that_is_not_written_is_caught() -> None:
    """The comparison above can fail: decoding with a cache that was never filled gives
    other logits than the full recompute."""
    s = SHAPES["gpt-tiny"].with_seq_len(16)
    model = build(s, torch.device("cpu"), seed=1).eval()
    setup_cache(model, 1, 8)
    seq = torch.randint(0, s.vocab, (1, 4))
    with torch.no_grad():
        step = model(seq[:, -1:], torch.tensor([3]), last_only=True)
        full = model(seq)[:, -1:]
    assert not torch.allclose(step, full, atol=1e-3)
