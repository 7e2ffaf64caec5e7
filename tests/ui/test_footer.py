"""The footer shows whole keys only (never "t Them▏"), on the monitor, the
benchmark screen and the alerts screen, at 80×24, 120×40 and 200×60."""

from __future__ import annotations

import pytest

from gputui.ui.widgets.footer import KeyFooter
from tests.ui.helpers import gpu, proc, screen_text, snap
from tests.ui.test_app import make_app

SIZES = ((80, 24), (120, 40), (200, 60))


def _check_footer(app: object) -> list[str]:
    footer = app.screen.query_one(KeyFooter)  # type: ignore[attr-defined]
    line = screen_text(app).splitlines()[-1]  # type: ignore[arg-type]
    left = line.split("▏")[0]
    shown = set(footer.shown_keys)
    keys = [k for k in footer.keys()[0] if k.key in shown]
    labels = [f"{k.display} {k.description}".strip() for k in keys]
    assert keys, "the footer shows some keys"
    # Exactly the keys it keeps, each whole, and nothing cut after them.
    assert " ".join(left.split()) == " ".join(" ".join(labels).split()), (line, labels)
    assert "^p palette" in line
    return [k.key for k in keys]


@pytest.mark.parametrize("size", SIZES)
async def test_footer_keys_are_whole_on_every_screen(size: tuple[int, int]) -> None:
    app, sampler = make_app()
    async with app.run_test(size=size) as pilot:
        sampler.ingest(snap(0, [gpu(0)], [proc(1, 0, 3)]))
        await pilot.pause()
        await pilot.pause()
        monitor = _check_footer(app)
        assert monitor[:2] == ["q", "question_mark"]
        await pilot.press("b")
        await pilot.pause()
        await pilot.pause()
        bench = _check_footer(app)
        assert bench[:5] == ["escape", "ctrl+r", "ctrl+n", "x", "c"]  # the screen's own first
        await pilot.press("escape", "a")
        await pilot.pause()
        await pilot.pause()
        assert _check_footer(app)[0] == "escape"
        if size[0] >= 200:
            assert "t" in monitor and "k" in monitor  # room for everything on a wide screen


async def test_a_key_in_the_footer_can_be_clicked() -> None:
    from gputui.ui.screens.help import HelpScreen

    app, sampler = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        sampler.ingest(snap(0, [gpu(0)], [proc(1, 0, 3)]))
        await pilot.pause()
        line = screen_text(app).splitlines()[-1]
        await pilot.click(KeyFooter, offset=(line.index("? Help") + 3, 0))  # on "Help"
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)
