"""`gputui bench suite run --quick` for real on the CPU, run ONCE for this module (it takes
a minute or more on 2 cores); every test here reads that one run's record and results."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from gputui.bench import suite_record, suite_refs
from gputui.bench.suite import TESTS, TESTS_BY_ID
from tests.cli import CliRunner

from .test_cli_bench import HAS_TORCH

# The first test's set-up runs the whole quick suite: minutes on a busy 2-core box.
pytestmark = [pytest.mark.skipif(not HAS_TORCH, reason="needs torch (the bench extra)"),
              pytest.mark.timeout(900)]


@dataclass(frozen=True)
class QuickRun:
    data_dir: Path
    doc: dict  # `bench suite run --quick --json`'s stdout
    stderr: str
    returncode: int


@pytest.fixture(scope="module")
def quick(tmp_path_factory: pytest.TempPathFactory) -> QuickRun:
    data = tmp_path_factory.mktemp("suite-data")
    env = {**os.environ, "GPUTUI_DATA_DIR": str(data)}
    proc = subprocess.run([sys.executable, "-m", "gputui", "bench", "suite", "run", "--quick",
                           "--json"], capture_output=True, text=True, env=env, timeout=900)
    assert proc.stdout, proc.stderr
    return QuickRun(data, json.loads(proc.stdout), proc.stderr, proc.returncode)


@pytest.fixture
def in_quick_dir(quick: QuickRun, monkeypatch: pytest.MonkeyPatch) -> QuickRun:
    monkeypatch.setenv("GPUTUI_DATA_DIR", str(quick.data_dir))
    return quick


def test_quick_run_scores_every_test(quick: QuickRun) -> None:
    assert quick.returncode == 0, quick.stderr
    doc = quick.doc
    assert doc["status"] == "ok" and doc["device_class"] == "cpu-quick", quick.stderr
    assert [t["test"] for t in doc["tests"]] == [t.id for t in TESTS]
    for t in doc["tests"]:
        assert t["value"] is not None and t["value"] > 0, t
        assert t["settings"]["device"] == "cpu", t
    scores = doc["scores"]
    assert set(scores["tests"]) == set(TESTS_BY_ID)
    assert all(s is not None and s > 0 for s in scores["tests"].values())
    assert scores["reference"]["device_class"] == "cpu-quick"
    # One progress line per test on stderr, no error line.
    progress = [line for line in quick.stderr.splitlines() if line.startswith("  [")]
    assert len(progress) == len(TESTS), quick.stderr
    assert "gputui:" not in quick.stderr, quick.stderr


def test_each_test_links_its_saved_result(in_quick_dir: QuickRun) -> None:
    from gputui.bench import results_store

    for t in in_quick_dir.doc["tests"]:
        result = results_store.load(t["result_id"])
        test = TESTS_BY_ID[t["test"]]
        assert result.status == "ok"
        assert result.benchmark == t["settings"]["benchmark"]
        if test.metric == "headline":
            assert result.headline == pytest.approx(t["value"])
    # The segmentation tests ran a segmentation model through the image kinds.
    seg = next(t for t in in_quick_dir.doc["tests"] if t["test"] == "seg-train")
    assert seg["settings"]["model"] == "lraspp_mobilenet_v3_large"
    # The record on disk is the one printed.
    assert suite_record.load(in_quick_dir.doc["id"]).to_dict() == in_quick_dir.doc


def test_the_three_scores_are_the_geometric_means_of_the_json(quick: QuickRun) -> None:
    scores = quick.doc["scores"]

    def gmean(ids: list[str]) -> float:
        return math.exp(sum(math.log(scores["tests"][i]) for i in ids) / len(ids))

    assert scores["inference"] == pytest.approx(
        gmean([t.id for t in TESTS if t.group == "inference"]))
    assert scores["training"] == pytest.approx(
        gmean([t.id for t in TESTS if t.group == "training"]))
    assert scores["device"] == pytest.approx(gmean([t.id for t in TESTS]))
    # Each score is the throughput over the shipped reference's figure, × 1000.
    ref = suite_refs.default_for("cpu-quick", quick.doc["suite_version"])
    assert ref is not None and scores["reference"]["source"] == ref.source
    assert {t["test"]: scores["tests"][t["test"]] for t in quick.doc["tests"]} == {
        t["test"]: pytest.approx(t["value"] / ref.figures[t["test"]] * 1000)
        for t in quick.doc["tests"]}


def test_show_prints_the_run(in_quick_dir: QuickRun, gputui: CliRunner) -> None:
    proc = gputui("bench", "suite", "show", in_quick_dir.doc["id"][:20])
    assert proc.returncode == 0, proc.stderr
    for t in TESTS:
        assert t.title.split()[0] in proc.stdout
    assert "device " + f"{in_quick_dir.doc['scores']['device']:,.0f}" in proc.stdout
    assert "ranking" in proc.stdout and "this run" in proc.stdout


def test_baseline_swap_on_the_real_run(in_quick_dir: QuickRun, gputui: CliRunner,
                                       tmp_path: Path) -> None:
    """Against a baseline twice as fast every score halves; the throughputs stay."""
    doc = json.loads(json.dumps(in_quick_dir.doc))
    doc["id"] = "20260101-000000-000-double"
    for t in doc["tests"]:
        t["value"] *= 2
    doc["scores"] = None
    twice = tmp_path / "twice.json"
    twice.write_text(json.dumps(doc))
    proc = gputui("bench", "suite", "show", in_quick_dir.doc["id"], "--baseline", str(twice),
                  "--json")
    assert proc.returncode == 0, proc.stderr
    swapped = json.loads(proc.stdout)
    assert [t["value"] for t in swapped["tests"]] == [t["value"] for t in in_quick_dir.doc["tests"]]
    assert all(s == pytest.approx(500.0) for s in swapped["scores"]["tests"].values())
    assert swapped["scores"]["device"] == pytest.approx(500.0)
