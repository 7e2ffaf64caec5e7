"""How a whole Result reads: its headline, flagged when the run throttled.

The same words in the CLI (history, view, compare) and the TUI (results list, live pane,
compare screen). Numbers themselves are formatted by `bench.fmt`.
"""

from __future__ import annotations

from gputui.bench.fmt import fmt_throughput
from gputui.bench.result import Result
from gputui.bench.throttle_window import THROTTLED_MARK


def throttled_mark(r: Result) -> str:
    """"⚠ throttled 12 %" for a run throttled > 5 % of its timed window, else ""."""
    if not r.throttled or r.window is None or r.window.throttled_fraction is None:
        return ""
    return f"{THROTTLED_MARK} {r.window.throttled_fraction * 100:.0f} %"


def fmt_headline(r: Result) -> str:
    """The headline with its unit, flagged when the run throttled (history, export...)."""
    mark = throttled_mark(r)
    return f"{fmt_throughput(r.throughput)} {mark}" if mark else fmt_throughput(r.throughput)
