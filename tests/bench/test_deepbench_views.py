"""deepbench results as a user reads them: `bench show`'s tables per op, `bench compare`
shape by shape, `bench export`'s rows per shape, `bench run`'s one-line usage errors."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any

import pytest

from gputui.bench import results_store
from gputui.bench.deepbench.figures import slowest
from gputui.bench.kind_extras import DeepbenchRow
from gputui.bench.request import RunRequest
from tests.cli import CliResult

from .test_cli_bench import assert_usage_error


@pytest.fixture(autouse=True)
def data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("GPUTUI_DATA_DIR", str(tmp_path))
    return tmp_path


def gemm_row(shape: str, us: float, flops: int = 2_000_000_000,
             pct: float | None = None) -> dict[str, Any]:
    tflops = flops / (us * 1e-6) / 1e12
    return {"op": "gemm", "shape": shape, "ran": shape, "flops": flops, "median_us": us,
            "tflops": tflops, "pct_of_peak": pct, "busbw_gbps": None, "calls": 10,
            "note": None}


def deepbench_doc(rid: str, rows: list[dict[str, Any]]) -> dict[str, Any]:
    doc = results_store.empty_result(rid, RunRequest("deepbench", device="cuda",
                                                     precision="fp16"))
    doc.update({"status": "ok", "device_name": "Test GPU",
                "started_at": "2025-01-01T00:00:00.000Z",
                "throughput": {"mean": 1.0, "median": None, "p10": None, "p90": None,
                               "unit": "TFLOP/s"},
                "settings": {"problem_set": "train", "shape_set": "quick"},
                "extra": {"deepbench_rows": rows, "peak_tflops": 100.0, "peak_dtype": "fp16",
                          "peak_source": "table", "peak_gpu": "Test GPU"}})
    return doc


ROWS_A = [gemm_row("1760,16,1760,n,n", 100.0, pct=20.0),
          gemm_row("2560,7000,2560,n,n", 50.0, pct=40.0),
          gemm_row("2560,7000,2560,t,n", 80.0, pct=25.0),
          gemm_row("35,8457,2048,n,n", 400.0, pct=5.0),
          gemm_row("512,32,512,n,t", 20.0, pct=100.0),
          {"op": "allreduce", "shape": "100000", "ran": "100000", "flops": None,
           "median_us": None, "tflops": None, "pct_of_peak": None, "busbw_gbps": None,
           "calls": 0, "note": "needs 2+ CUDA GPUs (this run sees 1)"}]


def test_show_prints_a_table_per_op_with_the_slowest_marked(gputui: Any) -> None:
    results_store.save(deepbench_doc("20250101-000000-000-aaaaaa", ROWS_A))
    proc: CliResult = gputui("bench", "show", "20250101-000000-000-aaaaaa")
    assert proc.returncode == 0, proc.stderr
    assert "DeepBench GEMM (m,n,k,a_t,b_t)" in proc.stdout
    assert "DeepBench all-reduce (floats)" in proc.stdout
    assert "▼ slowest vs peak" in " ".join(proc.stdout.split())  # a title may wrap
    assert "2560,7000,2560,t,n" in proc.stdout and "needs 2+ CUDA GPUs" in proc.stdout
    # The three lowest % of peak of the five GEMMs: 5 %, 20 %, 25 %.
    from gputui.bench.kind_extras import DeepbenchRow

    gemms = [DeepbenchRow.from_json(r) for r in ROWS_A[:5]]
    assert slowest(gemms) == {0, 2, 3}
    # Marked in the text, not only in red: piped into a file the mark stays.
    marked = [cells[1] for line in proc.stdout.splitlines()
              if len(cells := [c.strip() for c in line.split("│")[1:-1]]) > 1
              and cells[0] == "▼"]
    assert marked == [ROWS_A[i]["shape"] for i in (0, 2, 3)]


def test_slowest_needs_more_rows_than_it_marks() -> None:
    rows = [DeepbenchRow.from_json(r) for r in ROWS_A[:3]]
    assert slowest(rows) == set()


def test_compare_is_shape_by_shape(gputui: Any) -> None:
    rows_b = [gemm_row("1760,16,1760,n,n", 50.0, pct=40.0),  # twice as fast
              gemm_row("2560,7000,2560,n,n", 100.0, pct=20.0),  # half as fast
              gemm_row("7680,24000,2560,n,n", 10.0)]  # only B ran it
    results_store.save(deepbench_doc("20250101-000000-000-aaaaaa", ROWS_A[:2]))
    results_store.save(deepbench_doc("20250101-000000-000-bbbbbb", rows_b))
    proc = gputui("bench", "compare", "20250101-000000-000-aaaaaa",
                  "20250101-000000-000-bbbbbb", "--json")
    assert proc.returncode == 0, proc.stderr
    shapes = {s["name"]: s for s in json.loads(proc.stdout)["shapes"]}
    assert list(shapes) == ["gemm 1760,16,1760,n,n", "gemm 2560,7000,2560,n,n",
                            "gemm 7680,24000,2560,n,n"]
    assert shapes["gemm 1760,16,1760,n,n"]["ratio_b_over_a"] == pytest.approx(2.0)
    assert shapes["gemm 1760,16,1760,n,n"]["better"] == "b"
    assert shapes["gemm 2560,7000,2560,n,n"]["ratio_b_over_a"] == pytest.approx(0.5)
    assert shapes["gemm 7680,24000,2560,n,n"]["a"] is None
    text = gputui("bench", "compare", "20250101-000000-000-aaaaaa",
                  "20250101-000000-000-bbbbbb")
    assert "DeepBench shapes" in text.stdout and "2560,7000,2560,n,n" in text.stdout


def test_export_has_a_row_per_shape(gputui: Any) -> None:
    results_store.save(deepbench_doc("20250101-000000-000-aaaaaa", ROWS_A))
    proc = gputui("bench", "export", "--format", "csv")
    assert proc.returncode == 0, proc.stderr
    rows = list(csv.DictReader(io.StringIO(proc.stdout)))
    assert len(rows) == 1 + len(ROWS_A)
    assert rows[0]["shape"] == "" and rows[0]["benchmark"] == "deepbench"
    shaped = rows[1:]
    assert [r["shape"] for r in shaped] == [r["shape"] for r in ROWS_A]
    assert all(r["id"] == "20250101-000000-000-aaaaaa" for r in shaped)
    assert float(shaped[0]["median_us"]) == 100.0
    assert float(shaped[0]["shape_tflops"]) == pytest.approx(ROWS_A[0]["tflops"])
    md = gputui("bench", "export", "--format", "markdown").stdout
    assert "DeepBench shapes of 20250101-000000-000-aaaaaa" in md
    assert "| gemm | 35,8457,2048,n,n |" in md


@pytest.mark.parametrize(("argv", "fragment"), [
    (["--op", "fft"], "bad op 'fft'"),
    (["--set", "eval"], "bad set 'eval'"),
    (["--shapes", "most"], "bad shapes 'most'"),
    (["--op", "allreduce", "--set", "infer"], "for training"),
])
def test_bad_selection_is_one_line_exit_2(argv: list[str], fragment: str,
                                          gputui: Any) -> None:
    assert_usage_error(gputui("bench", "run", "deepbench", "--device", "cpu", *argv),
                       fragment)


def test_op_on_another_benchmark_is_one_line_exit_2(gputui: Any) -> None:
    assert_usage_error(gputui("bench", "run", "matmul", "--op", "gemm"),
                       "--op applies to deepbench")
