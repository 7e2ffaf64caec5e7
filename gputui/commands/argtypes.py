"""argparse value types shared by the subcommands. Nothing here imports `gputui.cli` (no
cycle) or anything heavy: the bounds come from `gputui.telemetry.limits`, standard library
only."""

from __future__ import annotations

import argparse

from gputui.telemetry.limits import interval_problem


def positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not value > 0 or value != value or value == float("inf"):
        raise argparse.ArgumentTypeError(f"must be a positive number: {text!r}")
    return value


def interval_seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    why = interval_problem(value)
    if why:
        raise argparse.ArgumentTypeError(f"interval {why}: {text!r}")
    return value


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be a positive whole number: {text!r}")
    return value
