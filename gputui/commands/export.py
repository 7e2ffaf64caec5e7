"""`gputui export`: placeholder until its issue lands."""

from __future__ import annotations

import argparse

from gputui.errors import GputuiError


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("export", help="(not yet available)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    raise GputuiError("'export' is not available yet")
