"""Error kinds, test hooks, cancellation, and the plain-Python protocol pieces."""

from __future__ import annotations

import json
import signal
import subprocess

import pytest
import torch

from gputui.bench import catalog, events, peaks, run_spec
from gputui.errors import UsageError

from .worker_helpers import TINY_CNN, check_ok, run_worker, worker_cmd, worker_env


@pytest.mark.parametrize(("patch", "words"), [
    ({"model": "resnet9000"}, "unknown model"),
    ({"benchmark": "nope"}, "unknown benchmark"),
    ({"batch_size": 0}, "batch size"),
    ({"precision": "fp16"}, "fp16"),
    ({"precision": "fp8"}, "precision"),
    ({"batch_size": 1}, "batch size of at least 2"),
])
def test_invalid_spec_is_one_line_invalid_error(patch: dict, words: str) -> None:
    run = run_worker({"benchmark": "cnn-train", **TINY_CNN, **patch})
    assert run.rc == 2
    assert [e["event"] for e in run.events] == ["error"]
    err = run.error
    assert err["kind"] == "invalid"
    assert words in err["message"] and "\n" not in err["message"]


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the no-GPU message")
def test_cuda_without_gpu_is_invalid() -> None:
    run = run_worker({"benchmark": "matmul", "device": "cuda"})
    assert run.rc == 2 and run.error["kind"] == "invalid"
    assert "no CUDA device" in run.error["message"]


def test_crash_hook() -> None:
    run = run_worker({"benchmark": "cnn-train", **TINY_CNN, "test_hook": "crash"}, hooks=True)
    assert run.rc == 1
    assert run.events[0]["event"] == "started"
    assert run.error["kind"] == "crash"
    assert "simulated crash" in run.error["message"]
    assert not run.of("result")


def test_oom_hook_reports_batch_and_suggestion() -> None:
    run = run_worker({"benchmark": "cnn-train", **TINY_CNN, "batch_size": 4,
                      "test_hook": "oom"}, hooks=True)
    assert run.rc == 1
    err = run.error
    assert err["kind"] == "oom"
    assert err["batch_size"] == 4
    assert "batch 4" in err["message"]
    assert "--batch-size 2" in err["suggestion"] and "batch-finder" in err["suggestion"]


def test_hooks_ignored_without_env_var() -> None:
    run = run_worker({"benchmark": "cnn-train", **TINY_CNN, "test_hook": "crash"})
    check_ok(run)


def test_sigterm_gives_cancelled_partial_result() -> None:
    spec = {"benchmark": "cnn-train", **TINY_CNN, "steps": None, "duration_s": 120}
    proc = subprocess.Popen(worker_cmd(spec), stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True, env=worker_env())
    try:
        assert proc.stdout is not None
        seen = []
        for line in proc.stdout:
            ev = events.decode(line)
            assert ev is not None
            seen.append(ev)
            if isinstance(ev, events.Progress):
                proc.send_signal(signal.SIGTERM)
                break
        rest = [events.decode(ln) for ln in proc.stdout]
        rc = proc.wait(timeout=60)
    finally:
        proc.kill()
        proc.wait()
    assert rc == 0
    res = [e for e in rest if isinstance(e, events.ResultReady)]
    assert len(res) == 1
    doc = res[0].result
    assert doc["status"] == "cancelled"
    assert doc["steps"] >= 1 and doc["throughput"]["median"] > 0
    assert doc["throughput"]["value"] > 0


def test_validate_spec_fills_contract_keys() -> None:
    spec = run_spec.validate_spec({"benchmark": "cnn-infer", "device": "cpu"})
    assert set(run_spec.SPEC_DEFAULTS) <= set(spec)
    assert spec["model"] == "resnet18"
    resolved = run_spec.resolve_spec(spec, "cpu")
    assert resolved["mode"] == "throughput" and resolved["batch_size"] > 0
    assert run_spec.resolve_spec({**spec, "mode": "latency"}, "cpu")["batch_size"] == 1
    # A caller's step bound is not combined with the default duration on CUDA.
    assert run_spec.resolve_spec({**spec, "steps": 5}, "cuda")["duration_s"] is None


@pytest.mark.parametrize("spec", [
    {"benchmark": "matmul", "model": "resnet18"},
    {"benchmark": "cnn-train", "mode": "latency"},
    {"benchmark": "cnn-infer", "nproc": 2},
    {"benchmark": "cnn-infer", "model": "vit_b_16", "image_size": 40},
    {"benchmark": "cnn-train", "device": "tpu"},
    {"benchmark": "cnn-train", "steps": -1},
    {"benchmark": "cnn-train", "duration_s": 0},
    {"benchmark": "cnn-train", "device": "cpu", "precision": "tf32"},
])
def test_validate_spec_rejects(spec: dict) -> None:
    with pytest.raises(UsageError):
        run_spec.validate_spec(spec)


def test_catalog_is_plain_data() -> None:
    for b in catalog.BENCHMARKS.values():
        assert b.kind in ("train", "infer", "probe") and b.description and b.unit
        json.dumps(b.defaults("cpu"))
        json.dumps(b.defaults("cuda"))
    a100 = peaks.match("NVIDIA A100-SXM4-80GB").row
    assert a100 is not None and a100.mem_bw_gbps == 2039
    assert peaks.match("AMD EPYC").row is None
    est = peaks.estimate(None, (8, 0), 108, 1410)
    assert est is not None and round(est.tflops("fp16")) == 312


def test_parse_event_roundtrip_and_rejects() -> None:
    line = events.encode(events.error("oom", "out of\nmemory", batch_size=8), 1.5)
    assert json.loads(line)["v"] == 1
    ev = events.decode(line)
    assert isinstance(ev, events.Failed)
    assert ev.error_kind == "oom" and ev.message == "out of memory" and ev.batch_size == 8
    assert ev.t == 1.5
    assert events.decode("warning: not json") is None
    assert events.decode('{"event":"progress","t":1,"v":1}') is None  # fields missing
    assert events.decode('{"event":"bogus","t":1,"v":1}') is None
    assert events.decode(events.encode(events.Warmup(1, 2), 0.1)) == events.Warmup(1, 2, t=0.1)
    nan = events.encode(events.Point(label="x", batch_size=None, throughput=float("nan"),
                                     unit="GB/s", extra={"dtype": "fp16"}), 0.0)
    point = events.decode(nan)
    assert isinstance(point, events.Point) and point.throughput is None
    assert point.get("dtype") == "fp16"  # a kind's own field survives the round trip
