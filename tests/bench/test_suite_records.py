"""`gputui bench suite` over hand-made suite records: scores, compare, list, baselines,
export/import and bad input. No benchmark runs here (test_suite_run.py runs the suite)."""

from __future__ import annotations

import json
import math
from dataclasses import replace
from pathlib import Path

import pytest

from gputui.bench import suite_record, suite_refs
from gputui.bench.suite import SUITE_VERSION, TESTS
from gputui.bench.suite_record import SuiteRecord, TestOutcome
from gputui.bench.suite_score import SuiteReference, geomean, ranking, score
from gputui.errors import UsageError
from tests.cli import CliResult, CliRunner

from .test_cli_bench import assert_usage_error
from .test_results import make_doc


@pytest.fixture(autouse=True)
def data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("GPUTUI_DATA_DIR", str(tmp_path / "data"))
    return tmp_path / "data"


def make_record(rid: str, factor: float = 1.0, *, version: int = SUITE_VERSION,
                device_class: str = "cpu-quick", device_name: str = "Test CPU",
                missing: tuple[str, ...] = (), result_ids: bool = False) -> SuiteRecord:
    """A suite run whose test i measured (i + 1) × factor."""
    outcomes = tuple(
        TestOutcome(test=t.id, value=None if t.id in missing else (i + 1) * factor,
                    unit=t.unit or "images/s", status="failed" if t.id in missing else "ok",
                    result_id=f"{rid}-r{i}" if result_ids else None,
                    settings={"benchmark": t.run, "device": "cpu"})
        for i, t in enumerate(TESTS))
    return SuiteRecord(id=rid, suite_version=version, device_class=device_class,
                       device="cpu", device_name=device_name,
                       status="incomplete" if missing else "ok",
                       started_at=f"2026-01-01T00:00:0{len(rid) % 10}Z", finished_at=None,
                       wall_s=60.0, outcomes=outcomes)


def ref_of(record: SuiteRecord, name: str = "Ref CPU") -> SuiteReference:
    r = suite_record.as_reference(record)
    return SuiteReference(device=name, device_class=r.device_class,
                          suite_version=r.suite_version, source=f"made for {name}",
                          figures=r.figures)


def save(record: SuiteRecord) -> str:
    suite_record.save(record)
    return record.id


def show_json(gputui: CliRunner, *argv: str) -> dict:
    proc = gputui("bench", "suite", "show", *argv, "--json")
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


# ------------------------------------------------------------------------- scores


def test_each_test_scores_its_figure_over_the_reference_times_1000() -> None:
    run, ref = make_record("a", factor=2.0), ref_of(make_record("b"))
    s = score(run.figures(), SUITE_VERSION, "cpu-quick", ref)
    assert set(s.tests) == {t.id for t in TESTS}
    assert all(v == pytest.approx(2000.0) for v in s.tests.values())
    assert s.device == pytest.approx(2000.0)
    assert s.reference["device"] == "Ref CPU"


def test_the_three_scores_are_geometric_means_of_their_groups() -> None:
    ref = ref_of(make_record("b"))
    # Inference tests twice as fast as the reference, training ones half as fast.
    figures = {t.id: ref.figures[t.id] * (2.0 if t.group == "inference" else
                                          0.5 if t.group == "training" else 1.0)
               for t in TESTS}
    s = score(figures, SUITE_VERSION, "cpu-quick", ref)
    assert s.inference == pytest.approx(2000.0)
    assert s.training == pytest.approx(500.0)
    n_inf = sum(t.group == "inference" for t in TESTS)
    n_train = sum(t.group == "training" for t in TESTS)
    expected = math.exp((n_inf * math.log(2000) + n_train * math.log(500)
                         + (len(TESTS) - n_inf - n_train) * math.log(1000)) / len(TESTS))
    assert s.device == pytest.approx(expected)


def test_a_missing_test_leaves_its_groups_without_a_score() -> None:
    missing = next(t for t in TESTS if t.group == "training")
    run = make_record("a", missing=(missing.id,))
    s = score(run.figures(), SUITE_VERSION, "cpu-quick", ref_of(make_record("b")))
    assert s.tests[missing.id] is None
    assert s.training is None and s.device is None
    assert s.inference == pytest.approx(1000.0)
    assert geomean([]) is None


def test_ranking_puts_the_faster_device_first() -> None:
    this = ref_of(make_record("a", factor=3.0), "This box")
    ref = ref_of(make_record("b"), "Reference")
    slow = ref_of(make_record("c", factor=0.5), "Slow box")
    rows = ranking(this, ref, (slow,))
    assert [r.device for r in rows] == ["This box", "Reference", "Slow box"]
    assert [round(r.device_score or 0) for r in rows] == [3000, 1000, 500]
    assert [r.this for r in rows] == [True, False, False]


def test_shipped_references_name_their_device_and_source() -> None:
    assert suite_refs.SHIPPED, "no shipped reference"
    for ref in suite_refs.SHIPPED:
        assert ref.device and ref.source
        assert set(ref.figures) == {t.id for t in TESTS}
        assert all(v > 0 for v in ref.figures.values())
    assert suite_refs.default_for("cpu-quick", SUITE_VERSION) is not None
    # No measured figure for CUDA: scores there need --baseline.
    assert suite_refs.default_for("cuda", SUITE_VERSION) is None


def test_record_json_round_trips() -> None:
    rec = make_record("a", result_ids=True)
    rec = SuiteRecord(**{**rec.__dict__, "scores": score(
        rec.figures(), SUITE_VERSION, "cpu-quick", ref_of(make_record("b")))})
    back = SuiteRecord.from_dict(json.loads(suite_record.dumps(rec)))
    assert back == rec


def test_every_class_asks_for_settings_the_catalog_accepts() -> None:
    from gputui.bench.request import make_request
    from gputui.bench.suite import CLASSES, RUNS, run_settings, tests_of

    for cls in CLASSES:
        device = "cuda:0" if cls == "cuda" else "cpu"
        requests = [make_request(r.benchmark, **run_settings(r, cls, device)) for r in RUNS]
        assert [q.device for q in requests] == [device] * len(RUNS)
        bounded = [q.steps is not None or q.duration_s is not None for q in requests]
        assert all(bounded), cls
    assert sorted(t.id for r in RUNS for t in tests_of(r.key)) == sorted(t.id for t in TESTS)


# ------------------------------------------------------------------------- CLI


def test_show_with_a_baseline_changes_scores_and_not_throughputs(gputui: CliRunner) -> None:
    a = save(make_record("20260101-000001-000-aaaaaa", factor=4.0))
    b = save(make_record("20260101-000002-000-bbbbbb", factor=2.0, device_name="Other CPU"))
    plain = show_json(gputui, a)
    swapped = show_json(gputui, a, "--baseline", b)
    assert [t["value"] for t in plain["tests"]] == [t["value"] for t in swapped["tests"]]
    assert all(v == pytest.approx(2000.0) for v in swapped["scores"]["tests"].values())
    assert swapped["scores"]["device"] == pytest.approx(2000.0)
    assert swapped["scores"]["reference"]["device"] == "Other CPU"
    assert plain["scores"]["device"] != pytest.approx(swapped["scores"]["device"])
    # The baseline is also accepted as a file.
    as_file = show_json(gputui, a, "--baseline",
                        str(suite_record.suites_dir() / f"{b}.json"))
    assert as_file["scores"] == swapped["scores"]


def test_show_prints_tests_scores_and_ranking(gputui: CliRunner) -> None:
    a = save(make_record("20260101-000001-000-aaaaaa", factor=4.0, device_name="Fast CPU"))
    b = save(make_record("20260101-000002-000-bbbbbb", device_name="Base CPU"))
    proc = gputui("bench", "suite", "show", a, "--baseline", b)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    for t in TESTS:
        assert t.title.split()[0] in out
    assert "inference 4,000, training 4,000, device 4,000" in out
    assert "ranking" in out and "Fast CPU" in out and "Base CPU" in out
    table = out[out.index("figures from"):]
    assert table.index("Fast CPU") < table.index("Base CPU")
    assert "GPU state: not sampled (a CPU run)" in out


def test_show_without_id_shows_the_newest(gputui: CliRunner) -> None:
    save(make_record("20260101-000001-000-aaaaaa", device_name="Old CPU"))
    save(make_record("20260101-000009-000-bbbbbb", device_name="New CPU"))
    assert show_json(gputui)["device_name"] == "New CPU"


def test_cuda_run_without_a_reference_says_baseline_is_needed(gputui: CliRunner) -> None:
    a = save(make_record("20260101-000001-000-cccccc", device_class="cuda",
                         device_name="NVIDIA H100"))
    proc = gputui("bench", "suite", "show", a)
    assert proc.returncode == 0, proc.stderr
    assert "no reference figures for the cuda class" in proc.stdout
    assert "--baseline" in proc.stdout
    assert show_json(gputui, a)["scores"] is None


def test_compare_puts_two_runs_side_by_side(gputui: CliRunner) -> None:
    a = save(make_record("20260101-000001-000-aaaaaa", factor=1.0))
    b = save(make_record("20260101-000002-000-bbbbbb", factor=1.5))
    proc = gputui("bench", "suite", "compare", a, b, "--json")
    assert proc.returncode == 0, proc.stderr
    cmp = json.loads(proc.stdout)
    assert len(cmp["tests"]) == len(TESTS)
    assert all(row["ratio"] == pytest.approx(1.5) for row in cmp["tests"])
    assert cmp["ratio"]["device"] == pytest.approx(1.5)
    text = gputui("bench", "suite", "compare", a, b)
    assert text.returncode == 0 and "1.500×" in text.stdout


def test_compare_refuses_runs_of_different_versions(gputui: CliRunner) -> None:
    a = save(make_record("20260101-000001-000-aaaaaa"))
    b = save(make_record("20260101-000002-000-bbbbbb", version=SUITE_VERSION + 1))
    proc = gputui("bench", "suite", "compare", a, b)
    assert_usage_error(proc, f"version {SUITE_VERSION + 1}: different tests, not compared")


def test_compare_refuses_runs_of_different_classes(gputui: CliRunner) -> None:
    a = save(make_record("20260101-000001-000-aaaaaa"))
    b = save(make_record("20260101-000002-000-bbbbbb", device_class="cpu"))
    assert_usage_error(gputui("bench", "suite", "compare", a, b), "different settings")


def test_a_baseline_of_another_version_is_refused(gputui: CliRunner) -> None:
    a = save(make_record("20260101-000001-000-aaaaaa"))
    b = save(make_record("20260101-000002-000-bbbbbb", version=SUITE_VERSION + 1))
    assert_usage_error(gputui("bench", "suite", "show", a, "--baseline", b),
                       "not compared")


def test_list_shows_saved_runs(gputui: CliRunner) -> None:
    save(make_record("20260101-000001-000-aaaaaa", device_name="Box A"))
    save(make_record("20260101-000002-000-bbbbbb", device_name="Box B",
                     device_class="cuda"))
    proc = gputui("bench", "suite", "list", "--json")
    assert proc.returncode == 0, proc.stderr
    rows = json.loads(proc.stdout)
    assert [r["device_name"] for r in rows] == ["Box A", "Box B"]
    assert [r["device_class"] for r in rows] == ["cpu-quick", "cuda"]
    text = gputui("bench", "suite", "list")
    assert "Box A" in text.stdout and "Box B" in text.stdout


def test_export_then_import_on_another_data_dir(gputui: CliRunner, tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    from gputui.bench import results_store

    rec = make_record("20260101-000001-000-aaaaaa", result_ids=True)
    for o in rec.outcomes:
        results_store.save(make_doc(o.result_id))
    save(rec)
    bundle = tmp_path / "suite.json"
    assert gputui("bench", "suite", "export", rec.id, "--output", str(bundle)).returncode == 0
    monkeypatch.setenv("GPUTUI_DATA_DIR", str(tmp_path / "other"))
    proc = gputui("bench", "suite", "import", str(bundle))
    assert proc.returncode == 0, proc.stderr
    assert f"imported suite {rec.id}" in proc.stdout
    assert suite_record.load(rec.id) == rec
    assert {r.id for r in results_store.history().results} == {
        o.result_id for o in rec.outcomes}
    again = gputui("bench", "suite", "import", str(bundle))
    assert_usage_error(again, "already in")


# ------------------------------------------------------------------------- bad input


def test_a_baseline_file_that_is_not_a_suite(gputui: CliRunner, tmp_path: Path) -> None:
    a = save(make_record("20260101-000001-000-aaaaaa"))
    result = tmp_path / "result.json"
    result.write_text(json.dumps(make_doc("r1")))
    assert_usage_error(gputui("bench", "suite", "show", a, "--baseline", str(result)),
                       "is not a gputui suite record")
    garbage = tmp_path / "garbage.json"
    garbage.write_text("{not json")
    assert_usage_error(gputui("bench", "suite", "show", a, "--baseline", str(garbage)),
                       "not JSON")


def test_a_suite_id_that_does_not_exist(gputui: CliRunner) -> None:
    proc = gputui("bench", "suite", "show", "20990101-nope")
    assert_usage_error(proc, "no suite run with id '20990101-nope'")
    assert_usage_error(gputui("bench", "suite", "compare", "x1", "x2"), "no suite run")


def test_an_unknown_option(gputui: CliRunner) -> None:
    proc: CliResult = gputui("bench", "suite", "run", "--quikc")
    assert_usage_error(proc, "--quikc")


def test_quick_on_cuda_is_bad_usage(gputui: CliRunner) -> None:
    assert_usage_error(gputui("bench", "suite", "run", "--quick", "--device", "cuda"),
                       "--quick is the CPU's short class")


def test_a_damaged_record_is_one_line(gputui: CliRunner) -> None:
    path = suite_record.suites_dir() / "20260101-000001-000-dddddd.json"
    doc = make_record("20260101-000001-000-dddddd").to_dict()
    doc["tests"] = "nope"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(doc))
    assert_usage_error(gputui("bench", "suite", "show", path.stem), "field tests")
    with pytest.raises(UsageError):
        suite_record.load(path.stem)


def test_a_throttled_run_marks_its_scores(gputui: CliRunner) -> None:
    from gputui.bench.suite_record import SuiteState

    rec = make_record("20260101-000001-000-eeeeee")
    hot = next(t.id for t in TESTS if t.group == "training")
    rec = replace(rec, outcomes=tuple(replace(o, throttled_fraction=0.4 if o.test == hot
                                              else 0.0) for o in rec.outcomes),
                  state=SuiteState(seconds=100.0, throttled_fraction=0.12,
                                   throttle_reasons=("sw_power_cap",), temp_c_max=83.0,
                                   clock_sm_mhz_min=1305.0, power_w_max=700.0))
    save(rec)
    proc = gputui("bench", "suite", "show", rec.id, "--baseline", rec.id)
    assert proc.returncode == 0, proc.stderr
    scores_line = next(line for line in proc.stdout.splitlines()
                       if line.startswith("scores:"))
    assert "⚠ throttled 12 %" in scores_line
    hot_rows = [line for line in proc.stdout.splitlines() if "⚠ throttled 40 %" in line]
    assert len(hot_rows) == 1
    assert "throttled 12 % of the timed windows (sw_power_cap)" in proc.stdout
    assert "max 83 °C" in proc.stdout
    assert show_json(gputui, rec.id)["state"]["throttled"] is True


def test_run_refuses_a_bad_baseline_before_running_anything(gputui: CliRunner) -> None:
    """Nothing starts (no worker, no record) when the baseline cannot be used."""
    assert_usage_error(gputui("bench", "suite", "run", "--quick", "--baseline", "nope"),
                       "no suite run with id 'nope'")
    cuda = save(make_record("20260101-000001-000-cccccc", device_class="cuda"))
    assert_usage_error(gputui("bench", "suite", "run", "--quick", "--baseline", cuda),
                       "different settings, not compared")
    assert [p.name for p in suite_record.suites_dir().iterdir()] == [f"{cuda}.json"]


class FakeQueue:
    """The run queue's face to run_suite: each submitted run 'finishes' at once with a
    result made here (status from `statuses`, by benchmark name)."""

    def __init__(self, statuses: dict[str, str] | None = None) -> None:
        self.statuses = statuses or {}
        self.submitted: list[str] = []
        self.last = None

    def submit(self, planned: object) -> int:
        from gputui.bench.result import ErrorInfo, Result
        from gputui.bench.run_queue import Finished

        req = planned.request  # type: ignore[attr-defined]
        status = self.statuses.get(req.benchmark, "ok")
        invalid = status == "invalid"
        result = Result.from_dict(make_doc(
            planned.id, status="failed" if invalid else status,  # type: ignore[attr-defined]
            benchmark=req.benchmark, model=req.model))
        if invalid:
            result = replace(result, error=ErrorInfo("invalid", "CUDA is not available"))
        self.submitted.append(req.benchmark)
        self.last = Finished(planned, result, None)  # type: ignore[arg-type]
        return 0

    def wait(self, timeout: float | None = None) -> bool:
        return True


def _plan() -> object:
    from gputui.bench.suite_run import SuitePlan

    return SuitePlan("cpu-quick", "cpu", suite_refs.default_for("cpu-quick", SUITE_VERSION))


def test_a_failed_run_leaves_its_tests_without_figures_and_the_suite_incomplete() -> None:
    from gputui.bench.suite import RUNS
    from gputui.bench.suite_run import run_suite

    queue = FakeQueue({"rnn-train": "failed"})
    rec = run_suite(_plan(), queue)  # type: ignore[arg-type]
    assert queue.submitted == [r.benchmark for r in RUNS]
    assert rec.status == "incomplete"
    assert rec.outcome("lstm-train").value is None  # type: ignore[union-attr]
    assert rec.outcome("cnn-train").value == pytest.approx(100.0)  # type: ignore[union-attr]
    assert rec.scores is not None and rec.scores.training is None and rec.scores.device is None
    assert [o.test for o in rec.outcomes] == [t.id for t in TESTS]


def test_a_cancel_ends_the_suite_after_the_current_run() -> None:
    from gputui.bench.suite_run import run_suite

    queue = FakeQueue()
    rec = run_suite(_plan(), queue, stop=lambda: len(queue.submitted) >= 2)  # type: ignore[arg-type]
    assert len(queue.submitted) == 2
    assert rec.status == "cancelled"
    assert len(rec.outcomes) == 2


def test_settings_the_worker_rejects_end_the_suite_as_bad_usage() -> None:
    from gputui.bench.suite_run import run_suite

    queue = FakeQueue({"cnn-infer": "invalid"})
    with pytest.raises(UsageError, match="CUDA is not available"):
        run_suite(_plan(), queue)  # type: ignore[arg-type]
    assert queue.submitted == ["cnn-infer"]
