"""The LLM benchmarks and model FLOPs, run through the worker as the runner runs them
(CPU, tiny shapes)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from gputui.bench import events, flops
from gputui.bench.lm_shapes import SHAPES, n_params_for_flops
from tests.bench.worker_helpers import TINY_CNN, Run, check_ok, run_worker, wire, worker_env

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
    # Read per decode step: every weight but the token table (gathered, 2 rows a step).
    assert llm["weight_bytes"] == 4 * n_params_for_flops(SHAPES["llama-tiny"])
    assert llm["kv_cache_bytes"] > 0 and llm["decode_bytes_per_s"] > 0
    assert llm["mbu"] is None and llm["peak_bytes_per_s"] is None
    # Model FLOPs per generated token hold the prompt's share: the throughput's time holds
    # each request's prefill of 5 tokens and its 3 decode steps, for 4 tokens a sequence.
    f = doc["flops"]
    forward = flops.lm_forward_per_token(SHAPES["llama-tiny"].with_seq_len(5 + 4))
    assert f["per_sample"] == pytest.approx(forward * (5 + 4 - 1) / 4)
    assert "(P + G − 1) / G" in f["formula"]
    assert f["achieved_tflops"] == pytest.approx(
        f["per_sample"] * doc["throughput"]["value"] / 1e12)


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


def run_worker_compiling_with_dynamo_eager(spec: dict[str, object]) -> Run:
    """The worker with torch.compile's backend set to dynamo's "eager": dynamo traces,
    guards and counts recompiles as it does for inductor, without inductor's C++ builds
    (minutes on a CPU)."""
    code = ("import functools, sys, torch\n"
            "torch.compile = functools.partial(torch.compile, backend='eager')\n"
            "from gputui.bench.worker.main import main\n"
            "sys.exit(main(sys.argv[1:]))")
    cmd = [sys.executable, "-c", code, "--spec-json", json.dumps(spec)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=280,
                          env=worker_env())
    evs = [events.decode(ln) for ln in proc.stdout.splitlines() if ln.strip()]
    return Run(proc.returncode, [wire(e) for e in evs if e is not None], proc.stderr)


def test_compiled_sweep_over_ten_batch_sizes_completes() -> None:
    """Each batch size compiles its own decode graph; dynamo allows a function 8, and with
    fullgraph=True the 9th was a hard failure (the limit is dynamo's, whatever the
    backend)."""
    doc = check_ok(run_worker_compiling_with_dynamo_eager({
        "benchmark": "lm-infer", **CPU, "model": "gpt-tiny", "compile": True,
        "batch_sizes": list(range(1, 11)), "steps": 1, "warmup": 0,
        "params": {"prompt_len": 4, "new_tokens": 3}}))
    assert [p["batch_size"] for p in doc["points"]] == list(range(1, 11))
    assert all(p["ok"] and p["throughput"] > 0 for p in doc["points"])
    assert doc["llm"]["decode"].startswith("torch.compile")
    assert doc["settings"]["batch_sizes"] == list(range(1, 11))
    assert doc["settings"]["warmup"] == 1  # compiling happens before the timed requests


def test_compiled_lm_train_warms_up_before_timing_even_when_told_not_to() -> None:
    run = run_worker_compiling_with_dynamo_eager({
        "benchmark": "lm-train", **CPU, "compile": True, "steps": 2, "warmup": 0,
        "batch_size": 2})
    doc = check_ok(run)
    kinds = [e["event"] for e in run.events]
    assert "warmup" in kinds and "progress" in kinds
    assert kinds.index("warmup") < kinds.index("progress")
    assert doc["settings"]["warmup"] == 1 and doc["steps"] == 2
