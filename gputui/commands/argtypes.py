"""argparse value types shared by the subcommands (no gputui imports: no cycles)."""

from __future__ import annotations

import argparse

MIN_INTERVAL_S = 0.1  # gputui.telemetry.sampler.MIN_INTERVAL_S; a test keeps them equal
# An hour: longer would make a hung GPU's read deadline (most of an interval) and the
# exporter's freshness window meaningless, and time.sleep overflows near 1e300.
MAX_INTERVAL_S = 3600.0


def positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not value > 0 or value != value or value == float("inf"):
        raise argparse.ArgumentTypeError(f"must be a positive number: {text!r}")
    return value


def interval_problem(value: float) -> str | None:
    """Why `value` cannot be the seconds between readings, or None. The one bound the
    --interval flags and config.toml's `interval` share."""
    if not MIN_INTERVAL_S <= value <= MAX_INTERVAL_S:  # NaN fails both comparisons
        return f"must be between {MIN_INTERVAL_S:g} and {MAX_INTERVAL_S:g} seconds"
    return None


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
