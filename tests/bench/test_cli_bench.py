"""`gputui bench ...` as a user runs it: exit codes, one-line errors, output. The CLI runs
in-process (`gputui.cli.main`); the worker is always a real child process; Ctrl-C and the
import check use a subprocess of the CLI itself."""

from __future__ import annotations

import csv
import functools
import importlib.util
import io
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psutil
import pytest

from gputui.bench import results_store
from tests.cli import CliResult

from .test_results import make_doc

HAS_TORCH = importlib.util.find_spec("torch") is not None
needs_torch = pytest.mark.skipif(not HAS_TORCH, reason="needs torch (the bench extra)")
WAIT_S = 240.0
TINY = ["--model", "resnet18", "--device", "cpu", "--image-size", "32", "--batch-size", "2",
        "--warmup", "1"]


@pytest.fixture(autouse=True)
def data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("GPUTUI_DATA_DIR", str(tmp_path))
    return tmp_path


Gputui = Callable[..., CliResult]


@functools.cache
def cuda_available() -> bool:
    probe = subprocess.run([sys.executable, "-c", "import torch; print(torch.cuda.is_available())"],
                           capture_output=True, text=True, timeout=WAIT_S)
    return probe.stdout.strip() == "True"


def assert_usage_error(proc: CliResult, fragment: str) -> None:
    assert proc.returncode == 2, proc.stderr
    # Exactly one line: no blank line before it (a progress bar's leftovers) or after.
    assert proc.stderr.endswith("\n") and proc.stderr.count("\n") == 1, repr(proc.stderr)
    lines = proc.stderr.splitlines()
    assert lines[0].startswith("gputui: ")
    assert fragment in lines[0]
    assert "Traceback" not in proc.stderr
    assert proc.stdout == ""


def test_list_table_and_json(gputui: Gputui) -> None:
    proc = gputui("bench", "list")
    assert proc.returncode == 0, proc.stderr
    assert "cnn-train" in proc.stdout and "matmul" in proc.stdout
    proc = gputui("bench", "list", "--json")
    catalog = json.loads(proc.stdout)
    by_name = {b["name"]: b for b in catalog}
    assert by_name["cnn-infer"]["default_model"] == "resnet18"
    assert by_name["cnn-infer"]["defaults"]["cpu"]["batch_size"] > 0
    assert all(b["description"] and "\n" not in b["description"] for b in catalog)


def test_list_does_not_import_torch() -> None:
    code = ("import sys; from gputui.cli import main; main(['bench', 'list', '--json']); "
            "assert 'torch' not in sys.modules, 'torch imported'")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=WAIT_S)
    assert proc.returncode == 0, proc.stderr


@pytest.mark.parametrize(
    ("argv", "fragment"),
    [
        (["run", "nope"], "unknown benchmark 'nope'"),
        (["run", "cnn-train", "--model", "resnet9000"], "unknown model 'resnet9000'"),
        (["run", "cnn-train", "--batch-size", "0"], "--batch-size"),
        (["run", "cnn-train", "--batch-size", "-3"], "--batch-size"),
        (["run", "cnn-train", "--device", "cpu", "--precision", "fp16"], "fp16"),
        (["run", "cnn-train", "--steps", "3", "--duration", "2"], "not allowed with"),
        (["run", "cnn-train", "--device", "tpu"], "bad device"),
        (["show", "20990101-000000-000-abcdef"], "no result with id"),
        (["compare", "nope-a", "nope-b"], "no result with id 'nope-a'"),
        (["export", "nope"], "no result with id"),
        (["run", "cnn-infer", "--mode", "latency", "--batch-size", "4"],
         "latency mode is single-stream: batch size 1"),
        ([], "choose a bench command"),
        (["run", "lm-infer", "--batch-sizes", "1,0"], "--batch-sizes"),
        (["run", "lm-infer", "--batch-sizes", "1,x"], "not a whole number: 'x'"),
        (["run", "lm-infer", "--batch-sizes", ","], "comma-separated list"),
        (["run", "matmul", "--batch-sizes", "1,2"], "not matmul"),
        (["run", "lm-infer", "--batch-sizes", "1,2", "--batch-size", "8"],
         "give --batch-size or --batch-sizes, not both"),
    ],
)
def test_bad_input_is_one_line_exit_2(argv: list[str], fragment: str, gputui: Gputui) -> None:
    proc = gputui("bench", *argv)
    if not argv:
        # `gputui bench` alone also prints its usage; the error is still the last line.
        assert proc.returncode == 2
        assert proc.stderr.strip().splitlines()[-1].startswith("gputui: ")
        assert fragment in proc.stderr and "Traceback" not in proc.stderr
        return
    assert_usage_error(proc, fragment)


def test_history_show_compare_export(data_dir: Path, gputui: Gputui) -> None:
    a = make_doc(throughput=100.0, batch=8, started="2025-01-01T00:00:00.000Z")
    b = make_doc(throughput=125.0, batch=16, started="2025-01-02T00:00:00.000Z")
    results_store.save(a)
    results_store.save(b)

    proc = gputui("bench", "history", "--json")
    assert proc.returncode == 0, proc.stderr
    assert [r["id"] for r in json.loads(proc.stdout)] == [a["id"], b["id"]]
    proc = gputui("bench", "history")
    assert proc.returncode == 0 and a["id"][:15] in proc.stdout

    proc = gputui("bench", "show", b["id"], "--json")
    assert json.loads(proc.stdout)["id"] == b["id"]
    proc = gputui("bench", "show", b["id"])
    assert proc.returncode == 0 and "125" in proc.stdout

    proc = gputui("bench", "compare", a["id"], b["id"], "--json")
    cmp = json.loads(proc.stdout)
    tp = next(m for m in cmp["metrics"] if m["name"] == "throughput")
    assert tp["ratio_b_over_a"] == pytest.approx(1.25)
    assert any(s["name"] == "batch_size" and s["differs"] for s in cmp["settings"])
    proc = gputui("bench", "compare", a["id"], b["id"])
    assert proc.returncode == 0 and "1.250×" in proc.stdout and "batch_size" in proc.stdout

    proc = gputui("bench", "export")
    rows = list(csv.DictReader(io.StringIO(proc.stdout)))
    assert [r["id"] for r in rows] == [a["id"], b["id"]]
    out = data_dir / "out.md"
    proc = gputui("bench", "export", "--format", "markdown", "--output", str(out))
    assert proc.returncode == 0 and proc.stdout == ""
    assert out.read_text().count("\n") == 4


def test_corrupt_result_file(data_dir: Path, gputui: Gputui) -> None:
    good = make_doc()
    results_store.save(good)
    bad = data_dir / "results" / "20250101-000000-000-badbad.json"
    bad.write_text("{ not json")
    proc = gputui("bench", "show", "20250101-000000-000-badbad")
    assert proc.returncode == 1
    assert proc.stderr.strip().count("\n") == 0 and str(bad) in proc.stderr
    proc = gputui("bench", "history", "--json")
    assert proc.returncode == 0
    assert [r["id"] for r in json.loads(proc.stdout)] == [good["id"]]
    assert "warning" in proc.stderr and str(bad) in proc.stderr


# --------------------------------------------------------------------------- real worker


@needs_torch
def test_run_json_prints_only_the_result(data_dir: Path, gputui: Gputui) -> None:
    out = data_dir / "copy.json"
    proc = gputui("bench", "run", "cnn-infer", *TINY, "--steps", "3", "--json",
                  "--output", str(out))
    assert proc.returncode == 0, proc.stderr
    doc: dict[str, Any] = json.loads(proc.stdout)
    assert doc["status"] == "ok" and doc["benchmark"] == "cnn-infer"
    assert doc["throughput"]["median"] > 0
    assert json.loads(out.read_text()) == doc
    saved = data_dir / "results" / f"{doc['id']}.json"
    assert json.loads(saved.read_text()) == doc


@needs_torch
def test_run_prints_a_summary(data_dir: Path, gputui: Gputui) -> None:
    proc = gputui("bench", "run", "cnn-infer", *TINY, "--steps", "2",
                  env={"COLUMNS": "200"})
    assert proc.returncode == 0, proc.stderr
    assert "throughput" in proc.stdout and "saved" in proc.stdout
    assert "samples / seconds of the timed loop" in proc.stdout  # the headline, named
    # Two step times: their percentiles are shown, marked as resting on too few values.
    assert "step time" in proc.stdout and "(from 2 values)" in proc.stdout


@needs_torch
def test_cuda_without_cuda_is_usage_error(gputui: Gputui) -> None:
    if cuda_available():
        pytest.skip("this machine has CUDA")
    proc = gputui("bench", "run", "cnn-infer", "--device", "cuda", "--steps", "1")
    assert_usage_error(proc, "CUDA")
    assert not (Path(os.environ["GPUTUI_DATA_DIR"]) / "results").exists() or not list(
        (Path(os.environ["GPUTUI_DATA_DIR"]) / "results").iterdir())


@needs_torch
def test_oom_is_reported_with_batch_and_suggestion(data_dir: Path, gputui: Gputui) -> None:
    proc = gputui("bench", "run", "cnn-infer", *TINY, "--steps", "1",
                  env={"GPUTUI_BENCH_TEST_HOOKS": "1"}, hook="oom")
    assert proc.returncode == 1, proc.stderr
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("gputui: ") and "out of memory" in last and "batch 2" in last
    assert "try " in last and "Traceback" not in proc.stderr
    (doc,) = results_store.history().results
    assert doc.status == "failed" and doc.error is not None and doc.error.kind == "oom"


@needs_torch
def test_ctrl_c_cancels_and_saves_a_partial_result(data_dir: Path) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "gputui", "bench", "run", "cnn-infer", *TINY,
         "--duration", "600", "--json"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=dict(os.environ),
    )
    try:
        parent = psutil.Process(proc.pid)
        deadline = time.monotonic() + WAIT_S
        workers: list[psutil.Process] = []
        while not workers and time.monotonic() < deadline:
            workers = parent.children()
            time.sleep(0.05)
        assert workers, "worker never started"
        proc.send_signal(signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=WAIT_S)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, stderr
    assert "Traceback" not in stderr
    doc = json.loads(stdout)
    assert doc["status"] == "cancelled"
    hist = results_store.history()
    assert [(d.id, d.status) for d in hist.results] == [(doc["id"], "cancelled")]
    for w in workers:
        assert not w.is_running() or w.status() == psutil.STATUS_ZOMBIE


@needs_torch
def test_worker_side_usage_error_is_exactly_one_line(gputui: Gputui) -> None:
    # Device "auto" resolves to the CPU inside the worker, after the progress display has
    # started: its error must still be the only line on stderr.
    if cuda_available():
        pytest.skip("this machine has CUDA")
    proc = gputui("bench", "run", "rnn-train", "--precision", "fp16", "--steps", "1")
    assert_usage_error(proc, "fp16")


@needs_torch
def test_profile_prints_top_ops_and_trace_path_lstm(data_dir: Path, gputui: Gputui) -> None:
    # Also the default rnn-train model (LSTM) end to end through the CLI.
    proc = gputui("bench", "run", "rnn-train", "--device", "cpu", "--batch-size", "2",
                  "--seq-len", "8", "--steps", "3", "--warmup", "1", "--threads", "1",
                  "--profile", env={"COLUMNS": "200"})  # wide: an op's long name not wrapped
    assert proc.returncode == 0, proc.stderr
    (doc,) = results_store.history().results
    assert doc.model == "lstm" and doc.status == "ok"
    assert doc.samples == 3 * 2 * 8 and doc.unit == "tokens/s"
    prof = doc.extra.profile
    assert prof is not None and prof.trace_path is not None
    trace = Path(prof.trace_path)
    assert trace.is_file() and trace.parent.parent == data_dir / "profiles"
    out = " ".join(proc.stdout.split())  # rich may wrap long cells
    assert "top ops" in out
    assert prof.top_ops[0].name in out
    assert f"Chrome trace: {trace}" in proc.stdout.replace("\n", "")


def test_summary_labels_points_once_and_explains_batch_finder() -> None:
    from rich.console import Console

    from gputui.bench.result import Result
    from gputui.commands.bench_view import summary_table

    doc = make_doc()
    doc["points"] = [
        {"label": "batch 1", "batch_size": 1, "throughput": 10.0, "unit": "images/s",
         "ok": True, "error": None},
        {"label": "fp32", "batch_size": None, "throughput": 1.5, "unit": "TFLOP/s",
         "ok": True, "error": None},
    ]
    console = Console(width=200, record=True)
    console.print(summary_table(Result.from_dict(doc)))
    text = console.export_text()
    assert "batch 1 batch 1" not in text and "batch 1" in text

    doc = make_doc()
    doc.update({"benchmark": "batch-finder", "steps": 3, "samples": 11, "batch_size": 5,
                "extra": {"max_batch_fit": 5, "limit": "oom", "probes": 5, "probes_fit": 3,
                          "probes_failed": 2}})
    console = Console(width=200, record=True)
    console.print(summary_table(Result.from_dict(doc)))
    text = console.export_text()
    assert "largest batch that fits" in text and "5 (3 fit, 2 failed)" in text
    assert "3 / 11" in text and "3 / 0" not in text


@needs_torch
def test_one_headline_everywhere(data_dir: Path, gputui: Gputui) -> None:
    """samples ÷ timed-loop seconds, the same number in run, show, history, compare and
    export (and in the text summary, as formatted)."""
    from gputui.bench.fmt import fmt_num

    proc = gputui("bench", "run", "cnn-infer", *TINY, "--steps", "3", "--json")
    assert proc.returncode == 0, proc.stderr
    run = json.loads(proc.stdout)
    tp = run["throughput"]
    assert tp["definition"] == "samples / seconds of the timed loop"
    assert tp["value"] == tp["mean"] and tp["value"] > 0
    assert tp["windows"] >= 1 and tp["p10"] <= tp["median"] <= tp["p90"]
    value = tp["value"]
    rid = run["id"]
    assert json.loads(gputui("bench", "show", rid, "--json").stdout)["throughput"]["value"] \
        == value
    (row,) = json.loads(gputui("bench", "history", "--json").stdout)
    assert row["throughput_value"] == value and row["throughput_mean"] == value
    cmp = json.loads(gputui("bench", "compare", rid, rid, "--json").stdout)
    headline = next(m for m in cmp["metrics"] if m["name"] == "throughput")
    assert headline["a"] == value and headline["b"] == value
    (exported,) = csv.DictReader(io.StringIO(gputui("bench", "export").stdout))
    assert float(exported["throughput_value"]) == value
    shown = f"{fmt_num(value)} images/s"
    wide = {"COLUMNS": "200"}  # whole cells in rich's tables
    assert shown in gputui("bench", "show", rid, env=wide).stdout
    assert shown in gputui("bench", "history", env=wide).stdout
