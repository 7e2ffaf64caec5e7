"""The bounds a user's numbers are held to, defined once for every layer that checks them:
the seconds between readings (the --interval flags, config.toml's `interval`, `Sampler`)
and a replay's speed (`gputui replay --speed`, `ReplayPlayer`). Standard library only:
`gputui --help` builds its parsers from these without loading the sampler."""

from __future__ import annotations

MIN_INTERVAL_S = 0.1
# An hour: longer would make a hung GPU's read deadline (most of an interval) and the
# exporter's freshness window meaningless, and time.sleep overflows near 1e300.
MAX_INTERVAL_S = 3600.0

MIN_SPEED = 0.125
MAX_SPEED = 64.0


def interval_problem(value: float) -> str | None:
    """Why `value` cannot be the seconds between readings, or None. The one bound the
    --interval flags and config.toml's `interval` share."""
    if not MIN_INTERVAL_S <= value <= MAX_INTERVAL_S:  # NaN fails both comparisons
        return f"must be between {MIN_INTERVAL_S:g} and {MAX_INTERVAL_S:g} seconds"
    return None


def speed_problem(value: float) -> str | None:
    """Why `value` cannot be a replay's speed, or None."""
    if not MIN_SPEED <= value <= MAX_SPEED:  # NaN fails both comparisons
        return f"must be between {MIN_SPEED:g} and {MAX_SPEED:g}"
    return None
