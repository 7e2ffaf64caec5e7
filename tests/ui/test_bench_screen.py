"""The benchmark screen (`b`), driven with Pilot: real CPU runs with tiny shapes, the fake
worker (tests/bench/fake_worker.py) for cancel/crash/queue, and a sampler fed by hand."""

from __future__ import annotations

import os
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import psutil
import pytest
from textual.widgets import DataTable, Input, Select

from gputui.bench import results_store
from gputui.bench.request import make_request
from gputui.telemetry.model import Snapshot, SystemInfo
from gputui.ui.screens.bench import CompareScreen, ResultsTable
from gputui.ui.widgets.bench_chart import ThroughputChart
from tests.ui.bench_helpers import (
    REPO,
    SIZE,
    gone,
    make_app,
    needs_torch,
    open_bench,
    pick,
    table_rows,
    type_into,
    use_fake_worker,
    wait_until,
)
from tests.ui.helpers import gpu, host, screen_text, snap

pytestmark = pytest.mark.usefixtures("data_dir")  # results go to a temporary data dir

# --------------------------------------------------------------------------- a real run


@needs_torch
async def test_real_cpu_run_set_through_the_form(data_dir: Path) -> None:
    app, sampler = make_app()
    async with app.run_test(size=SIZE) as pilot:
        sampler.ingest(snap(0, []))  # a monitor with no GPU (host only)
        screen = await open_bench(pilot)
        await pick(pilot, screen, "cnn-infer")
        # Keys only: Tab from the catalog walks model → device → precision → batch → ...
        await type_into(pilot, screen, "f-device", "cpu")
        await type_into(pilot, screen, "f-batch", "2")
        await type_into(pilot, screen, "f-steps", "3")
        await type_into(pilot, screen, "f-warmup", "1")
        await type_into(pilot, screen, "f-size", "32")

        # Event-loop lag while the run is in progress, measured once, reported, not asserted.
        gaps: list[float] = []
        last = [time.monotonic()]

        def tick() -> None:
            now = time.monotonic()
            gaps.append(now - last[0])
            last[0] = now

        timer = app.set_interval(0.05, tick)
        await pilot.press("enter")
        session = app.bench
        await wait_until(pilot, lambda: session.last is not None, "the run to finish")
        timer.stop()
        live = session.last
        assert live is not None and live.result is not None
        assert live.result.status == "ok", live.result.error
        assert live.request.device == "cpu" and live.request.batch_size == 2
        assert live.request.steps == 3 and live.request.image_size == 32
        assert live.points, "progress events reached the screen"
        assert live.progress is not None and live.progress.step == 3
        await wait_until(pilot, lambda: table_rows(screen), "the result row")
        row = table_rows(screen)[0]
        assert row[1] == "cnn-infer" and row[5] == "ok" and row[10] == live.id
        assert (data_dir / "results" / f"{live.id}.json").is_file()
        text = screen_text(app)
        # Offline inference reports per-batch step times; request latency is only measured
        # single-stream.
        assert "✓ cnn-infer resnet18" in text and "step time  p50" in text
        assert "energy/sample N/A" in text
        print(f"\nevent-loop max gap during a real CPU run: {max(gaps) * 1000:.0f} ms "
              f"({len(gaps)} ticks of 50 ms)")


# --------------------------------------------------------------------------- fake worker


async def test_cancel_keeps_the_partial_result_and_shows_host_cpu(data_dir: Path) -> None:
    app, sampler = make_app()
    async with app.run_test(size=SIZE) as pilot:
        session = use_fake_worker(app, "term_partial")
        screen = await open_bench(pilot)
        await pick(pilot, screen, "cnn-infer")
        screen.query_one("#f-device", Input).value = "cpu"
        await pilot.press("enter")  # on the catalog: run with these settings
        await wait_until(pilot, lambda: session.current is not None
                         and len(session.current.points) >= 3, "progress")
        sampler.ingest(snap(1, [], host=host(cpu_pct=37.5)))
        await pilot.pause()
        text = screen_text(app)
        assert "CPU run — no GPU telemetry · host CPU 38 %" in text
        assert "Queue (0): empty" in text
        run = session.current
        assert run is not None and run.run is not None
        pid = run.run.pid
        await pilot.press("x")  # focus is on the catalog, so x is the screen's cancel
        await wait_until(pilot, lambda: session.last is not None, "the cancelled result")
        assert session.last is not None and session.last.result is not None
        assert session.last.result.status == "cancelled"
        saved = results_store.load(session.last.id)
        assert saved.status == "cancelled" and saved.steps is not None and saved.steps >= 3
        await wait_until(pilot, lambda: table_rows(screen), "the result row")
        assert table_rows(screen)[0][5] == "cancelled"
        assert pid is not None and gone(pid)


async def test_a_crash_shows_the_error_and_stderr_and_the_monitor_goes_on() -> None:
    app, sampler = make_app()
    async with app.run_test(size=SIZE) as pilot:
        session = use_fake_worker(app, "crash")
        screen = await open_bench(pilot)
        await pick(pilot, screen, "cnn-train")
        await pilot.press("ctrl+r")
        await wait_until(pilot, lambda: session.last is not None, "the crash")
        text = screen_text(app)
        assert "✖ crash: worker exited with code 3 without reporting a result" in text
        assert "worker stderr (last " in text
        assert "| RuntimeError: something broke in the fake worker" in text
        assert app.is_running
        # The monitor still takes snapshots and draws them.
        await pilot.press("escape")
        sampler.ingest(snap(2, [gpu(0, 2)]))
        # Its GPU panel is mounted with this first reading: a layout or two, not one pause.
        await wait_until(pilot, lambda: "GPU 0 · NVIDIA A100-SXM4-80GB" in screen_text(app),
                         "the monitor drawing the reading")


async def test_oom_error_shows_kind_message_and_suggestion() -> None:
    app, _ = make_app()
    async with app.run_test(size=SIZE) as pilot:
        session = use_fake_worker(app, "oom")
        await open_bench(pilot)
        await pilot.press("ctrl+r")
        await wait_until(pilot, lambda: session.last is not None, "the OOM")
        text = screen_text(app)
        assert "✖ oom: CUDA out of memory at batch size 512" in text
        assert "suggestion: try --batch-size 256" in text


async def test_a_queue_of_two_runs_completes_both_in_order() -> None:
    app, _ = make_app()
    async with app.run_test(size=SIZE) as pilot:
        session = use_fake_worker(app, "ok")
        screen = await open_bench(pilot)
        await pick(pilot, screen, "cnn-infer")
        await pilot.press("ctrl+n")
        await pick(pilot, screen, "matmul")
        await pilot.press("ctrl+n")
        await pilot.pause()
        if session.current is not None and session.queue:  # the first may already be done
            assert "Queue (1)" in screen_text(app) and "1. matmul" in screen_text(app)
        await wait_until(pilot, lambda: len(session.finished_runs) == 2, "both runs")
        assert [r.request.benchmark for r in session.finished_runs] == ["cnn-infer", "matmul"]
        assert all(r.result and r.result.status == "ok" for r in session.finished_runs)
        assert session.finished_runs[0].finished_wall <= session.finished_runs[1].started_wall  # type: ignore[operator]
        await wait_until(pilot, lambda: len(table_rows(screen)) == 2, "two result rows")
        assert [r[1] for r in table_rows(screen)] == ["matmul", "cnn-infer"]  # newest first


async def test_invalid_input_shows_an_inline_error_and_starts_nothing() -> None:
    app, _ = make_app()
    async with app.run_test(size=SIZE) as pilot:
        session = use_fake_worker(app, "ok")
        screen = await open_bench(pilot)
        await pick(pilot, screen, "cnn-infer")
        screen.query_one("#f-precision", Select).value = "fp16"
        await type_into(pilot, screen, "f-device", "cpu")
        await pilot.press("enter")
        await pilot.pause()
        assert screen.form_error == "✖ fp16 needs a CUDA device; on CPU use bf16 or fp32"
        screen.query_one("#f-precision", Select).value = "fp32"
        await type_into(pilot, screen, "f-batch", "0")
        await pilot.press("enter")
        await pilot.pause()
        assert screen.form_error == "✖ batch size must be ≥ 1, got 0"
        await type_into(pilot, screen, "f-batch", "two")
        await pilot.press("enter")
        await pilot.pause()
        assert "batch size must be a whole number" in screen_text(app)
        assert session.current is None and session.last is None and not session.queue


async def test_compare_shows_two_results_side_by_side(data_dir: Path) -> None:
    base = make_request("cnn-infer", device="cpu", batch_size=2)
    docs = []
    for i, tp in enumerate((100.0, 150.0)):
        doc = results_store.empty_result(f"20260101-00000{i}-000-abcde{i}", base)
        doc.update(status="ok", started_at=f"2026-01-01T00:00:0{i}.000Z",
                   throughput={"median": tp, "mean": tp, "unit": "images/s", "p10": tp,
                               "p90": tp},
                   settings={"batch_size": 2 + 2 * i}, device_name="Fake CPU")
        results_store.save(doc)
        docs.append(doc)
    app, _ = make_app()
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_bench(pilot)
        await wait_until(pilot, lambda: len(table_rows(screen)) == 2, "two result rows")
        table = screen.query_one(ResultsTable)
        table.focus()
        await pilot.press("down", "space", "up", "space")  # A = older, B = newer
        assert screen.marked == [docs[0]["id"], docs[1]["id"]]
        assert [r[0] for r in table_rows(screen)] == ["B", "A"]
        await pilot.press("c")
        await pilot.pause()
        assert isinstance(app.screen, CompareScreen)
        metrics = app.screen.query_one("#cmp-metrics", DataTable)
        first = [str(c) for c in metrics.get_row_at(0)]
        assert first == ["throughput", "100.0 images/s", "150.0 images/s", "1.500×"]
        text = screen_text(app)
        assert "B/A" in text and "batch_size" in text
        await pilot.press("escape")
        assert app.screen is screen


# --------------------------------------------------------------------------- throttling

# A worker that reports a CUDA device and emits progress windows only up to the count in
# `budget`, at the throughput in `tp`: the test releases each stretch of windows after it
# has moved the episode's edge, so every window lands on the side of the edge it means to
# (free-running, a loaded machine let windows queue across the edge and moved the medians).
STUB = """
import json, os, sys, time
from pathlib import Path
from gputui.bench import events
spec = json.loads(sys.argv[sys.argv.index("--spec-json") + 1])
ctl = Path(os.environ["STUB_DIR"])
t0 = time.monotonic()
def emit(ev):
    print(events.encode(ev, time.monotonic() - t0), flush=True)
emit(events.Started(os.getpid(), spec["benchmark"], spec,
                    {"device": "cuda:0", "device_name": "Stub GPU",
                     "nvml": {"nvml_index": 0, "uuid": "GPU-0"}}))
step = 0
while not (ctl / "stop").exists():
    if step >= int((ctl / "budget").read_text()):
        time.sleep(0.02)
        continue
    step += 1
    tp = float((ctl / "tp").read_text())
    emit(events.Progress(step=step, of=None, elapsed_s=step * 0.05, duration_s=None,
                         throughput=tp, unit="images/s", window_s=1e-6, samples=1,
                         total_samples=step))
    time.sleep(0.01)
doc = {"benchmark": spec["benchmark"], "status": "ok", "device": "cuda:0",
       "throughput": {"median": 100.0, "mean": 100.0, "unit": "images/s", "p10": 82.0,
                      "p90": 100.0}}
emit(events.ResultReady(doc))
"""


async def test_throttle_episode_is_called_out_on_the_chart_and_in_the_result(
        tmp_path: Path) -> None:
    ctl = tmp_path / "stub"
    ctl.mkdir()

    def release(throughput: str, windows: int) -> None:
        # Renamed into place: the stub polls these files, and a write in place could let
        # it read one empty (and die) between truncating and writing.
        for name, value in (("tp", throughput), ("budget", str(windows))):
            (ctl / f"{name}.new").write_text(value)
            (ctl / f"{name}.new").replace(ctl / name)

    release("100", 4)
    app, sampler = make_app()

    def now_snap(seq: int, throttle: bool) -> Snapshot:
        g = gpu(0, seq, throttle_mask=0x40 if throttle else 0, temp_c=88 if throttle else 60)
        return Snapshot(time=datetime.now(UTC), mono=time.monotonic(),
                        system=SystemInfo("550.54.15"), host=host(), gpus=(g,), seq=seq)

    async with app.run_test(size=SIZE) as pilot:
        session = app.bench
        session.worker_cmd = [sys.executable, "-c", STUB]
        session.env = {**os.environ, "STUB_DIR": str(ctl), "PYTHONPATH": str(REPO)}
        sampler.ingest(now_snap(1, False))
        screen = await open_bench(pilot)
        await pick(pilot, screen, "cnn-train")
        screen.query_one("#f-device", Input).value = "cuda:0"
        await pilot.press("enter")

        def points() -> int:
            live = session.current
            return len(live.points) if live is not None else 0

        await wait_until(pilot, lambda: points() == 4, "4 full-speed windows")
        sampler.ingest(now_snap(2, True))  # HW thermal slowdown starts now
        release("82", 10)
        await wait_until(pilot, lambda: points() == 10, "6 windows during the episode")
        sampler.ingest(now_snap(3, True))
        await pilot.pause()
        text = screen_text(app)
        assert "⚠ throughput fell 18 % during HW thermal slowdown" in text
        assert "GPU 0 · util" in text and "⚠ HW thermal slowdown" in text
        assert screen.query_one(ThroughputChart).throttled_columns >= 5
        assert "▲" in text
        sampler.ingest(now_snap(4, False))  # the episode ends
        release("100", 16)
        await wait_until(pilot, lambda: points() == 16, "6 windows after the episode")
        (ctl / "stop").write_text("")
        await wait_until(pilot, lambda: session.last is not None, "the result")
        live = session.last
        assert live is not None and live.result is not None
        assert len(live.attributions) == 1
        words = live.attributions[0].text(live.unit)
        assert words.startswith("throughput fell 18 % during HW thermal slowdown")
        assert words.endswith("on GPU 0")
        assert f"⚠ {words}" in screen_text(app)
        saved = results_store.load(live.id)
        notes = saved.extra.throttle_attribution
        assert notes is not None and notes[0].text == words
        assert saved.throttle_episodes and saved.throttle_episodes[0]["gpu"] == 0


# --------------------------------------------------------------------------- exit


async def test_quitting_kills_a_running_worker_that_ignores_sigterm() -> None:
    app, _ = make_app()
    async with app.run_test(size=SIZE) as pilot:
        session = use_fake_worker(app, "deaf")
        await open_bench(pilot)
        await pilot.press("ctrl+r")
        await wait_until(pilot, lambda: session.current is not None
                         and session.current.points, "the worker to run")
        assert session.current is not None and session.current.run is not None
        pid = session.current.run.pid
        assert pid is not None and psutil.pid_exists(pid)
        await pilot.press("q")
        await pilot.pause()
    assert gone(pid), "the worker outlived the app"
    finished = session.runs.last  # shutdown waited for the save
    assert finished is not None and finished.path is not None
    saved = results_store.load(finished.planned.id)  # the partial result is kept, as in the CLI
    assert saved.status == "cancelled"


# --------------------------------------------------------------------------- form, queue


async def test_switches_follow_the_catalog_and_reach_the_spec() -> None:
    from textual.widgets import Checkbox

    from gputui.ui.screens.bench import parse_form

    app, _ = make_app()
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_bench(pilot)

        def enabled() -> set[str]:
            ids = ("f-sweep", "f-channels-last", "f-compile", "f-profile")
            out = {i for i in ids if not screen.query_one(f"#{i}", Checkbox).disabled}
            out |= {i for i in ("f-threads", "f-nproc")
                    if not screen.query_one(f"#{i}", Input).disabled}
            return out

        await pick(pilot, screen, "cnn-train")
        assert enabled() == {"f-sweep", "f-channels-last", "f-compile", "f-profile",
                             "f-threads", "f-nproc"}
        await pick(pilot, screen, "rnn-infer")
        assert enabled() == {"f-sweep", "f-compile", "f-profile", "f-threads"}
        screen.query_one("#f-mode", Select).value = "latency"
        await pilot.pause()
        assert "f-sweep" not in enabled()  # a sweep measures throughput
        await pick(pilot, screen, "matmul")
        assert enabled() == {"f-sweep", "f-threads"}  # matmul sweeps standard shapes
        await pick(pilot, screen, "cnn-train")
        screen.query_one("#f-channels-last", Checkbox).value = True
        screen.query_one("#f-compile", Checkbox).value = True
        await type_into(pilot, screen, "f-threads", "2")
        await type_into(pilot, screen, "f-nproc", "2")
        request = screen.build_request()
        assert request is not None
        assert request.channels_last and request.compile and not request.sweep
        assert request.threads == 2 and request.nproc == 2
        screen.query_one("#f-profile", Checkbox).value = True
        assert screen.build_request() is None  # the catalog's own rule, shown inline
        assert "--nproc cannot be combined with --sweep or --profile" in screen.form_error
        with pytest.raises(Exception, match="processes must be a whole number"):
            parse_form("cnn-train", {"f-nproc": "two"})


async def test_delete_removes_one_queued_run() -> None:
    from gputui.ui.screens.bench import QueueList

    app, _ = make_app()
    async with app.run_test(size=SIZE) as pilot:
        session = use_fake_worker(app, "deaf")  # the first run holds the queue
        screen = await open_bench(pilot)
        for name in ("cnn-infer", "matmul", "membw", "rnn-infer"):
            await pick(pilot, screen, name)
            await pilot.press("ctrl+n")
        await wait_until(pilot, lambda: session.current is not None, "the first run")
        assert [p.request.benchmark for p in session.queue] == ["matmul", "membw",
                                                                "rnn-infer"]
        queue = screen.query_one(QueueList)
        queue.focus()
        await pilot.press("down")  # the second waiting run: membw
        await pilot.press("delete")
        await pilot.pause()
        assert [p.request.benchmark for p in session.queue] == ["matmul", "rnn-infer"]
        text = screen_text(app)
        assert "Queue (2)" in text and "2. rnn-infer" in text and "membw ·" not in text
        assert session.current is not None and session.current.request.benchmark == \
            "cnn-infer"  # the running one is not touched
        await pilot.press("X")
        session.cancel()
        await wait_until(pilot, lambda: session.current is None, "the cancel")


async def test_snapshot_bench_screen_with_a_finished_run(tmp_path: Path) -> None:
    """The layout of the benchmark screen, locked: a finished training run built by hand
    (no worker, no timers), one saved result in the table, one run queued."""
    from gputui.bench import events
    from gputui.bench.attribution import ThroughputPoint
    from gputui.bench.result import Result
    from gputui.bench.run_queue import Finished
    from gputui.ui.bench_session import LiveRun, Planned, request_label
    from tests.ui.helpers import T0
    from tests.ui.test_snapshots import check_snapshot

    spec = make_request("cnn-train", device="cuda:0", batch_size=64, channels_last=True)
    doc = results_store.empty_result("20260314-092653-000-abcde", spec)
    doc.update(status="ok", started_at="2026-03-14T09:26:53.000Z", device="cuda:0",
               device_name="NVIDIA A100-SXM4-80GB", peak_memory_bytes=12 * 2**30,
               throughput={"median": 2410.0, "mean": 2400.0, "unit": "images/s",
                           "p10": 2300.0, "p90": 2450.0},
               step_time_ms={"p50": 26.6, "p90": 27.9, "p99": 31.2},
               energy_j_per_sample=0.121, avg_power_w=292.0,
               phases_ms={"data": 0.4, "h2d": 1.9, "forward": 8.1, "backward": 14.6,
                          "optimizer": 1.6})
    results_store.save(doc)
    app, sampler = make_app()
    async with app.run_test(size=SIZE) as pilot:
        sampler.ingest(snap(0, [gpu(0)]))
        session = app.bench
        planned = Planned(spec, request_label(spec), id=str(doc["id"]))
        result = Result.from_dict(doc)
        live = LiveRun(planned, started_wall=T0, finished_wall=T0,
                       stage="done", device="cuda:0", device_name="NVIDIA A100-SXM4-80GB",
                       gpu_index=0, unit="images/s", result=result,
                       finished=Finished(planned, result, tmp_path / f"{doc['id']}.json"),
                       phases_ms=dict(doc["phases_ms"]))
        live.points = [ThroughputPoint(T0, 1.0, 2300.0 + (i * 37) % 180) for i in range(40)]
        live.progress = events.Progress(step=600, of=600, elapsed_s=15.0, duration_s=None,
                                        throughput=2400.0, unit="images/s", window_s=1.0,
                                        samples=64, total_samples=38400)
        session.last = live
        session.finished_runs.append(live)
        # Waiting, not started: put straight into the queue's list (no worker here).
        waiting = make_request("matmul", device="cuda:0")
        session.runs._pending.append(Planned(waiting, request_label(waiting)))
        screen = await open_bench(pilot)
        await wait_until(pilot, lambda: len(table_rows(screen)) == 1, "the result row")
        await pilot.pause()
        app.clear_notifications()
        await pilot.pause()
        check_snapshot(app, "bench_finished_140x50", tmp_path)
