"""The LLM benchmark models: parameter counts, FLOP formula, and the static KV cache."""

from __future__ import annotations

import pytest
import torch

from gputui.bench import flops
from gputui.bench.lm_shapes import SHAPES, LMShape, n_params, n_params_for_flops
from gputui.bench.worker.lm_models import build, param_count, setup_cache, weight_bytes


@pytest.mark.parametrize("name", ["gpt-tiny", "llama-tiny"])
def test_n_params_is_the_models_own_count(name: str) -> None:
    s = SHAPES[name]
    model = build(s, torch.device("cpu"))
    assert n_params(s) == param_count(model)
    # A tied head is one tensor: its bytes are counted once.
    assert weight_bytes(model) == 4 * param_count(model)


def test_published_sizes() -> None:
    # GPT-2 small with its own vocabulary has 124,439,808 parameters (Hugging Face's
    # count); nanoGPT prints 123.69 M for its padded vocabulary without position embeddings.
    assert n_params(LMShape("gpt", 12, 12, 768, 50257, 1024)) == 124_439_808
    assert n_params_for_flops(SHAPES["gpt2"]) == 123_689_472
    # Llama-2-7B has 6.74 B parameters.
    assert round(n_params(SHAPES["llama2-7b"]) / 1e9, 2) == 6.74


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
