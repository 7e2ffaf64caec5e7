"""gputui's lm-infer model and benchmarks/bare_lm.py's bare loop (what gpu_check.py holds
it against) issue the same operators per decode step: a difference there (a hand-written
RMSNorm of eight kernels, a mask gathered per layer) would show on a GPU as gputui slower
than the bare loop, and the comparison would blame the harness."""

from __future__ import annotations

import sys
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import bare_lm  # noqa: E402

from gputui.bench.lm_shapes import SHAPES  # noqa: E402
from gputui.bench.worker.kinds.lm_infer import decode_step  # noqa: E402
from gputui.bench.worker.lm_models import build, setup_cache  # noqa: E402

BATCH, PROMPT, NEW = 2, 5, 4


def ops_of_one_decode_step(step: Callable[[Any, Any], Any]) -> Counter[str]:
    """The aten operators one decode step runs (after a prefill), with their counts."""
    from torch.profiler import ProfilerActivity, profile

    with torch.no_grad():
        tok = step(torch.randint(0, 1024, (BATCH, PROMPT)), torch.arange(PROMPT))
        pos = torch.tensor([PROMPT])
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            step(tok, pos)
    return Counter(e.name for e in prof.events() if e.name.startswith("aten::"))


def test_model_and_bare_loop_run_the_same_operators_per_decode_step() -> None:
    shape = SHAPES["llama-tiny"]
    cfg = bare_lm.LLAMA_TINY
    # The bare loop's tiny config is the catalog's llama-tiny.
    assert (cfg["n_layer"], cfg["n_head"], cfg["dim"], cfg["ffn"], cfg["vocab"]) == (
        shape.n_layer, shape.n_head, shape.d_model, shape.ffn, shape.vocab)
    model = build(shape.with_seq_len(PROMPT + NEW), torch.device("cpu")).eval()
    setup_cache(model, BATCH, PROMPT + NEW)
    ours = ops_of_one_decode_step(lambda tok, pos: decode_step(model, tok, pos))
    bare = ops_of_one_decode_step(
        bare_lm.bare_decoder(cfg, BATCH, PROMPT + NEW, "cpu", torch.float32))
    assert ours["aten::rms_norm"] == 2 * shape.n_layer + 1  # torch's RMSNorm, not its parts
    assert ours["aten::mm"] > 0
    assert ours == bare, (ours - bare, bare - ours)
