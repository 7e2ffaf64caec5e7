"""`gputui` with no subcommand: the live monitor (Textual, imported only here)."""

from __future__ import annotations

import argparse

from gputui.errors import GputuiError


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from gputui.cli import interval_seconds

    parser.add_argument("--interval", type=interval_seconds, default=1.0, metavar="SECONDS",
                        help="seconds between readings (default 1, minimum 0.1)")
    parser.add_argument("--theme", metavar="NAME", help="colour theme (or set GPUTUI_THEME)")
    parser.add_argument("--record", metavar="FILE",
                        help="append every snapshot to FILE as JSON lines")


def run(args: argparse.Namespace) -> int:
    raise GputuiError("the live monitor is not available yet; try 'gputui snapshot'")
