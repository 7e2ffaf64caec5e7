"""--repeat N: every trial's headline and their spread; compare's "within noise"."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gputui.bench import results_store
from gputui.bench.compare import compare
from gputui.bench.result import Result
from gputui.bench.stats import TrialSpread, noise, trial_spread

from .test_cli_bench import TINY, Gputui, assert_usage_error, needs_torch
from .test_results import make_doc


@pytest.fixture(autouse=True)
def data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("GPUTUI_DATA_DIR", str(tmp_path))
    return tmp_path


def test_trial_spread_is_median_min_max() -> None:
    assert trial_spread([30.0, 10.0, 20.0]) == TrialSpread(median=20.0, min=10.0, max=30.0)
    assert trial_spread([5.0]) is None  # one trial says nothing about noise
    assert noise(TrialSpread(20.0, 10.0, 30.0), TrialSpread(1.0, 0.0, 4.0)) == 12.0
    assert noise(None, None) is None


@needs_torch
def test_repeat_3_gives_three_trials_and_a_spread(data_dir: Path, gputui: Gputui) -> None:
    proc = gputui("bench", "run", "cnn-train", *TINY, "--steps", "2", "--repeat", "3",
                  "--json")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    trials = doc["trials"]
    assert len(trials) == 3 and all(t > 0 for t in trials)
    assert doc["spread"] == {"median": sorted(trials)[1], "min": min(trials),
                             "max": max(trials)}
    # Three timed loops of 2 steps each after one warm-up; the headline pools them.
    assert doc["steps"] == 6 and doc["samples"] == 12
    assert min(trials) <= doc["throughput"]["value"] <= max(trials)
    # The saved document keeps them, and `bench show` prints them.
    shown = gputui("bench", "show", doc["id"], env={"COLUMNS": "200"})
    assert shown.returncode == 0, shown.stderr
    assert "3 trials:" in shown.stdout and "median" in shown.stdout


@needs_torch
def test_single_run_has_no_trials(data_dir: Path, gputui: Gputui) -> None:
    proc = gputui("bench", "run", "cnn-infer", *TINY, "--steps", "2", "--json")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["trials"] is None and doc["spread"] is None


def test_repeat_is_refused_where_it_cannot_apply(gputui: Gputui) -> None:
    assert_usage_error(gputui("bench", "run", "batch-finder", "--device", "cpu",
                              "--repeat", "2"), "--repeat does not apply to batch-finder")
    assert_usage_error(gputui("bench", "run", "cnn-train", "--repeat", "0"), "--repeat")


def _doc(value: float, trials: list[float] | None) -> dict:
    d = make_doc(throughput=value)
    d["throughput"]["value"] = value
    if trials is not None:
        d["trials"] = trials
        d["spread"] = {"median": sorted(trials)[len(trials) // 2], "min": min(trials),
                       "max": max(trials)}
    return d


def test_result_round_trips_trials() -> None:
    r = Result.from_dict(_doc(100.0, [98.0, 100.0, 103.0]))
    assert r.trials == (98.0, 100.0, 103.0)
    assert r.spread == TrialSpread(median=100.0, min=98.0, max=103.0)
    again = Result.from_dict(r.to_dict())
    assert again.trials == r.trials and again.to_dict()["spread"] == r.to_dict()["spread"]


def test_difference_inside_the_combined_spread_is_within_noise() -> None:
    # Trials 95..105 and 99..109: combined spread ±10; the headlines differ by 4.
    a = Result.from_dict(_doc(100.0, [95.0, 100.0, 105.0]))
    b = Result.from_dict(_doc(104.0, [99.0, 104.0, 109.0]))
    tp = compare(a, b).metrics[0]
    assert tp.noise == pytest.approx(10.0)
    assert tp.within_noise and tp.verdict == "within noise" and tp.better is None


def test_difference_beyond_the_spread_is_a_speed_up() -> None:
    a = Result.from_dict(_doc(100.0, [99.0, 100.0, 101.0]))
    b = Result.from_dict(_doc(120.0, [119.0, 120.0, 121.0]))
    tp = compare(a, b).metrics[0]
    assert not tp.within_noise and tp.verdict == "better" and tp.better == "b"


def test_no_repeats_no_noise_verdict() -> None:
    tp = compare(Result.from_dict(_doc(100.0, None)),
                 Result.from_dict(_doc(101.0, None))).metrics[0]
    assert tp.noise is None and not tp.within_noise and tp.verdict == "better"


def test_compare_cli_says_within_noise(data_dir: Path, gputui: Gputui) -> None:
    a, b = _doc(100.0, [95.0, 100.0, 105.0]), _doc(104.0, [99.0, 104.0, 109.0])
    results_store.save(a)
    results_store.save(b)
    proc = gputui("bench", "compare", a["id"], b["id"], "--json")
    assert proc.returncode == 0, proc.stderr
    tp = next(m for m in json.loads(proc.stdout)["metrics"] if m["name"] == "throughput")
    assert tp["within_noise"] is True and tp["verdict"] == "within noise"
    assert tp["better"] is None and tp["noise"] == pytest.approx(10.0)
    proc = gputui("bench", "compare", a["id"], b["id"], env={"COLUMNS": "200"})
    assert proc.returncode == 0, proc.stderr
    assert "1.040× within noise" in proc.stdout
    assert "combined spread is ±10" in proc.stdout
