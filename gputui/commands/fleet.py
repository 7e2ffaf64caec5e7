"""`gputui fleet`: placeholder until its issue lands."""

from __future__ import annotations

import argparse

from gputui.errors import GputuiError


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("fleet", help="(not yet available)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    raise GputuiError("'fleet' is not available yet")
