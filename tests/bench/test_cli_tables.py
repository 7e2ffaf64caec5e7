"""`gputui bench history` and `bench list` tables: piped output is never
truncated; at 80 columns history keeps benchmark, model, status and throughput whole."""

from __future__ import annotations

import argparse
import io
from collections.abc import Callable
from pathlib import Path

import pytest
from rich.console import Console

from gputui.bench import catalog, results_store
from gputui.commands import bench_results
from gputui.commands.bench_results import short_id
from tests.cli import CliRunner

from .test_results import make_doc

IDS = ("20260101-101010-100-aaaaaa", "20260101-101010-200-bbbbbb",
       "20260102-080000-000-cccccc")


@pytest.fixture
def history(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("GPUTUI_DATA_DIR", str(tmp_path))
    for i, rid in enumerate(IDS):
        results_store.save(make_doc(rid, benchmark="train-to-accuracy", model="mobilenet_v3_large",
                              device_name="NVIDIA A100-SXM4-80GB", precision="bf16",
                              throughput=12345.6 + i, started=f"2026-01-0{i + 1}T10:10:10.000Z",
                              status=("ok", "cancelled", "failed")[i]))
    return tmp_path


@pytest.fixture
def piped(cli: CliRunner, monkeypatch: pytest.MonkeyPatch) -> Callable[..., str]:
    """``piped(*argv)``: the CLI's stdout when it is not a terminal and no size is set."""
    monkeypatch.delenv("COLUMNS", raising=False)
    monkeypatch.delenv("LINES", raising=False)

    def run(*argv: str) -> str:
        proc = cli(*argv)
        assert proc.returncode == 0, proc.stderr
        return proc.stdout

    return run


def _on_terminal(monkeypatch: pytest.MonkeyPatch, width: int) -> str:
    out = io.StringIO()
    console = Console(file=out, width=width, force_terminal=True, color_system=None,
                      highlight=False)
    monkeypatch.setattr(bench_results, "_console", lambda: console)
    assert bench_results.run_history(argparse.Namespace(limit=None, json=False)) == 0
    return out.getvalue()


def test_piped_history_shows_every_column_whole(history: Path, piped: Callable[..., str]) -> None:
    out = piped("bench", "history")
    assert "…" not in out
    for rid in IDS:
        row = next(line for line in out.splitlines() if rid in line)
        for value in ("train-to-accuracy", "mobilenet_v3_large", "NVIDIA A100-SXM4-80GB",
                      "bf16", "images/s"):
            assert value in row, (value, row)
    assert "cancelled" in out and "failed" in out and "12,345.6 images/s" in out


def test_history_at_80_columns_keeps_benchmark_model_status_throughput(
        history: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    out = _on_terminal(monkeypatch, 80)
    assert "…" not in out
    assert max(len(line) for line in out.splitlines()) <= 80
    rows = [line for line in out.splitlines() if "train-to-accuracy" in line]
    assert len(rows) == 3
    for row, status, tp in zip(rows, ("ok", "cancelled", "failed"),
                               ("12,345.6", "12,346.6", "12,347.6"), strict=True):
        assert "mobilenet_v3_large" in row and f" {status} " in row and tp in row, row
    assert "narrow terminal:" in out and "--json" in out


def test_history_at_120_columns_keeps_more_and_cuts_nothing(
        history: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    out = _on_terminal(monkeypatch, 120)
    assert "…" not in out and max(len(line) for line in out.splitlines()) <= 120
    row = next(line for line in out.splitlines() if "train-to-accuracy" in line)
    assert "mobilenet_v3_large" in row and "bf16" in row and "12,345.6 images/s" in row


def test_short_ids_are_unique_prefixes_that_show_accepts(history: Path) -> None:
    shorts = [short_id(rid, list(IDS)) for rid in IDS]
    assert shorts == ["20260101-101010-1", "20260101-101010-2", "20260102-080000"]
    for rid, short in zip(IDS, shorts, strict=True):
        assert results_store.load(short).id == rid


def test_piped_bench_list_never_cuts_model_names(piped: Callable[..., str]) -> None:
    out = piped("bench", "list")
    assert "…" not in out
    words = set(out.replace("*", " ").split())
    for bench in catalog.BENCHMARKS.values():
        assert bench.name in words
        for model in bench.models:
            assert model in words, model
