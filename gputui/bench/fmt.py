"""How benchmark numbers and result fields read, in the CLI and the TUI alike.

Torch-free and Rich-free: plain strings. Bytes use telemetry's one formatter ("80.0GiB");
strings from a result file go through `gputui.safe_text` before anyone shows them.
Numbers only: how a whole Result reads (headline, throttled mark) is `bench.result_text`,
so that events, results and this module import one another in one direction only.
"""

from __future__ import annotations

import json
import math
from datetime import datetime
from typing import Any

from gputui.bench.stats import Spread, Throughput, percentile_note
from gputui.safe_text import printable
from gputui.telemetry.units import fmt_bytes as _units_fmt_bytes
from gputui.telemetry.units import fmt_duration as _units_fmt_duration

NA = "N/A"
# A field the run has no value for at all (a benchmark without a batch or a model, a run
# without FLOPs): a dash in every table; JSON keeps null.
DASH = "—"


def _num(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


def fmt_num(value: Any, digits: int = 3) -> str:
    """A measured number for people: 3 significant digits, thousands separators above 100."""
    v = _num(value)
    if v is None:
        return NA
    if v != 0 and (abs(v) >= 10 ** (digits + 3) or abs(v) < 10 ** -(digits)):
        return f"{v:.{digits}g}"
    if abs(v) >= 100:
        return f"{v:,.1f}"
    return f"{v:.{digits}g}" if abs(v) < 1 else f"{v:.2f}"


def fmt_big(value: float | None) -> str:
    """For the TUI's big digits: the same text as fmt_num (so the digits, the title, the
    CLI and history read alike), except that Digits cannot draw an exponent."""
    if value is None:
        return "-"
    text = fmt_num(value)
    return f"{value:,.0f}" if "e" in text else text


def remaining_s(step: int, of: int | None, elapsed_s: float,
                duration_s: float | None) -> float | None:
    """Seconds left in the timed loop: the planned duration's rest, or the remaining steps
    at the pace so far; None while it cannot be known (no step done, no plan)."""
    if duration_s:
        return max(0.0, duration_s - elapsed_s)
    if of and step > 0 and elapsed_s > 0:
        return max(0.0, (of - step) * elapsed_s / step)
    return None


def fmt_eta(seconds: float | None) -> str:
    """"ETA 1m05s" — how the CLI's progress line and the TUI's run pane say it."""
    return "ETA —" if seconds is None else f"ETA {_units_fmt_duration(seconds)}"


def fmt_bytes(value: Any) -> str:
    v = _num(value)
    return NA if v is None else _units_fmt_bytes(v)


def fmt_ms(value: Any) -> str:
    v = _num(value)
    return NA if v is None else f"{fmt_num(v)} ms"


def fmt_phase_ms(v: float) -> str:
    """Phase times for people: "<0.1 ms" rather than "0.00511"."""
    if v < 0.1:
        return "<0.1 ms"
    return f"{v:.1f} ms" if v < 100 else f"{v:,.0f} ms"


def fmt_ratio(ratio: float | None) -> str:
    return NA if ratio is None else f"{ratio:.3f}×"


def fmt_throughput(tp: Throughput | None) -> str:
    """The headline, with its unit: the one number every view shows."""
    if tp is None or tp.value is None:
        return NA
    return f"{fmt_num(tp.value)} {printable(tp.unit)}".strip()


def fmt_spread(tp: Throughput | None) -> str:
    """"median 43.3  p10 40.1  p90 45.0 (from 12 windows)" — the headline's spread."""
    if tp is None or (tp.median is None and tp.p10 is None and tp.p90 is None):
        return ""
    text = f"windows: median {fmt_num(tp.median)}  p10 {fmt_num(tp.p10)}  p90 {fmt_num(tp.p90)}"
    note = percentile_note(tp.windows)
    return f"{text} ({note})" if note else text


def fmt_trials(tp: Throughput | None) -> str:
    """"3 trials: 41.2, 43.3, 44.0 — median 43.3, min 41.2, max 44.0 samples/s" (--repeat);
    "" for a single trial."""
    sp = tp.spread if tp is not None else None
    if tp is None or sp is None or not tp.trials:
        return ""
    unit = printable(tp.unit)
    each = ", ".join(fmt_num(v) for v in tp.trials)
    return (f"{len(tp.trials)} trials: {each} — median {fmt_num(sp.median)}, "
            f"min {fmt_num(sp.min)}, max {fmt_num(sp.max)} {unit}").strip()


def fmt_percentiles(s: Spread | None, keys: tuple[str, ...] = ("p50", "p90", "p99")) -> str:
    """"p50 12.1  p90 13.0  p99 15.2 ms (from 20 values)"."""
    if s is None:
        return NA
    text = "  ".join(f"{k} {fmt_num(getattr(s, k))}" for k in keys) + " ms"
    note = percentile_note(s.n)
    return f"{text} ({note})" if note else text


def when(iso: Any, *, short: bool = False) -> str:
    """An ISO-8601 UTC time from a result, in local time."""
    if not isinstance(iso, str) or not iso:
        return NA
    try:
        t = datetime.fromisoformat(iso.replace("Z", "+00:00"))
    except ValueError:
        return printable(iso)
    return f"{t.astimezone():%m-%d %H:%M:%S}" if short else f"{t.astimezone():%Y-%m-%d %H:%M:%S}"


def plain(value: Any) -> str:
    """A setting's value as text (JSON for objects), control characters escaped."""
    if value is None:
        return DASH
    if isinstance(value, dict | list | tuple):
        return printable(json.dumps(value, default=str, ensure_ascii=False))
    return printable(value)
