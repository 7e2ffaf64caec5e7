"""argparse value types shared by the subcommands (no gputui imports: no cycles)."""

from __future__ import annotations

import argparse

MIN_INTERVAL_S = 0.1  # gputui.telemetry.sampler.MIN_INTERVAL_S; a test keeps them equal


def positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not value > 0 or value != value or value == float("inf"):
        raise argparse.ArgumentTypeError(f"must be a positive number: {text!r}")
    return value


def interval_seconds(text: str) -> float:
    value = positive_float(text)
    if value < MIN_INTERVAL_S:
        raise argparse.ArgumentTypeError(
            f"interval must be at least {MIN_INTERVAL_S:g} s: {text!r}")
    return value


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be a positive whole number: {text!r}")
    return value
