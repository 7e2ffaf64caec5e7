"""The LLM benchmarks and model FLOPs, run through the worker as the runner runs them
(CPU, tiny shapes)."""

from __future__ import annotations

import pytest

from gputui.bench import flops
from gputui.bench.lm_shapes import SHAPES
from tests.bench.worker_helpers import TINY_CNN, check_ok, run_worker

torch = pytest.importorskip("torch")

CPU = {"device": "cpu", "threads": 1}


def test_lm_train_tokens_per_s_and_flops_formula() -> None:
    doc = check_ok(run_worker({"benchmark": "lm-train", **CPU, "precision": "auto",
                               "steps": 2, "warmup": 1, "batch_size": 2}))
    assert doc["model"] == "gpt-tiny" and doc["precision"] == "fp32"  # the CPU defaults
    shape = SHAPES["gpt-tiny"]
    params = doc["settings"]["params"]
    assert {k: params[k] for k in ("n_layer", "n_head", "d_model", "seq_len", "vocab")} == {
        "n_layer": 2, "n_head": 4, "d_model": 128, "seq_len": 64, "vocab": 1024}
    assert doc["samples"] == doc["steps"] * 2 * 64  # tokens
    f = doc["flops"]
    assert f["method"] == "analytic"
    assert f["per_sample"] == flops.lm_train_per_token(shape)
    assert f["counted_per_sample"] > 0
    assert f["achieved_tflops"] == pytest.approx(
        f["per_sample"] * doc["throughput"]["value"] / 1e12)
    assert f["mfu"] is None and f["peak_tflops"] is None  # no peak for a CPU


def test_counted_flops_of_resnet18_equal_flop_counter_mode() -> None:
    import torchvision
    from torch.utils.flop_counter import FlopCounterMode

    doc = check_ok(run_worker({"benchmark": "cnn-train", **TINY_CNN, "steps": 2}))
    model = torchvision.models.resnet18(weights=None)
    x = torch.randn(2, 3, 32, 32)
    with FlopCounterMode(display=False) as mode:
        torch.nn.functional.cross_entropy(model(x), torch.tensor([1, 2])).backward()
    assert doc["flops"]["method"] == "counted"
    assert doc["flops"]["counted_per_sample"] == mode.get_total_flops() / 2
    assert doc["flops"]["per_sample"] == doc["flops"]["counted_per_sample"]


def test_lm_infer_reports_ttft_tpot_and_bandwidth() -> None:
    doc = check_ok(run_worker({"benchmark": "lm-infer", **CPU, "model": "llama-tiny",
                               "steps": 3, "warmup": 1, "batch_size": 2,
                               "params": {"prompt_len": 5, "new_tokens": 4}}))
    llm = doc["llm"]
    assert (llm["batch_size"], llm["prompt_tokens"], llm["new_tokens"]) == (2, 5, 4)
    assert llm["requests"] == 3 and llm["ttft_ms"]["n"] == 3 and llm["itl_ms"]["n"] == 9
    assert llm["decode"] == "eager"
    assert doc["samples"] == 3 * 2 * 4  # generated tokens: the headline's samples
    assert llm["weight_bytes"] > 0 and llm["kv_cache_bytes"] > 0
    assert llm["decode_bytes_per_s"] > 0
    assert llm["mbu"] is None and llm["peak_bytes_per_s"] is None


def test_attention_points_name_their_backend() -> None:
    doc = check_ok(run_worker({"benchmark": "attention", **CPU, "steps": 1, "warmup": 0,
                               "params": {"min_seq": 32, "max_seq": 32, "tokens": 64,
                                          "hidden": 32, "head_dim": 16}}))
    points = doc["points"]
    assert [(p["causal"], p["pass"]) for p in points] == [
        (False, "fwd"), (False, "fwd+bwd"), (True, "fwd"), (True, "fwd+bwd")]
    assert {p["backend"] for p in points} == {"flash (cpu)"}
    p = points[1]
    assert (p["batch_size"], p["heads"], p["seq_len"], p["head_dim"]) == (2, 2, 32, 16)
    assert p["flops_per_step"] == flops.attention_flops(2, 32, 2, 16, False, True)


def test_lm_infer_sweep_points_carry_tpot_and_the_best_is_the_headline() -> None:
    doc = check_ok(run_worker({"benchmark": "lm-infer", **CPU, "model": "gpt-tiny",
                               "sweep": True, "steps": 2, "warmup": 0,
                               "params": {"prompt_len": 4, "new_tokens": 3}}))
    points = doc["points"]
    assert [p["batch_size"] for p in points] == [1, 2, 4]  # the CPU sweep's sizes
    assert all(p["tpot_ms_p90"] > 0 and p["requests"] == 2 for p in points)
    best = max(points, key=lambda p: p["throughput"])
    assert doc["batch_size"] == best["batch_size"] == doc["llm"]["batch_size"]
    assert doc["throughput"]["value"] == best["throughput"]


def test_lm_infer_repeat_keeps_each_trial_and_pools_the_requests() -> None:
    doc = check_ok(run_worker({"benchmark": "lm-infer", **CPU, "model": "gpt-tiny",
                               "steps": 2, "warmup": 0, "repeat": 2,
                               "params": {"prompt_len": 4, "new_tokens": 3}}))
    assert len(doc["trials"]) == 2 and all(t > 0 for t in doc["trials"])
    assert doc["llm"]["requests"] == 4 and doc["samples"] == 4 * 3
