"""A benchmark without a batch (attention, matmul): a dash in the history, show and compare
tables, never "None"; null in their JSON."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gputui.bench import results_store
from gputui.bench.request import RunRequest
from tests.cli import CliRunner


@pytest.fixture
def saved(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """An attention run and a matmul run, neither with a batch size."""
    monkeypatch.setenv("GPUTUI_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("COLUMNS", "200")  # every history column fits
    ids = []
    for n, name in enumerate(("attention", "matmul")):
        rid = results_store.new_id()
        doc = results_store.empty_result(rid, RunRequest(name, device="cpu", precision="fp32"))
        doc.update({"status": "ok", "device_name": "Test CPU",
                    "started_at": f"2025-01-01T00:00:0{n}.000Z",
                    "throughput": {"median": 1.5, "mean": 1.5, "unit": "TFLOP/s"}})
        results_store.save(doc)
        ids.append(rid)
    return ids


def _batch_cells(table: str, header: str) -> list[str]:
    """The cells of the `header` column, read from where the header starts."""
    lines = table.splitlines()
    (head,) = [line for line in lines if f" {header} " in line and "benchmark" in line]
    start = head.index(f" {header} ") + 1
    rows = [line for line in lines if "attention" in line or "matmul" in line]
    return [row[start:start + len(header)].strip() for row in rows]


def test_history_shows_a_dash_for_no_batch_and_json_keeps_null(cli: CliRunner,
                                                                 saved: list[str]) -> None:
    out = cli("bench", "history")
    assert out.returncode == 0, out.stderr
    assert "None" not in out.stdout
    assert _batch_cells(out.stdout, "batch") == ["—", "—"]
    rows = json.loads(cli("bench", "history", "--json").stdout)
    assert [(r["benchmark"], r["batch_size"]) for r in rows] == [
        ("attention", None), ("matmul", None)]


def test_show_and_compare_show_a_dash_for_no_batch(cli: CliRunner, saved: list[str]) -> None:
    show = cli("bench", "show", saved[0])
    assert show.returncode == 0, show.stderr
    (line,) = [x for x in show.stdout.splitlines() if "precision / batch" in x]
    assert line.split("precision / batch")[1].strip(" │|") == "fp32 / —"

    both = cli("bench", "compare", *saved)
    assert both.returncode == 0, both.stderr
    assert "None" not in both.stdout
    (row,) = [x for x in both.stdout.splitlines() if " batch_size " in x]
    assert [c.strip() for c in row.split("│")[1:-1]] == ["batch_size", "—", "—"]
    settings = json.loads(cli("bench", "compare", *saved, "--json").stdout)["settings"]
    assert {"name": "batch_size", "a": None, "b": None, "differs": False} in settings
