"""The GPU panels: the layout at 80×24, 120×40 and 200×60
with 1, 4 and 8 GPUs; sparklines labelled, on fixed scales, over a time axis; "SM active"
beside GPU util with its history and verdict; GPM held by another profiler said once."""

from __future__ import annotations

import itertools
import re

import pytest
from textual.geometry import Region

from gputui.ui.widgets.gpu_area import GpuArea
from gputui.ui.widgets.gpu_panel import GpuPanel, TextLine
from gputui.ui.widgets.gpu_row import GpuRow
from gputui.ui.widgets.gpu_view import HISTORY_METRICS
from tests.ui.helpers import feed, gpu, lost, screen_text, snap, throttled
from tests.ui.test_app import make_app

SIZES = ((80, 24), (120, 40), (200, 60))
SCALES = {"util_gpu_pct": "0–100%", "sm_active_pct": "0–100%", "util_mem_pct": "0–100%",
          "mem_used_bytes": "0–80G", "power_w": "0–400W", "temp_c": "0–92°C",
          "clock_sm_mhz": "0–1980MHz"}


def fleet(n: int):
    """GPU 0 throttling, the last one lost (n > 1), GPU 1 with GPM counters."""
    def make(t: int):
        gs = [throttled(0, t) if t >= 20 else gpu(0, t)]
        for i in range(1, n):
            if i == n - 1 and t >= 40:
                gs.append(lost(i))
            elif i == 1:
                gs.append(gpu(1, t, sm_active_pct=30.0 + t % 20, tensor_active_pct=12.0))
            else:
                gs.append(gpu(i, t))
        return snap(t, gs)
    return make


def _rows(app: object, widget: object) -> list[str]:
    """What the screen shows inside a widget (or a region), row by row."""
    region = widget if isinstance(widget, Region) else widget.region  # type: ignore[attr-defined]
    lines = screen_text(app).splitlines()  # type: ignore[arg-type]
    return [line[region.x:region.right] for line in lines[region.y:region.bottom]]


@pytest.mark.parametrize("n", (1, 4, 8))
@pytest.mark.parametrize("size", SIZES)
async def test_every_gpu_above_the_fold_with_labelled_history(size: tuple[int, int],
                                                               n: int) -> None:
    app, sampler = make_app()
    async with app.run_test(size=size) as pilot:
        feed(sampler, 0, 90, fleet(n))
        await pilot.pause()
        await pilot.pause()
        area = app.query_one(GpuArea)
        text = screen_text(app)
        # Nothing to scroll: every GPU, the lost one too, is on screen.
        assert area.max_scroll_y == 0
        widgets = list(app.query(GpuRow if area.compact else GpuPanel))
        assert len(widgets) == n
        assert all(w.region.bottom <= area.region.bottom for w in widgets)
        if n > 1:
            assert "✖ GPU is lost" in text
        # The host and process boxes keep their place under the GPUs.
        assert "Processes (" in text and area.region.bottom <= size[1] - 10
        if area.compact:
            assert re.search(r"\b945/1980MHz\b", text)  # the SM clock, at any width
            assert re.search(r" GPU .* SMact ", text)  # SM active beside GPU util
            if n > 1:  # GPU 1's SM active has a value: GPU, SMact and MEMC in %
                line = next(ln for ln in app.query_one("#row-1", GpuRow).render().plain
                            .split("\n") if "MHz" in ln)
                assert line.count("%") == 3, line
            return
        if n > 1:  # GPU 1 has GPM counters: its SM active figure, beside GPU util
            rows1 = [r.strip() for r in _rows(app, app.query_one("#gpu-1", GpuPanel))]
            i = next(k for k, r in enumerate(rows1) if r.startswith("│ GPU "))
            assert re.match(r"│ SM ACT .* \d+% ", rows1[i + 1]), rows1
        for panel in widgets:
            spark_w = panel.part_region("s-util_gpu_pct")
            for metric, label in HISTORY_METRICS:
                spark = panel.part_region(f"s-{metric}")
                rows = _rows(app, panel.part_region(f"x-{metric}"))
                # Labelled: the gauge on the same rows names it; the scale is written.
                if len(rows) == 1:
                    assert rows[0].strip() == SCALES[metric]
                else:  # a tall graph: its top value above, 0 below, like an axis
                    assert rows[0].strip() == SCALES[metric].removeprefix("0–")
                    assert rows[-1].strip() == "0"
                gauge_rows = _rows(app, panel.part_region(f"g-{metric}"))
                assert any(r.startswith(label) for r in gauge_rows), (label, gauge_rows)
                assert spark.x == spark_w.x and spark.right == spark_w.right
            # The time axis under the graphs: the window's start on the left, "now" right.
            axis = panel.part_region("axis")
            (line,) = _rows(app, axis)
            assert line.startswith("−5m") and line.rstrip().endswith("now")
            assert axis.right == spark_w.right and axis.x == spark_w.x
            assert len(line.rstrip()) == spark_w.width


async def test_tall_sparklines_have_a_blank_row_between_neighbours() -> None:
    app, sampler = make_app()
    async with app.run_test(size=(200, 60)) as pilot:
        feed(sampler, 0, 300, fleet(1))
        await pilot.pause()
        panel = app.query_one(GpuPanel)
        assert app.query_one(GpuArea).spark_rows == 3
        sparks = [panel.part_region(f"s-{m}") for m, _ in HISTORY_METRICS]
        for upper, lower in itertools.pairwise(sparks):
            assert lower.y == upper.bottom + 1  # one blank row between
            r = upper
            (gap,) = _rows(app, Region(r.x, r.bottom, r.width, 1))
            assert not gap.strip()


async def test_sm_active_beside_gpu_util_with_history_and_dash_when_unknown() -> None:
    app, sampler = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        feed(sampler, 0, 300, lambda t: snap(t, [
            gpu(0, t, sm_active_pct=40.0 if t < 150 else 80.0, tensor_active_pct=30.0),
            gpu(1, t)]))
        await pilot.pause()
        p0, p1 = app.query_one("#gpu-0", GpuPanel), app.query_one("#gpu-1", GpuPanel)
        rows0 = [r.strip() for r in _rows(app, p0)]
        gpu_row = next(i for i, r in enumerate(rows0) if r.startswith("│ GPU "))
        assert re.match(r"│ SM ACT .* 80% ", rows0[gpu_row + 1])  # right under GPU util
        # Its history on 0–100 %: half the window at 40 %, then 80 % (▃ then ▆).
        drawn = p0.spark_rows_of("sm_active_pct")[0]
        half = len(drawn) // 2
        assert set(drawn[: half - 1]) == {"▃"} and set(drawn[half + 1:]) == {"▆"}
        # A GPU without GPM counters: a dash, and no line at all (never a 0 line).
        rows1 = [r.strip() for r in _rows(app, p1)]
        assert any(re.match(r"│ SM ACT \S* +— ", r) for r in rows1), rows1
        assert not p1.spark_rows_of("sm_active_pct")[0].strip()


@pytest.mark.parametrize("size", ((80, 24), (120, 40), (200, 60)))
async def test_the_gpm_verdict_is_a_panel_line_wrapped_never_cut(size: tuple[int, int]) -> None:
    app, sampler = make_app()

    def make(t: int):
        return snap(t, [gpu(0, t, util_gpu_pct=98, sm_active_pct=22.0, tensor_active_pct=0.0)])

    async with app.run_test(size=size) as pilot:
        feed(sampler, 0, 10, make)
        await pilot.pause()
        await pilot.pause()
        panel = app.query_one(GpuPanel)
        verdict = panel.part_region("verdict")
        words = "◇ busy 98 % but SMs 22 % active, tensor cores idle: launch- or input-bound?"
        assert panel.verdict_text == words
        shown = " ".join(r.strip("│ ") for r in _rows(app, verdict))
        assert re.sub(r"\s+", " ", shown).strip() == words  # all of it, on as many rows
        assert panel.region.bottom > verdict.bottom  # inside its panel's border
        # Busy and compute-bound: no verdict line.
        feed(sampler, 10, 11, lambda t: snap(t, [gpu(0, t, util_gpu_pct=98, sm_active_pct=90.0,
                                                      tensor_active_pct=60.0)]))
        await pilot.pause()
        assert panel.verdict_text is None and not panel.part_region("verdict")


async def test_gpm_held_by_another_profiler_is_said_once() -> None:
    app, sampler = make_app()
    note = ("profiling counters are held by another profiler (DCGM or Nsight): SM activity "
            "is not shown; retrying in 10 s")

    def make(t: int):
        return snap(t, [gpu(i, t, gpm_note=note if t >= 5 else None) for i in range(4)])

    async with app.run_test(size=(120, 40)) as pilot:
        feed(sampler, 0, 20, make)
        await pilot.pause()
        app.clear_notifications()
        await pilot.pause()
        text = screen_text(app)
        assert text.count("held by another profiler") == 1
        notice = app.screen.query_one("#notice", TextLine)
        assert str(notice.render()) == f"ⓘ GPU 0, 1, 2, 3: {note}"
        shown = " ".join(r.strip() for r in _rows(app, notice))
        assert shown == f"ⓘ GPU 0, 1, 2, 3: {note}"  # wrapped onto two rows, not cut
        feed(sampler, 20, 21, lambda t: snap(t, [gpu(i, t) for i in range(4)]))
        await pilot.pause()
        assert "another profiler" not in screen_text(app)


async def test_sm_active_from_the_fake_nvml_gpm_scenario_in_the_monitor_profile(
        fake_nvml: object) -> None:
    """The monitor's own field profile reads GPM: the H100's SM active and its verdict
    come through the real pynvml; the A100 (no GPM) shows a dash."""
    from gputui.telemetry.sampler import Sampler
    from tests.fakenvml.harness import scenario_path

    fake_nvml.use(scenario_path("gpm"))  # type: ignore[attr-defined]
    sampler = Sampler.open(interval=1.0, profile="monitor")
    clock = iter(range(1000, 100000))
    sampler.nvml.gpm_clock = lambda: float(next(clock))  # type: ignore[union-attr]
    try:
        app, _ = make_app(sampler)
        async with app.run_test(size=(120, 40)) as pilot:
            sampler.tick()
            sampler.tick()
            await pilot.pause()
            await pilot.pause()
            text = screen_text(app)
            assert re.search(r"SM ACT .* 22% ", text)
            assert re.search(r"SM ACT \S* +— ", text)
            assert "◇ busy 98 % but SMs 22 % active, tensor cores idle" in text
    finally:
        sampler.close()


async def test_a_gpu_in_mig_mode_says_so_in_its_panel_title() -> None:
    from gputui.telemetry.mig import MigDevice

    migs = tuple(MigDevice(index=i, uuid=f"MIG-{i}", name="NVIDIA A100-SXM4-80GB MIG 1g.10gb",
                           profile="1g.10gb", gpu_instance_id=7 + i, compute_instance_id=0)
                 for i in range(3))
    app, sampler = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        feed(sampler, 0, 3, lambda t: snap(t, [gpu(0, t, mig_devices=migs), gpu(1, t)]))
        await pilot.pause()
        text = screen_text(app)
        assert "GPU 0 · NVIDIA A100-SXM4-80GB · MIG on · 3 instances" in text
        assert "GPU 1 · NVIDIA A100-SXM4-80GB ─" in text  # MIG off: no MIG words
