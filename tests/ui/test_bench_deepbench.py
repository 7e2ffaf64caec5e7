"""deepbench in the TUI: its op, set and shapes chosen in the form (shown only for it) reach
the run request as the CLI's --op/--set/--shapes do and come back when the screen is opened
again; a finished run shows `bench show`'s tables per op, the slowest shapes marked."""

from __future__ import annotations

from typing import Any

import pytest
from rich.console import Console
from rich.style import Style
from textual.pilot import Pilot
from textual.widgets import Select, Static

from gputui.bench import results_store
from gputui.bench.attribution import ThroughputPoint
from gputui.bench.deepbench.tables import op_tables
from gputui.bench.request import make_request
from gputui.bench.result import Result
from gputui.bench.run_queue import Finished
from gputui.ui.bench_session import LiveRun, Planned, request_label
from gputui.ui.screens.bench import BenchScreen
from gputui.ui.widgets.bench_chart import ThroughputChart
from gputui.ui.widgets.bench_deepbench import DeepbenchTables, DeepbenchView
from gputui.ui.widgets.bench_form import CHOICE_FIELDS, parse_form
from tests.cli import CliResult
from tests.ui.bench_helpers import SIZE, make_app, open_bench, pick, type_into
from tests.ui.helpers import T0, screen_text

pytestmark = pytest.mark.usefixtures("data_dir")
CHOICE_IDS = [wid for wid, _key, _label, _choices in CHOICE_FIELDS]


async def choose(pilot: Pilot[Any], screen: BenchScreen, wid: str, value: str) -> None:
    """As a user does: focus the field, open its list with Enter (the blank "default"
    first, then the choices), arrow from the current value to `value`, Enter."""
    choices = next(c for w, _key, _label, c in CHOICE_FIELDS if w == wid)
    select = screen.query_one(f"#{wid}", Select)
    select.focus()
    await pilot.press("enter")
    await pilot.pause()
    now = 0 if select.selection is None else choices.index(select.selection) + 1
    steps = choices.index(value) + 1 - now
    await pilot.press(*(["down"] * steps if steps > 0 else ["up"] * -steps), "enter")
    await pilot.pause()
    assert select.selection == value, (wid, select.selection)


async def test_op_set_and_shapes_reach_the_request_as_the_cli_flags_do_and_are_kept(
        cli: Any) -> None:
    # Before the app runs: Textual takes stderr over while it does.
    proc: CliResult = cli("bench", "run", "deepbench", "--op", "allreduce", "--set", "infer")
    assert proc.returncode == 2
    cli_line = proc.stderr.strip().removeprefix("gputui: ")
    assert "all-reduce list is for training" in cli_line
    app, _ = make_app()
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_bench(pilot)
        await pick(pilot, screen, "deepbench")
        await choose(pilot, screen, "f-op", "conv")
        await choose(pilot, screen, "f-set", "infer")
        await choose(pilot, screen, "f-shapes", "quick")
        await type_into(pilot, screen, "f-device", "cpu")
        request = screen.build_request()
        assert request is not None, screen.form_error
        assert (request.op, request.problem_set, request.shape_set) == ("conv", "infer",
                                                                         "quick")
        # What `gputui bench run deepbench --device cpu --op conv --set infer --shapes quick`
        # asks for (the CLI builds it with make_request; no precision: "auto").
        assert request == make_request("deepbench", device="cpu", precision="auto",
                                       op="conv", problem_set="infer", shape_set="quick")

        await pilot.press("escape")  # back to the monitor: the session keeps the form
        await pilot.pause()
        assert not isinstance(app.screen, BenchScreen)
        screen = await open_bench(pilot)
        assert screen.bench_name == "deepbench"
        kept = {w: screen.query_one(f"#{w}", Select).selection for w in CHOICE_IDS}
        assert kept == {"f-op": "conv", "f-set": "infer", "f-shapes": "quick"}
        assert screen.build_request() == request

        # A combination the catalog refuses: the CLI's own line, inline, nothing started.
        screen.query_one("#f-op", Select).value = "allreduce"
        assert screen.build_request() is None
        assert cli_line in screen.form_error
        assert app.bench.current is None and not app.bench.queue


async def test_the_fields_show_only_for_deepbench() -> None:
    app, _ = make_app()
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_bench(pilot)

        def shown() -> list[bool]:
            return [bool(screen.query_one(f"#{w}", Select).parent.display) for w in CHOICE_IDS]

        await pick(pilot, screen, "matmul")  # the catalog's order: matmul, deepbench, membw
        assert shown() == [False] * 3
        assert "default (train)" not in screen_text(app)
        await pick(pilot, screen, "deepbench")
        assert shown() == [True] * 3
        text = screen_text(app)  # blank is the catalog's default, which the field names
        assert "default (all)" in text and "default (train)" in text \
            and "default (quick)" in text
        screen.query_one("#f-op", Select).value = "gemm"
        await pick(pilot, screen, "membw")
        assert shown() == [False] * 3
        assert "default (train)" not in screen_text(app)
        request = screen.build_request()
        assert request is not None and request.op is None  # nothing of deepbench's reaches it
    # A value left in a hidden field never reaches another benchmark's request.
    stale = {"f-op": "conv", "f-set": "infer", "f-shapes": "full"}
    assert parse_form("matmul", stale).op is None
    assert parse_form("deepbench", stale).shape_set == "full"


# --------------------------------------------------------------------------- the result


def _gemm(shape: str, us: float, pct: float) -> dict[str, Any]:
    flops = 2_000_000_000
    return {"op": "gemm", "shape": shape, "ran": shape, "flops": flops, "median_us": us,
            "tflops": flops / (us * 1e-6) / 1e12, "pct_of_peak": pct, "busbw_gbps": None,
            "calls": 10, "note": None}


# Five GEMMs: the three lowest % of peak are the 5 %, 20 % and 25 % ones.
ROWS = [_gemm("1760,16,1760,n,n", 100.0, 20.0), _gemm("2560,7000,2560,n,n", 50.0, 40.0),
        _gemm("2560,7000,2560,t,n", 80.0, 25.0), _gemm("35,8457,2048,n,n", 400.0, 5.0),
        _gemm("512,32,512,n,t", 20.0, 100.0),
        {"op": "allreduce", "shape": "100000", "ran": "100000", "flops": None,
         "median_us": None, "tflops": None, "pct_of_peak": None, "busbw_gbps": None,
         "calls": 0, "note": "needs 2+ CUDA GPUs (this run sees 1)"}]
SLOWEST = {"1760,16,1760,n,n", "2560,7000,2560,t,n", "35,8457,2048,n,n"}


def _result(rid: str) -> Result:
    request = make_request("deepbench", device="cuda:0", precision="fp16")
    doc = results_store.empty_result(rid, request)
    doc.update({"status": "ok", "device": "cuda:0", "device_name": "Test GPU",
                "started_at": "2026-03-14T09:26:53.000Z",
                "throughput": {"mean": 1.0, "median": None, "p10": None, "p90": None,
                               "unit": "TFLOP/s"},
                "settings": {"problem_set": "train", "shape_set": "quick"},
                "extra": {"deepbench_rows": ROWS, "peak_tflops": 100.0, "peak_dtype": "fp16",
                          "peak_source": "table", "peak_gpu": "Test GPU"}})
    results_store.save(doc)
    return Result.from_dict(doc)


def _cli_rows(stdout: str) -> dict[str, tuple[bool, list[str]]]:
    """`bench show`'s GEMM rows: shape → (marked ▼, its cells)."""
    shapes = {r["shape"] for r in ROWS}
    out = {}
    for line in stdout.splitlines():
        cells = [c.strip() for c in line.split("│")[1:-1]]
        if cells and cells[0] in shapes:  # a table with nothing marked: no mark column
            out[cells[0]] = (False, cells)
        elif len(cells) > 1 and cells[1] in shapes:
            out[cells[1]] = (cells[0] == "▼", cells[1:])
    return out


async def test_a_finished_run_shows_bench_shows_tables_with_the_slowest_marked(
        cli: Any) -> None:
    rid = "20260314-092653-000-deepbe"
    result = _result(rid)
    shown = cli("bench", "show", rid)
    assert shown.returncode == 0, shown.stderr
    cli_rows = _cli_rows(shown.stdout)
    assert len(cli_rows) == 6
    app, _ = make_app()
    async with app.run_test(size=SIZE) as pilot:
        request = make_request("deepbench", device="cuda:0", precision="fp16")
        planned = Planned(request, request_label(request), id=rid)
        live = LiveRun(planned, started_wall=T0, finished_wall=T0, stage="done",
                       device="cuda:0", device_name="Test GPU", unit="calls/s",
                       result=result, finished=Finished(planned, result, None))
        live.points = [ThroughputPoint(T0, 0.5, v) for v in (5000.0, 5200.0, 800.0)]
        app.bench.last = live
        app.bench.finished_runs.append(live)
        screen = await open_bench(pilot)
        tables = screen.query_one(DeepbenchTables)
        assert tables.display
        tables.scroll_visible(animate=False)
        await pilot.pause()
        text = screen_text(app)
        assert "DeepBench GEMM (m,n,k,a_t,b_t) — train set, ▼ slowest vs peak" in text
        assert "DeepBench all-reduce (floats) — train set" in text
        assert "needs 2+ CUDA GPUs (this run sees 1)" in text
        assert {shape for shape, (mark, _) in cli_rows.items() if mark} == SLOWEST
        marked = set()
        for shape, (_, cells) in cli_rows.items():
            line = next(ln for ln in text.splitlines() if f" {shape} " in ln)
            pane = line.split("│")[-2] if "│" in line else line
            words = pane.replace("┃", " ").split()
            if words[0] == "▼":
                marked.add(shape)
                words = words[1:]
            # The same cells as `bench show`: shape, µs, TFLOP/s, % of peak (or its note).
            assert " ".join(words).startswith(" ".join(cells)), (words, cells)
        assert marked == SLOWEST
        # The big number reads in the result's unit, not the windows' calls/s, and the
        # windows' chart draws no TFLOP/s line on its calls/s axis.
        assert str(screen.query_one("#tp-unit", Static).render()) == "TFLOP/s"
        chart = screen.query_one(ThroughputChart)
        assert chart.series.unit == "calls/s" and chart.series.refs == ()


def test_a_narrow_pane_keeps_every_number_whole() -> None:
    """At 80×24 the run pane is ~37 columns: each shape on a line, its figures whole on the
    next, the slowest still marked; wide enough, the same rows as a table."""
    tables = op_tables(_result("20260314-092653-000-narrow"))
    view = DeepbenchView(tables, Style(bold=True))

    def lines(width: int) -> list[str]:
        console = Console(width=width, color_system=None, file=None, record=True)
        with console.capture() as cap:
            console.print(view)
        return cap.get().splitlines()

    narrow = lines(37)
    assert max(len(ln) for ln in narrow) <= 37
    gemm = next(t for t in tables if t.op == "gemm")
    for n, cells in enumerate(gemm.rows):
        at = next(i for i, ln in enumerate(narrow) if ln[2:].strip() == cells[0])
        assert narrow[at].startswith("▼" if n in gemm.slowest else " ")
        assert narrow[at + 1].split() == list(cells[1:])  # µs, TFLOP/s, % of peak whole
    wide = lines(100)
    for cells in gemm.rows:
        assert any(ln.split()[-len(cells):] == list(cells) for ln in wide)
