"""Published LLM and attention figures: compared only on matching settings."""

from __future__ import annotations

from typing import Any

import pytest

from gputui.bench import references
from gputui.bench.result import Result

A100 = "NVIDIA A100-SXM4-80GB"
H100 = "NVIDIA H100 80GB HBM3"


def _infer(**over: Any) -> Result:
    doc: dict[str, Any] = {
        "benchmark": "lm-infer", "model": "llama2-7b", "precision": "bf16", "batch_size": 1,
        "device": "cuda:0", "device_name": A100, "throughput": {"value": 94.41},
        "settings": {"compile": True}}
    doc.update(over)
    return Result.from_dict(doc)


def test_gpt_fast_llama_figure_matches_its_settings() -> None:
    cmp = references.for_result(_infer())
    assert cmp is not None
    assert cmp.reference.value == 104.9 and cmp.reference.label == "gpt-fast"
    assert cmp.ratio == pytest.approx(0.9)


@pytest.mark.parametrize(("over", "why"), [
    ({"batch_size": 4}, "batch 4"),
    ({"settings": {"compile": False}}, "not compiled"),
    ({"device_name": H100}, "is not a A100"),
    ({"precision": "fp16"}, "precision fp16"),
    ({"model": "gpt2"}, "model gpt2"),
])
def test_gpt_fast_figure_does_not_match_other_settings(over: dict[str, Any], why: str) -> None:
    doc = _infer(**over)
    assert references.for_result(doc) is None
    ref = next(r for r in references.REFERENCES if r.benchmark == "lm-infer")
    reason = references.mismatch(ref, references.RunSettings.from_result(doc))
    assert reason is not None and why in reason


def _attention(points: list[tuple[str, float]], name: str = H100) -> Result:
    return Result.from_dict({
        "benchmark": "attention", "model": None, "precision": "bf16", "batch_size": None,
        "device": "cuda:0", "device_name": name, "throughput": {"value": 1.0},
        "points": [{"label": lab, "throughput": v, "unit": "TFLOP/s"} for lab, v in points]})


def test_attention_compared_at_the_flashattention_shape_only() -> None:
    cmp = references.for_result(_attention([("d64 s512 full fwd", 100.0),
                                            ("d128 s16384 full fwd", 333.0)]))
    assert cmp is not None and cmp.reference.point == "d128 s16384 full fwd"
    assert cmp.ratio == pytest.approx(333.0 / 370.0)
    # The shape the paper measured was not run, or another GPU ran it: no comparison.
    assert references.for_result(_attention([("d64 s512 full fwd", 100.0)])) is None
    assert references.for_result(_attention([("d128 s16384 full fwd", 333.0)],
                                            name=A100)) is None
