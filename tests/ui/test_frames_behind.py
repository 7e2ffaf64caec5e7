"""A UI that falls behind the sampler (a starved box, a short --interval): the frames
that waited are all taken in (history, toasts) and drawn once, and however long it stays
behind, what waits is bounded."""

from __future__ import annotations

import threading
from dataclasses import replace

import pytest
from textual.message import Message

from gputui.telemetry.frame import Frame
from gputui.telemetry.sampler_opener import SamplerOpener
from gputui.ui.app import MAX_WAITING_FRAMES, GputuiApp
from gputui.ui.messages import FrameReady
from gputui.ui.options import AppOptions
from tests.ui.helpers import gpu, make_app, screen_text, snap


def _later(frame: Frame, n: int) -> list[Frame]:
    """`n` frames after `frame`, a second apart, GPU 0's utilisation moving."""
    s = frame.snapshot
    out = []
    for i in range(1, n + 1):
        gpus = (replace(s.gpus[0], util_gpu_pct=float(i % 100)), *s.gpus[1:])
        out.append(replace(frame, snapshot=replace(s, seq=s.seq + i, mono=s.mono + i,
                                                   gpus=gpus)))
    return out


def _post_from_a_thread(app: GputuiApp, frames: list[Frame]) -> None:
    """As the sampler's thread posts them, while the event loop is busy (joined here)."""
    t = threading.Thread(target=lambda: [app.frame_posted(f) for f in frames])
    t.start()
    t.join(30)


async def test_frames_that_waited_are_all_taken_in_and_drawn_once(fake_nvml: object) -> None:
    fake_nvml.use({"device_count": 2}, frozen_time=10.0)  # type: ignore[attr-defined]
    # Its own next tick is a minute away: only the frames posted here arrive.
    opener = SamplerOpener(interval=60.0, profile="monitor").start()
    app = GputuiApp(AppOptions(interval=60.0), opener=opener)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause(0.3)
        first = app.latest_frame
        assert first is not None
        before = app.history.appends
        draws = []
        show = app.main.show

        async def counted(*args: object) -> None:
            draws.append(args[0])
            await show(*args)  # type: ignore[arg-type]

        app.main.show = counted  # type: ignore[method-assign]
        frames = _later(first, 5)
        _post_from_a_thread(app, frames)
        await pilot.pause()
        assert app.history.appends == before + 5  # every frame is in the history
        assert draws == [frames[-1]]  # and the screen drawn once, with the latest
        assert "GPU 0" in screen_text(app)

        # Behind for longer than the queue holds: the oldest are dropped, the rest taken.
        many = _later(frames[-1], MAX_WAITING_FRAMES + 100)
        _post_from_a_thread(app, many)
        await pilot.pause()
        assert app.history.appends == before + 5 + MAX_WAITING_FRAMES
        assert app.latest_frame is many[-1] and draws[-1] is many[-1]
        assert len(draws) == 2


def test_a_frame_ready_refused_lets_the_next_frame_post_again(
        monkeypatch: pytest.MonkeyPatch) -> None:
    app, _ = make_app()
    posted: list[Message] = []
    accepted = [False, True]  # refused (Textual does while the app closes), then taken

    def post_message(message: Message) -> bool:
        posted.append(message)
        return accepted[len(posted) - 1]

    monkeypatch.setattr(app, "post_message", post_message)
    frames = [Frame(snap(t, [gpu(0, t)])) for t in range(3)]
    app.frame_posted(frames[0])
    app.frame_posted(frames[1])  # nothing waits to be handled: this one posts
    assert [type(m) for m in posted] == [FrameReady, FrameReady]
    app.frame_posted(frames[2])  # one FrameReady waits now: no second one
    assert len(posted) == 2
