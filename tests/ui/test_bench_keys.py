"""The benchmark screen at a glance: every key in its footer and help works
from any focus, focus is plainly visible in every theme, checkboxes read on/off without
colour, one labelled headline number, and elapsed time with an ETA during a run."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from textual.color import Color
from textual.widget import Widget
from textual.widgets import Button, Checkbox, Digits, Input, Select

from gputui.bench import events, results_store
from gputui.bench.fmt import fmt_eta, remaining_s
from gputui.bench.request import RunRequest, make_request
from gputui.bench.run_queue import Planned
from gputui.ui.bench_session import LiveRun
from gputui.ui.screens.bench import BenchScreen
from gputui.ui.widgets.bench_form import OnOffBox
from gputui.ui.widgets.bench_live import HEADLINE_LABEL, time_line
from tests.ui.bench_helpers import (
    make_app,
    open_bench,
    table_rows,
    type_into,
    use_fake_worker,
    wait_until,
)
from tests.ui.helpers import screen_text, spy_notifications

pytestmark = pytest.mark.usefixtures("data_dir")
SIZES = ((80, 24), (120, 40), (200, 60))
THEMES = ("gputui-dark", "gputui-light", "gputui-high-contrast")


def _save_result(rid: str) -> None:
    doc = results_store.empty_result(rid, make_request("cnn-infer", device="cpu", batch_size=2))
    doc.update(status="ok", started_at="2026-01-01T00:00:00.000Z", device_name="Fake CPU",
               throughput={"value": 1234.5, "median": 1200.0, "unit": "images/s",
                           "p10": 1100.0, "p90": 1300.0})
    results_store.save(doc)


def _focusables(screen: BenchScreen) -> list[Widget]:
    chain = list(screen.focus_chain)
    assert len(chain) >= 15, [w.id for w in chain]  # the form's fields, lists, panes, table
    return chain


def _inputs(screen: BenchScreen) -> dict[str, str]:
    return {str(w.id): w.value for w in screen.query(Input)}


async def test_every_footer_and_help_key_works_from_any_focus(
        monkeypatch: pytest.MonkeyPatch) -> None:
    _save_result("20260101-000000-000-abcde0")
    app, _ = make_app()
    async with app.run_test(size=(80, 24)) as pilot:  # the smallest: everything scrolls
        screen = await open_bench(pilot)
        await wait_until(pilot, lambda: table_rows(screen), "the saved result")
        session = app.bench
        submitted: list[RunRequest] = []
        monkeypatch.setattr(session, "submit", lambda request: submitted.append(request) or 0)
        notes = spy_notifications(app)
        # Screen keys are the screen's bindings, and whether one reaches them depends on
        # the focused widget's class (its own bindings, whether it takes text): one widget
        # of each class, and the device field, which completes what is typed into it.
        kinds: dict[tuple[type, bool], int] = {}
        for i, w in enumerate(_focusables(screen)):
            kinds.setdefault((type(w), w.id == "f-device"), i)
        assert len(kinds) >= 6, kinds  # lists, inputs, selects, switches, buttons, table
        for i in sorted(kinds.values()):
            # The screen is opened again after each esc: focus the i-th widget of the
            # screen now shown (a widget of the closed one can no longer take focus).
            widget = _focusables(screen)[i]
            widget.focus()
            await pilot.pause()
            where = f"{type(widget).__name__}#{widget.id}"
            assert app.focused is widget, f"{where} did not take focus"
            typed = _inputs(screen)
            keys = [("x", "No benchmark is running"), ("ctrl+g", "No benchmark is running"),
                    ("X", "Queue cleared (0 removed)"),
                    ("c", "Mark two results with space, then press c")]
            if widget.id == "f-device":
                keys.pop()  # c begins "cpu"/"cuda": typed here (the test below checks it)
            for key, expected in keys:
                before = len(notes)
                await pilot.press(key)
                assert [m for _, m in notes[before:]] == [expected], (where, key)
            assert _inputs(screen) == typed, f"{where}: a screen key was typed into a field"
            await pilot.press("m")
            assert screen.marked == ["20260101-000000-000-abcde0"], where
            await pilot.press("m")
            assert screen.marked == [], where
            for key in ("ctrl+r", "ctrl+n"):
                before = len(submitted)
                await pilot.press(key)
                assert len(submitted) == before + 1, (where, key)
                assert submitted[-1].benchmark == screen.bench_name
            if not isinstance(widget, Input):  # in a text field delete edits the text
                before = len(notes)
                await pilot.press("delete")
                assert [m for _, m in notes[before:]] == ["Nothing queued to remove"], where
            await pilot.press("escape")
            assert not isinstance(app.screen, BenchScreen), f"{where}: esc did not go back"
            screen = await open_bench(pilot)
            await wait_until(pilot, lambda s=screen: table_rows(s), "the saved result")


async def test_the_device_field_still_takes_cpu_and_cuda_and_x_still_cancels() -> None:
    app, _ = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await open_bench(pilot)
        notes = spy_notifications(app)
        await type_into(pilot, screen, "f-device", "cpu")
        await pilot.pause()
        assert screen.query_one("#f-device", Input).value == "cpu"
        await type_into(pilot, screen, "f-device", "cuda:1")
        await pilot.pause()
        assert screen.query_one("#f-device", Input).value == "cuda:1"
        # Neither c after a whole device name nor x is typed: they are the screen's keys.
        await pilot.press("c", "x")
        await pilot.pause()
        assert screen.query_one("#f-device", Input).value == "cuda:1"
        assert [m for _, m in notes] == ["Mark two results with space, then press c",
                                         "No benchmark is running"]


async def test_x_cancels_a_run_while_a_form_field_has_focus() -> None:
    app, _ = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        session = use_fake_worker(app, "term_partial")
        screen = await open_bench(pilot)
        screen.query_one("#f-device", Input).value = "cpu"
        await pilot.press("ctrl+r")
        await wait_until(pilot, lambda: session.current is not None
                         and len(session.current.points) >= 2, "progress")
        batch = screen.query_one("#f-batch", Input)
        batch.focus()
        await pilot.press("x")
        await wait_until(pilot, lambda: session.last is not None, "the cancelled result")
        assert session.last is not None and session.last.result is not None
        assert session.last.result.status == "cancelled"
        assert batch.value == ""


# --------------------------------------------------------------------------- focus, checkboxes


def _luminance(c: Color) -> float:
    def ch(v: int) -> float:
        x = v / 255
        return x / 12.92 if x <= 0.03928 else ((x + 0.055) / 1.055) ** 2.4
    return 0.2126 * ch(c.r) + 0.7152 * ch(c.g) + 0.0722 * ch(c.b)


def _contrast(a: Color, b: Color) -> float:
    la, lb = sorted((_luminance(a), _luminance(b)), reverse=True)
    return (la + 0.05) / (lb + 0.05)


def _look(widget: Widget) -> tuple[Color, tuple[str, ...], bool]:
    """What tells focus apart: the background, the border's shape and colour, and for
    buttons reversed text; for a Select its visible part, for a checkbox its label."""
    target: Widget = widget.query_one("SelectCurrent") if isinstance(widget, Select) else widget
    bg = target.background_colors[1]
    if isinstance(widget, Checkbox):
        label_bg = widget.get_visual_style("toggle--label").background
        bg = label_bg if label_bg is not None else bg
    styles = widget.styles
    edges = (styles.border_top, styles.border_right, styles.border_bottom, styles.border_left)
    kinds = tuple(kind if kind not in ("", "none", "blank") else "-" for kind, _ in edges)
    reverse = isinstance(widget, Button) and "reverse" in str(styles.text_style)
    return bg, kinds, reverse


def _plainly_different(off: tuple[Color, tuple[str, ...], bool],
                       on: tuple[Color, tuple[str, ...], bool]) -> bool:
    """A background at least 1.5:1 from the unfocused one, a border line drawn or
    changed in shape (round → heavy), or reversed text: each is seen without hunting."""
    return _contrast(off[0], on[0]) >= 1.5 or on[1] != off[1] or on[2] != off[2]


@pytest.mark.parametrize("theme", THEMES)
async def test_focus_is_plainly_visible_in_every_theme(theme: str) -> None:
    app, _ = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        app.theme = theme
        screen = await open_bench(pilot)
        chain = _focusables(screen)
        parking = chain[-1]

        async def looks_while_focused(focused: Widget) -> list[tuple[Color, tuple[str, ...],
                                                                      bool]]:
            focused.focus()
            await pilot.pause()
            return [_look(w) for w in chain]

        # Every widget's look without focus (the parking widget's with the first focused).
        off = await looks_while_focused(parking)
        off[-1] = (await looks_while_focused(chain[0]))[-1]
        for widget, widget_off in zip(chain, off, strict=True):
            widget.focus()
            await pilot.pause()
            on = _look(widget)
            assert _plainly_different(widget_off, on), (theme, type(widget).__name__,
                                                        widget.id, widget_off, on)


async def test_checkboxes_read_on_or_off_without_colour() -> None:
    app, _ = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await open_bench(pilot)
        box = screen.query_one("#f-compile", OnOffBox)
        assert not box.disabled and not box.value
        off = box.render().plain
        box.value = True
        await pilot.pause()
        on = box.render().plain
        assert "✓" in on and "✓" not in off and on.replace("✓", " ") == off
        assert "torch.compile" in on


# --------------------------------------------------------------------------- one number, time


def _live(of: int | None, duration_s: float | None, step: int, elapsed_s: float,
          started: datetime) -> LiveRun:
    live = LiveRun(Planned("r1", make_request("cnn-infer", device="cpu")), started_wall=started,
                   stage="running")
    live.progress = events.Progress(step=step, of=of, elapsed_s=elapsed_s,
                                    duration_s=duration_s, throughput=10.0,
                                    unit="images/s", window_s=0.5, samples=5)
    return live


def test_elapsed_and_eta_come_from_the_timed_loop() -> None:
    t0 = datetime(2026, 1, 1, tzinfo=UTC)
    # 10 of 40 steps in 5 s: 30 more at that pace is 15 s.
    assert remaining_s(10, 40, 5.0, None) == 15.0
    assert time_line(_live(40, None, 10, 5.0, t0), t0 + timedelta(seconds=8)) \
        == "elapsed 8s · ETA 15s"
    # A duration run: what is left of it.
    assert time_line(_live(None, 60.0, 100, 20.0, t0), t0 + timedelta(seconds=95)) \
        == "elapsed 1m35s · ETA 40s"
    # Nothing timed yet: no guess.
    assert remaining_s(0, 40, 0.0, None) is None and fmt_eta(None) == "ETA —"
    warm = _live(40, None, 0, 0.0, t0)
    warm.progress = None
    warm.stage = "warmup"
    assert time_line(warm, t0 + timedelta(seconds=3)) == "elapsed 3s · ETA after the warm-up"


@pytest.mark.parametrize("size", SIZES)
async def test_a_run_shows_elapsed_eta_and_one_labelled_headline(size: tuple[int, int]) -> None:
    app, _ = make_app()
    async with app.run_test(size=size) as pilot:
        session = use_fake_worker(app, "term_partial")
        screen = await open_bench(pilot)
        screen.query_one("#f-device", Input).value = "cpu"
        await pilot.press("ctrl+r")
        await wait_until(pilot, lambda: session.current is not None
                         and len(session.current.points) >= 2, "progress")
        await pilot.pause()
        text = screen_text(app)
        assert "elapsed " in text and "ETA" in text, text
        assert HEADLINE_LABEL in text
        shown = [d for d in screen.query(Digits) if d.display and d.region.area]
        assert len(shown) == 1, "one big number, not two"
        await pilot.press("x")
        await wait_until(pilot, lambda: session.last is not None, "the result")
        await pilot.pause()
        assert "took " in screen_text(app)


async def test_the_big_number_is_the_number_in_the_title_and_the_results_row() -> None:
    app, _ = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        session = use_fake_worker(app, "ok")
        screen = await open_bench(pilot)
        screen.query_one("#f-device", Input).value = "cpu"
        await pilot.press("ctrl+r")
        await wait_until(pilot, lambda: session.last is not None, "the result")
        await wait_until(pilot, lambda: table_rows(screen), "the result row")
        digits = screen.query_one("#tp-headline", Digits).value
        text = screen_text(app)
        assert f"ok, {digits} images/s" in text  # the title
        assert table_rows(screen)[0][3] == f"{digits} images/s"
