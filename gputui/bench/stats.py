"""The benchmark statistics, computed in one place: percentiles, spreads, windowed rates and
the headline throughput. Torch-free: the worker, the runner, the CLI and the TUI all use it,
so a number is computed once and shown the same everywhere.

The headline throughput (`Throughput.value`) is samples ÷ seconds of the timed loop. Beside
it go the median and p10/p90 of the rates of the loop's windows (~0.5 s each, the unit the
loop synchronises on): they say how steady the rate was, not what it was.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

# Percentiles resting on fewer values than this are shown marked ("from N values").
FEW_VALUES = 100

HEADLINE_DEFINITION = "samples / seconds of the timed loop"
SPREAD_DEFINITION = "median, p10 and p90 of the timed loop's window rates (~0.5 s windows)"


def percentile(values: Sequence[float], q: float) -> float | None:
    """Linear-interpolated percentile (q in 0..100), None for no data."""
    if not values:
        return None
    s = sorted(values)
    if len(s) == 1:
        return float(s[0])
    pos = (len(s) - 1) * q / 100.0
    lo = math.floor(pos)
    hi = min(lo + 1, len(s) - 1)
    return float(s[lo] + (s[hi] - s[lo]) * (pos - lo))


def mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


def rate(amount: float | None, seconds: float | None) -> float | None:
    """amount ÷ seconds, None when either is missing or the interval is empty."""
    if amount is None or seconds is None or seconds <= 0 or not math.isfinite(seconds):
        return None
    value = amount / seconds
    return value if math.isfinite(value) else None


def too_few(n: int | None) -> bool:
    """True when percentiles rest on too few values to be taken at face value."""
    return n is not None and n < FEW_VALUES


def _num(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


@dataclass(frozen=True)
class Spread:
    """Percentiles of a set of times (ms): step times, request latencies."""

    p50: float | None
    p90: float | None
    p99: float | None
    mean: float | None
    n: int | None  # how many values; None in results saved before it was recorded

    @property
    def few(self) -> bool:
        return too_few(self.n)

    def to_dict(self, with_median: bool = False) -> dict[str, Any]:
        out: dict[str, Any] = {"p50": self.p50, "p90": self.p90, "p99": self.p99}
        if with_median:
            out["median"] = self.p50
        out["mean"] = self.mean
        out["n"] = self.n
        return out

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Spread:
        p50 = _num(d.get("p50"))
        return cls(p50=p50 if p50 is not None else _num(d.get("median")),
                   p90=_num(d.get("p90")), p99=_num(d.get("p99")), mean=_num(d.get("mean")),
                   n=_int(d.get("n")))


def spread(values_ms: Sequence[float]) -> Spread | None:
    if not values_ms:
        return None
    return Spread(p50=percentile(values_ms, 50), p90=percentile(values_ms, 90),
                  p99=percentile(values_ms, 99), mean=mean(values_ms), n=len(values_ms))


@dataclass(frozen=True)
class Throughput:
    """The headline number and its spread. `mean` is the schema-1 name of `value`."""

    value: float | None
    median: float | None
    p10: float | None
    p90: float | None
    unit: str
    windows: int | None = None  # how many window rates the percentiles rest on
    definition: str = HEADLINE_DEFINITION
    # --repeat N: the headline of each timed trial (None for one trial). The result
    # document carries them top-level as `trials` and `spread`.
    trials: tuple[float, ...] | None = None

    @property
    def spread(self) -> TrialSpread | None:
        return trial_spread(self.trials)

    @property
    def mean(self) -> float | None:
        return self.value

    @property
    def few(self) -> bool:
        return too_few(self.windows)

    def to_dict(self) -> dict[str, Any]:
        return {"value": self.value, "definition": self.definition, "median": self.median,
                "mean": self.value, "p10": self.p10, "p90": self.p90, "unit": self.unit,
                "windows": self.windows, "spread": SPREAD_DEFINITION}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Throughput:
        value = _num(d.get("value"))
        definition = d.get("definition")
        if value is None and "value" not in d:
            # Schema 1: "mean" was samples ÷ timed-loop seconds, "median" the median of
            # per-step rates; the headline is the first where it was recorded.
            value = _num(d.get("mean"))
            definition = HEADLINE_DEFINITION if value is not None else None
            if value is None:
                value = _num(d.get("median"))
                definition = "median of per-step rates (saved before schema 2)"
        unit = d.get("unit")
        return cls(value=value, median=_num(d.get("median")), p10=_num(d.get("p10")),
                   p90=_num(d.get("p90")), unit=unit if isinstance(unit, str) else "",
                   windows=_int(d.get("windows")),
                   definition=definition if isinstance(definition, str)
                   else HEADLINE_DEFINITION)


def headline(samples: float | None, seconds: float | None, window_rates: Sequence[float],
             unit: str) -> Throughput:
    """samples ÷ timed seconds, with the spread of the windows' own rates."""
    rates = [r for r in window_rates if r > 0 and math.isfinite(r)]
    return Throughput(value=rate(samples, seconds) if samples else None,
                      median=percentile(rates, 50), p10=percentile(rates, 10),
                      p90=percentile(rates, 90), unit=unit, windows=len(rates))


def percentile_note(n: int | None) -> str:
    """"" when there are enough values, else a short caution for displays."""
    return f"from {n} values" if too_few(n) else ""


@dataclass(frozen=True)
class TrialSpread:
    """Median, min and max of the headlines of repeated trials (`--repeat N`)."""

    median: float
    min: float
    max: float

    @property
    def half_range(self) -> float:
        return (self.max - self.min) / 2.0

    def to_dict(self) -> dict[str, float]:
        return {"median": self.median, "min": self.min, "max": self.max}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> TrialSpread | None:
        vals = (_num(d.get("median")), _num(d.get("min")), _num(d.get("max")))
        if None in vals:
            return None
        med, lo, hi = vals
        return cls(median=med, min=lo, max=hi)  # type: ignore[arg-type]


def trial_spread(trials: Sequence[float] | None) -> TrialSpread | None:
    """The spread of two or more trials' headlines; None for a single trial."""
    if not trials or len(trials) < 2:
        return None
    return TrialSpread(median=percentile(trials, 50) or 0.0, min=float(min(trials)),
                       max=float(max(trials)))


def noise(a: TrialSpread | None, b: TrialSpread | None) -> float | None:
    """The combined spread of two runs: half the min-max range of each, added. Two
    headlines closer than this are within the noise the trials showed; None when neither
    run was repeated (the noise is unknown)."""
    if a is None and b is None:
        return None
    return (a.half_range if a else 0.0) + (b.half_range if b else 0.0)
