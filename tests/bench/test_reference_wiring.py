"""A published reference travels through a whole run: the runner's result (extra.reference),
the saved document, the CLI summary and `bench show`; only when every setting matches."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest

from gputui.bench import results_store
from gputui.bench.request import make_request
from gputui.bench.result import Result
from gputui.bench.runner import BenchRun

from .test_cli_bench import Gputui

FAKE = Path(__file__).with_name("fake_worker.py")
REPO = Path(__file__).resolve().parents[2]

# resnet50 AMP training at batch 256, 224², channels-last, on one A100 80GB: the settings
# of NVIDIA DeepLearningExamples' 2,470 images/s.
MATCH: dict[str, Any] = {
    "benchmark": "cnn-train", "model": "resnet50", "precision": "fp16", "batch_size": 256,
    "device": "cuda:0", "device_name": "NVIDIA A100-SXM4-80GB",
    "throughput": {"value": 2321.8, "median": 2320.0, "mean": 2321.8, "unit": "images/s",
                   "p10": 2300.0, "p90": 2330.0},
    "settings": {"image_size": 224, "channels_last": True, "nproc": 1, "batch_size": 256},
}


@pytest.fixture(autouse=True)
def data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("GPUTUI_DATA_DIR", str(tmp_path))
    return tmp_path


def run_with(patch: dict[str, Any]) -> Result:
    env = {**os.environ, "PYTHONPATH": str(REPO), "FAKE_WORKER_MODE": "ok",
           "FAKE_RESULT_PATCH": json.dumps(patch)}
    run = BenchRun(make_request("cnn-train", device="cpu"), env=env, telemetry=False,
                   worker_cmd=[sys.executable, str(FAKE)])
    result = run.run()
    assert result.status == "ok"
    results_store.save(result)
    return result


def show(gputui: Gputui, result: Result) -> str:
    proc = gputui("bench", "show", result.id, env={"COLUMNS": "250"})
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_a_matching_run_carries_the_ratio_everywhere(gputui: Gputui) -> None:
    r = run_with(MATCH)
    ref = r.extra.reference
    assert ref is not None
    assert ref.ratio == pytest.approx(2321.8 / 2470.0)
    assert ref.text == "0.94× NVIDIA DeepLearningExamples, A100 80GB, AMP, batch 256"
    assert ref.reference["value"] == 2470.0 and "DeepLearningExamples" in ref.source
    saved = json.loads(gputui("bench", "show", r.id, "--json").stdout)
    assert saved["extra"]["reference"] == ref.to_json()
    assert "vs published" in show(gputui, r) and ref.text in show(gputui, r)


def test_a_mismatch_on_batch_gets_no_comparison(gputui: Gputui) -> None:
    r = run_with({**MATCH, "batch_size": 128,
                  "settings": {**MATCH["settings"], "batch_size": 128}})
    assert r.extra.reference is None
    assert "vs published" not in show(gputui, r)


def test_a_mismatch_on_gpu_gets_no_comparison(gputui: Gputui) -> None:
    r = run_with({**MATCH, "device_name": "NVIDIA H100 80GB HBM3"})
    assert r.extra.reference is None
    assert "vs published" not in show(gputui, r)


def test_a_cpu_run_never_gets_a_comparison() -> None:
    r = run_with({**MATCH, "device": "cpu", "device_name": "Test CPU"})
    assert r.extra.reference is None
