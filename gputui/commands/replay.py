"""`gputui replay FILE`: play a recording (`gputui --record FILE`) in the monitor."""

from __future__ import annotations

import argparse
import sys

# The player's own bounds, from the standard-library-only module it takes them from
# (gputui.telemetry.replay pulls in the sampler: `gputui --help` must stay cheap).
from gputui.telemetry.limits import MAX_SPEED, MIN_SPEED, speed_problem


def _speed(text: str) -> float:
    from gputui.commands.argtypes import positive_float

    value = positive_float(text)
    why = speed_problem(value)
    if why:
        raise argparse.ArgumentTypeError(f"speed {why}: {text!r}")
    return value


def add_parser(sub: argparse._SubParsersAction, summary: str) -> None:
    p = sub.add_parser(
        "replay", help=summary,
        description="Open the monitor on a recording instead of the live GPUs: history, "
        "throttle episodes and alerts as they happened. Space pauses; the arrow keys step "
        "and seek.")
    p.add_argument("file", metavar="FILE", help="a recording (JSON lines)")
    p.add_argument("--speed", type=_speed, default=1.0, metavar="X",
                   help=f"playback speed, {MIN_SPEED:g} to {MAX_SPEED:g} (default 1)")
    p.add_argument("--theme", metavar="NAME", help="colour theme (or set GPUTUI_THEME)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from gputui.telemetry.record import require_recording
    from gputui.ui.options import AppOptions

    # Load before importing Textual: a bad file is reported at once, as one line.
    rec = require_recording(args.file)
    for warning in rec.warnings:
        print(f"gputui: warning: {warning}", file=sys.stderr)
    from gputui.ui.app import run_app
    from gputui.ui.themes import require_theme

    require_theme(args.theme)
    return run_app(AppOptions(replay=rec, replay_speed=args.speed, theme=args.theme))
