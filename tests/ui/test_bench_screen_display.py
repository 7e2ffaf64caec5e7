"""What the benchmark screen shows: compare fits at 120 columns, form errors toast, one
headline throughput, theme colours, where a cancelled duration run stopped, failed-run
wording, damaged and hostile result files, the monitor header while a run goes on, help
keys, replay."""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.widgets import DataTable, Select

from gputui.bench import events, results_store
from gputui.bench.attribution import ThroughputPoint
from gputui.bench.request import make_request
from gputui.bench.result import Result
from gputui.telemetry.replay import Recording
from gputui.ui.app import GputuiApp
from gputui.ui.bench_session import LiveRun, Planned, request_label
from gputui.ui.options import AppOptions
from gputui.ui.screens.bench import BenchScreen, CompareScreen, stderr_lines
from gputui.ui.screens.help import HelpScreen
from gputui.ui.widgets.bench_chart import ThroughputChart
from tests.ui.bench_helpers import (
    make_app,
    open_bench,
    pick,
    table_rows,
    type_into,
    use_fake_worker,
    wait_until,
)
from tests.ui.helpers import T0, gpu, screen_text, snap

pytestmark = pytest.mark.usefixtures("data_dir")  # results go to a temporary data dir

PROSE = ("peak_memory", "latency", "sync", "shapes")


def _save_pair() -> list[dict[str, object]]:
    base = make_request("cnn-infer", device="cpu", batch_size=2)
    docs = []
    for i, (tp, tag) in enumerate(((100.0, "alpha"), (101.0, "bravo"))):
        doc = results_store.empty_result(f"20260101-00000{i}-000-abcde{i}", base)
        doc.update(status="ok", started_at=f"2026-01-01T00:00:0{i}.000Z",
                   throughput={"median": tp, "mean": tp, "unit": "images/s", "p10": 70.0 + 60 * i,
                               "p90": tp},
                   settings={key: f"{tag}-{key} " + "a long prose description " * 8
                             for key in PROSE},
                   device_name="Fake CPU")
        results_store.save(doc)
        docs.append(doc)
    return docs


async def test_compare_is_side_by_side_at_120x40_with_long_values() -> None:
    _save_pair()
    app, _ = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await open_bench(pilot)
        await wait_until(pilot, lambda: len(table_rows(screen)) == 2, "two result rows")
        table = screen.query_one(DataTable)
        table.focus()
        await pilot.press("down", "space", "up", "space", "c")
        await pilot.pause()
        assert isinstance(app.screen, CompareScreen)
        text = screen_text(app)
        # The B values are on screen, beside the A values, cut with an ellipsis.
        assert "bravo-sync" in text and "alpha-sync" in text
        row = next(line for line in text.splitlines() if "alpha-sync" in line)
        assert "bravo-sync" in row and "…" in row
        header = next(line for line in text.splitlines() if "SETTING" in line)
        assert " B " in header
        # Ratios within ±2 % are plain; a real difference takes the theme's colour.
        metrics = app.screen.query_one("#cmp-metrics", DataTable)
        rows = {str(metrics.get_row_at(i)[0]): metrics.get_row_at(i)
                for i in range(metrics.row_count)}
        tp_ratio = rows["throughput"][3]
        assert str(tp_ratio) == "1.010×" and not tp_ratio.style
        p10 = rows["throughput p10 (windows)"][3]
        better = app.screen.get_component_rich_style("cmp--better", partial=True)
        assert p10.style == better and better.color is not None


async def test_invalid_input_is_also_a_toast() -> None:
    app, _ = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        session = use_fake_worker(app, "ok")
        screen = await open_bench(pilot)
        await pick(pilot, screen, "cnn-infer")
        screen.query_one("#f-precision", Select).value = "fp32"
        await type_into(pilot, screen, "f-batch", "two")
        await pilot.press("enter")
        await pilot.pause()
        messages = [(n.message, n.severity) for n in app._notifications]
        assert ("batch size must be a whole number, got 'two'", "error") in messages
        assert session.current is None


def _live(doc: dict[str, object] | None, values: list[float]) -> LiveRun:
    spec = make_request("cnn-train", device="cuda:0")
    result = Result.from_dict({"benchmark": "cnn-train", **doc}) if doc is not None else None
    live = LiveRun(Planned(spec, request_label(spec), id="x"), started_wall=T0, result=result)
    live.points = [ThroughputPoint(T0, 0.5, v) for v in values]
    return live


def _progress(step: int, of: int | None, elapsed_s: float, duration_s: float | None = None,
              total_samples: int | None = None) -> events.Progress:
    return events.Progress(step=step, of=of, elapsed_s=elapsed_s, duration_s=duration_s,
                           throughput=1.0, unit="images/s", window_s=0.5, samples=1,
                           total_samples=total_samples)


def test_the_headline_is_samples_over_timed_seconds_during_and_after_the_run() -> None:
    # Running: the samples of the timed loop so far over its seconds so far.
    live = _live(None, [2000.0, 2200.0, 2400.0])
    live.progress = _progress(30, None, 12.0, total_samples=24_000)
    assert live.headline == 2000.0
    # Finished: the result's headline, the number the CLI and history show.
    doc = {"status": "ok", "throughput": {"value": 2500.0, "median": 3000.0,
                                          "unit": "images/s"}}
    assert _live(doc, [2000.0, 2200.0, 2400.0]).headline == 2500.0
    assert _live(None, [1.0, 3.0]).headline is None


def test_a_cancelled_duration_run_keeps_its_position() -> None:
    live = _live({"status": "cancelled"}, [1.0])
    live.progress = _progress(40, None, 6.0, duration_s=20.0)
    assert live.fraction is None and live.stopped_fraction == 0.3
    live.progress = _progress(3, 12, 1.0)
    assert live.stopped_fraction == 0.25


async def test_chart_scale_includes_the_headline_figures() -> None:
    app, sampler = make_app()
    async with app.run_test(size=(140, 50)) as pilot:
        sampler.ingest(snap(0, [gpu(0)]))
        session = app.bench
        doc = results_store.empty_result("20260101-000000-000-abcde", make_request("cnn-train"))
        doc.update(status="ok", throughput={"median": 9000.0, "mean": 2600.0,
                                            "unit": "images/s"})
        live = _live(dict(doc), [2000.0, 2200.0, 2400.0])
        live.finished_wall = T0
        session.last = live
        screen = await open_bench(pilot)
        chart = screen.query_one(ThroughputChart)
        assert chart.vmax == 2600.0  # the headline (schema 1's mean), above every window
        text = screen_text(app)
        assert "throughput (samples ÷ timed s)" in text and "2,600.0" in text
        assert "median" not in text.split("windows:")[0]  # one number, labelled


def test_stderr_lines_drop_carets_and_the_repeated_message() -> None:
    tail = ["Traceback (most recent call last):", '  File "x.py", line 1', "    f(x)",
            "    ^^^^", "      ~~~^^^", "boom", *(f"line {i}" for i in range(10))]
    out = stderr_lines(tail, "boom")
    assert len(out) == 8 and out[-1] == "line 9"
    assert not any(set(line.strip()) <= set("^~") for line in stderr_lines(tail))
    assert "boom" not in stderr_lines(tail, "boom")


async def test_a_failed_run_says_so_in_the_chart() -> None:
    app, _ = make_app()
    async with app.run_test(size=(140, 50)) as pilot:
        session = use_fake_worker(app, "crash")
        await open_bench(pilot)
        await pilot.press("ctrl+r")
        await wait_until(pilot, lambda: session.last is not None, "the crash")
        await pilot.pause()
        text = screen_text(app)
        assert "no timed windows (run failed)" in text
        assert "waiting for the first window" not in text
        assert text.count("worker exited with code 3") == 1


async def test_the_monitor_header_shows_a_running_benchmark() -> None:
    app, sampler = make_app()
    async with app.run_test(size=(140, 50)) as pilot:
        sampler.ingest(snap(0, [gpu(0)]))
        session = use_fake_worker(app, "term_partial")
        await open_bench(pilot)
        await pilot.press("ctrl+r")
        await wait_until(pilot, lambda: session.current is not None
                         and session.current.points, "progress")
        await pilot.press("escape")
        await pilot.pause()
        assert "▶ bench cnn-" in screen_text(app)
        session.cancel()
        await wait_until(pilot, lambda: session.current is None, "the cancel")
        await pilot.pause()
        assert "▶ bench" not in screen_text(app)


async def test_replay_has_no_benchmarks_and_help_lists_the_bench_keys() -> None:
    app, _ = make_app()
    async with app.run_test(size=(120, 50)) as pilot:
        await pilot.press("question_mark")
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)
        text = screen_text(app)
        for key in ("ctrl+r", "ctrl+n", "x / ctrl+g", "delete", "space / m", "esc"):
            assert key in text, key
        assert "SIGTERM" in text
    rec = Recording(path=Path("/tmp/run.jsonl"),
                    snapshots=[snap(t, [gpu(0, t)]) for t in range(5)], interval_s=1.0)
    app = GputuiApp(AppOptions(replay=rec, replay_speed=1.0))
    async with app.run_test(size=(120, 50)) as pilot:
        await pilot.pause()
        await pilot.press("b")
        await pilot.pause()
        assert not isinstance(app.screen, BenchScreen)
        assert any(n.message == "benchmarks are not available in replay"
                   for n in app._notifications)
        await pilot.press("question_mark")
        await pilot.pause()
        text = screen_text(app)
        assert "SIGTERM" not in text and "SIGKILL" not in text and "ctrl+r" not in text



async def test_damaged_result_files_are_skipped_and_noted_never_fatal(data_dir: Path) -> None:
    _save_pair()
    bad = data_dir / "results"
    (bad / "20260101-000009-000-broken.json").write_bytes(b'{"benchmark": "x", "m": "\xff"}')
    (bad / "20260101-000008-000-settings.json").write_text(
        '{"benchmark": "cnn-train", "settings": 5}')
    (bad / "20260101-000007-000-inf.json").write_text(
        '{"benchmark": "cnn-train", "throughput": {"median": Infinity}}')
    app, _ = make_app()
    async with app.run_test(size=(140, 50)) as pilot:
        screen = await open_bench(pilot)  # `b` with damaged files: the monitor lives on
        await wait_until(pilot, lambda: len(table_rows(screen)) == 2, "the good results")
        assert app.is_running and isinstance(app.screen, BenchScreen)
        assert "3 damaged file(s) skipped" in screen_text(app)
        skipped = [n.message for n in app._notifications if n.severity == "warning"]
        assert any("20260101-000009-000-broken.json" in m for m in skipped)


HOSTILE = "\x1b]0;pwned\x07[link=file:///etc/passwd]click[/link]"


async def test_hostile_strings_in_a_result_are_shown_escaped(data_dir: Path) -> None:
    docs = _save_pair()
    doc = dict(docs[0], id="20260101-000005-000-hostil", model=HOSTILE, device_name=HOSTILE)
    results_store.save(doc)
    app, _ = make_app()
    async with app.run_test(size=(200, 50)) as pilot:
        screen = await open_bench(pilot)
        await wait_until(pilot, lambda: len(table_rows(screen)) == 3, "three results")
        text = screen_text(app)
        assert "\x1b" not in text and "\x07" not in text
        assert "\\x1b]0;pwned" in text  # a visible escape, as typed in the file
        row = next(r for r in table_rows(screen) if r[10] == "20260101-000005-000-hostil")
        assert "[link=file:///etc/passwd]click[/link]" in row[2]  # text, not a link


async def test_runs_reach_the_ui_by_posted_messages_never_a_blocking_call() -> None:
    """The runner's threads post RunEvent/RunFinished; a call_from_thread would make
    them wait for a redraw."""
    app, _ = make_app()
    blocking: list[object] = []
    app.call_from_thread = lambda *a, **k: blocking.append(a)  # type: ignore[method-assign]
    async with app.run_test(size=(140, 50)) as pilot:
        session = use_fake_worker(app, "ok")
        await open_bench(pilot)
        await pilot.press("ctrl+r")
        await wait_until(pilot, lambda: session.last is not None, "the run")
        assert session.last is not None and session.last.result is not None
        assert session.last.result.status == "ok" and len(session.last.points) == 3
    assert blocking == []
