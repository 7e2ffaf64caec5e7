"""SVG snapshots of the monitor, with the sampler fed by hand (no timers, no NVML).

The header's clock comes from the snapshot, the time zone is pinned (conftest),
and toasts are cleared before the shot, so the pictures are stable. Each shot is
kept as SVG (what reviewers open) and as plain text (what a failing test diffs).

    GPUTUI_UPDATE_SNAPSHOTS=1 pytest tests/ui/test_snapshots.py   # accept new pictures
"""

from __future__ import annotations

import difflib
import os
from pathlib import Path

import pytest

from gputui.telemetry.sampler import Sampler
from gputui.ui.app import GputuiApp
from gputui.ui.options import AppOptions
from tests.ui.helpers import feed, gpu, lost, proc, screen_text, snap, throttled

SNAPSHOTS = Path(__file__).parent / "snapshots"
UPDATE = os.environ.get("GPUTUI_UPDATE_SNAPSHOTS") == "1"
PROCS = [proc(31337, 0, 61.5, user="alice", command="python train.py --model resnet50"),
         proc(4711, 1, 18.25, user="bob", cpu_pct=12.0, command="python serve.py --port 8080")]


def check_snapshot(app: GputuiApp, name: str, tmp_path: Path) -> None:
    svg = app.export_screenshot(title=f"gputui — {name}")
    text = screen_text(app)
    svg_path, text_path = SNAPSHOTS / f"{name}.svg", SNAPSHOTS / f"{name}.txt"
    if UPDATE:
        SNAPSHOTS.mkdir(exist_ok=True)
        svg_path.write_text(svg, encoding="utf-8")
        text_path.write_text(text, encoding="utf-8")
        return
    hint = (f"to accept the new picture: GPUTUI_UPDATE_SNAPSHOTS=1 pytest {__file__}; "
            f"the new one is at {tmp_path / svg_path.name}")
    if not svg_path.exists():
        pytest.fail(f"no snapshot {svg_path.name} yet; {hint}", pytrace=False)
    (tmp_path / svg_path.name).write_text(svg, encoding="utf-8")
    expected_text = text_path.read_text(encoding="utf-8") if text_path.exists() else ""
    if text != expected_text:
        diff = "\n".join(difflib.unified_diff(expected_text.splitlines(), text.splitlines(),
                                              "expected", "actual", lineterm=""))
        pytest.fail(f"screen text of {name} changed; {hint}\n{diff}", pytrace=False)
    if svg != svg_path.read_text(encoding="utf-8"):
        pytest.fail(f"{svg_path.name} changed (colours or styles; the text is the same); {hint}",
                    pytrace=False)


async def shoot(size: tuple[int, int], make: object, until: int, name: str,
                tmp_path: Path, theme: str | None = None) -> None:
    sampler = Sampler(interval=1.0, nvml=None)
    app = GputuiApp(AppOptions(theme=theme), sampler=sampler)
    async with app.run_test(size=size) as pilot:
        feed(sampler, 0, until, make)
        await pilot.pause()
        app.clear_notifications()
        await pilot.pause()
        check_snapshot(app, name, tmp_path)


async def test_snapshot_two_gpus(tmp_path: Path) -> None:
    await shoot((120, 40), lambda t: snap(t, [gpu(0, t), gpu(1, t)], PROCS), 90,
                "two_gpus_120x40", tmp_path)


async def test_snapshot_throttling_and_lost(tmp_path: Path) -> None:
    def make(t: int):
        g0 = throttled(0, t) if t >= 60 else gpu(0, t)
        g1 = lost(1) if t >= 80 else gpu(1, t)
        return snap(t, [g0, g1], PROCS[:1])

    await shoot((120, 40), make, 90, "throttle_lost_120x40", tmp_path)


async def test_snapshot_compact_80x24(tmp_path: Path) -> None:
    def make(t: int):
        return snap(t, [throttled(0, t) if t >= 70 else gpu(0, t), gpu(1, t)], PROCS)

    await shoot((80, 24), make, 90, "compact_80x24", tmp_path)


def four_gpus(t: int):
    """The main screen's hard case: GPU 0 thermal-throttling from 60 s, GPU 1 lost at
    80 s, GPU 2 busy with few SMs active (GPM verdict), GPU 3 without GPM counters."""
    return snap(t, [throttled(0, t) if t >= 60 else gpu(0, t),
                    lost(1) if t >= 80 else gpu(1, t),
                    gpu(2, t, util_gpu_pct=97, sm_active_pct=20.0 + t % 7,
                        tensor_active_pct=0.0),
                    gpu(3, t)], PROCS)


@pytest.mark.parametrize("theme", ("gputui-dark", "gputui-light", "gputui-high-contrast"))
@pytest.mark.parametrize("size", ((80, 24), (120, 40)))
async def test_snapshot_main_screen_in_each_theme(size: tuple[int, int], theme: str,
                                                  tmp_path: Path) -> None:
    name = f"main_{theme.removeprefix('gputui-')}_{size[0]}x{size[1]}"
    await shoot(size, four_gpus, 120, name, tmp_path, theme=theme)
