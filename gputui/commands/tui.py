"""`gputui` with no subcommand: the live monitor (Textual, imported only here)."""

from __future__ import annotations

import argparse


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from gputui.commands.argtypes import interval_seconds

    parser.add_argument("--interval", type=interval_seconds, default=1.0, metavar="SECONDS",
                        help="seconds between readings (default 1, minimum 0.1)")
    parser.add_argument("--theme", metavar="NAME", help="colour theme (or set GPUTUI_THEME)")
    parser.add_argument("--record", metavar="FILE",
                        help="append every snapshot to FILE as JSON lines")


def run(args: argparse.Namespace) -> int:
    from gputui.ui.options import AppOptions
    from gputui.ui.themes import require_theme

    require_theme(args.theme)  # a typo is one line and exit 2, not a silent default
    options = AppOptions(interval=args.interval, theme=args.theme, record_path=args.record)
    # NVML opens on its own thread while Textual is imported and starts (a recording
    # keeps more fields than the screen shows).
    from gputui.ui.sampler_opener import SamplerOpener

    opener = SamplerOpener(interval=args.interval,
                           profile="record" if args.record else "monitor").start()
    # Imported here, not at the top: `gputui --help` and the subcommands never load textual.
    from gputui.ui.app import run_app

    # A bad --record path raises UsageError in run_app before the terminal is taken over.
    return run_app(options, opener=opener)
