"""Two results side by side: the metrics with ratios B/A, and every setting that differs."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gputui.bench.deepbench.figures import figure, keyed
from gputui.bench.kind_extras import DeepbenchExtra
from gputui.bench.result import Result
from gputui.bench.stats import Spread, noise


@dataclass(frozen=True)
class MetricRow:
    name: str
    unit: str
    a: float | None
    b: float | None
    higher_is_better: bool | None  # None: neither (memory is a cost but not a "worse" score)
    # The combined spread of repeated trials (stats.noise), in the metric's unit; None
    # when neither run was repeated.
    noise: float | None = None

    @property
    def within_noise(self) -> bool:
        """The difference is smaller than the combined spread of the two runs' trials."""
        if self.noise is None or self.a is None or self.b is None:
            return False
        return abs(self.b - self.a) < self.noise

    @property
    def verdict(self) -> str | None:
        """"better"/"worse" (B against A), "within noise", or None (no direction)."""
        if self.within_noise:
            return "within noise"
        better = self.better
        if better is None:
            return None
        return "better" if better == "b" else "worse"

    @property
    def ratio(self) -> float | None:
        """B/A, the factor by which B differs from A."""
        if self.a is None or self.b is None or self.a == 0:
            return None
        return self.b / self.a

    @property
    def better(self) -> str | None:
        """"a", "b" or None (equal, not comparable, or no direction)."""
        r = self.ratio
        if r is None or self.higher_is_better is None or r == 1 or self.within_noise:
            return None
        return "b" if (r > 1) == self.higher_is_better else "a"


@dataclass(frozen=True)
class SettingRow:
    name: str
    a: Any
    b: Any

    @property
    def differs(self) -> bool:
        return self.a != self.b


@dataclass(frozen=True)
class Comparison:
    a: Result
    b: Result
    metrics: list[MetricRow]
    settings: list[SettingRow]
    # Two deepbench results: one row per DeepBench shape (TFLOP/s; all-reduce GB/s).
    shapes: list[MetricRow] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "a": self.a.id,
            "b": self.b.id,
            "metrics": [
                {"name": m.name, "unit": m.unit, "a": m.a, "b": m.b, "ratio_b_over_a": m.ratio,
                 "higher_is_better": m.higher_is_better, "better": m.better,
                 "noise": m.noise, "within_noise": m.within_noise, "verdict": m.verdict}
                for m in self.metrics
            ],
            "settings": [
                {"name": s.name, "a": s.a, "b": s.b, "differs": s.differs} for s in self.settings
            ],
            "shapes": [
                {"name": m.name, "unit": m.unit, "a": m.a, "b": m.b, "ratio_b_over_a": m.ratio,
                 "better": m.better} for m in self.shapes
            ],
            # Throttled > 5 % of the timed window (null: no window was sampled).
            "throttled": {"a": self.a.throttled if self.a.window else None,
                          "b": self.b.throttled if self.b.window else None},
        }


IDENTITY_KEYS = ("benchmark", "model", "device", "device_name", "precision", "batch_size",
                 "status")
ENV_KEYS = ("torch", "cuda", "cudnn", "driver", "python", "platform", "cpu")
HEADLINE = "throughput"


def _spread(s: Spread | None, key: str) -> float | None:
    return getattr(s, key) if s is not None else None


def _flops_and_llm(a: Result, b: Result) -> list[MetricRow]:
    """Achieved TFLOP/s and MFU (model benchmarks); TTFT, TPOT, ITL, decode rate and MBU
    (lm-infer). A row neither result has is left out of the table by the CLI."""
    def fl(r: Result, key: str) -> float | None:
        return getattr(r.flops, key) if r.flops is not None else None

    def lm(r: Result, key: str) -> float | None:
        return getattr(r.llm, key) if r.llm is not None else None

    def sp(r: Result, key: str, q: str) -> float | None:
        return _spread(getattr(r.llm, key) if r.llm is not None else None, q)

    return [
        MetricRow("achieved TFLOP/s", "TFLOP/s", fl(a, "achieved_tflops"),
                  fl(b, "achieved_tflops"), True),
        MetricRow("MFU", "", fl(a, "mfu"), fl(b, "mfu"), True),
        MetricRow("TTFT p50", "ms", sp(a, "ttft_ms", "p50"), sp(b, "ttft_ms", "p50"), False),
        MetricRow("TTFT p99", "ms", sp(a, "ttft_ms", "p99"), sp(b, "ttft_ms", "p99"), False),
        MetricRow("TPOT p50", "ms", sp(a, "tpot_ms", "p50"), sp(b, "tpot_ms", "p50"), False),
        MetricRow("TPOT p99", "ms", sp(a, "tpot_ms", "p99"), sp(b, "tpot_ms", "p99"), False),
        MetricRow("ITL p99", "ms", sp(a, "itl_ms", "p99"), sp(b, "itl_ms", "p99"), False),
        MetricRow("decode tokens/s", "tokens/s", lm(a, "decode_tokens_per_s"),
                  lm(b, "decode_tokens_per_s"), True),
        MetricRow("MBU", "", lm(a, "mbu"), lm(b, "mbu"), True),
    ]


def compare(a: Result, b: Result) -> Comparison:
    ta, tb = a.throughput, b.throughput
    unit_a, unit_b = a.unit, b.unit
    unit = unit_a or unit_b

    def tp(t: Any, key: str) -> float | None:
        return getattr(t, key) if t is not None else None

    metrics = [
        MetricRow(HEADLINE, unit, a.headline, b.headline, True,
                  noise=noise(a.spread, b.spread)),
        MetricRow("throughput p10 (windows)", unit, tp(ta, "p10"), tp(tb, "p10"), True),
        MetricRow("latency p50", "ms", _spread(a.latency_ms, "p50"),
                  _spread(b.latency_ms, "p50"), False),
        MetricRow("latency p90", "ms", _spread(a.latency_ms, "p90"),
                  _spread(b.latency_ms, "p90"), False),
        MetricRow("latency p99", "ms", _spread(a.latency_ms, "p99"),
                  _spread(b.latency_ms, "p99"), False),
        MetricRow("step time p50", "ms", _spread(a.step_time_ms, "p50"),
                  _spread(b.step_time_ms, "p50"), False),
        MetricRow("energy per sample", "J", a.energy_j_per_sample, b.energy_j_per_sample, False),
        MetricRow("average power", "W", a.avg_power_w, b.avg_power_w, None),
        MetricRow("peak memory", "bytes",
                  float(a.peak_memory_bytes) if a.peak_memory_bytes is not None else None,
                  float(b.peak_memory_bytes) if b.peak_memory_bytes is not None else None,
                  False),
    ]
    metrics += _flops_and_llm(a, b)
    if unit_a and unit_b and unit_a != unit_b:
        # Different units (samples/s vs TFLOP/s) make the ratio meaningless.
        metrics[0] = MetricRow(HEADLINE, f"{unit_a} vs {unit_b}", a.headline, b.headline, None)
    settings: list[SettingRow] = [SettingRow(k, getattr(a, k), getattr(b, k))
                                  for k in IDENTITY_KEYS]
    sa, sb = a.settings, b.settings
    for key in sorted(set(sa) | set(sb)):
        if key in IDENTITY_KEYS:
            continue
        settings.append(SettingRow(key, sa.get(key), sb.get(key)))
    for key in ENV_KEYS:
        if key in a.env or key in b.env:
            settings.append(SettingRow(f"env.{key}", a.env.get(key), b.env.get(key)))
    return Comparison(a, b, metrics, settings, shapes_compared(a, b))


def shapes_compared(a: Result, b: Result) -> list[MetricRow]:
    """Two deepbench results shape by shape, in A's order, then B's shapes A did not run.
    A shape only one of them ran has None on the other side."""
    ea, eb = a.extra.of(DeepbenchExtra), b.extra.of(DeepbenchExtra)
    if ea is None or eb is None:
        return []
    ka, kb = keyed(ea.rows), keyed(eb.rows)
    out = []
    for key in [*ka, *(k for k in kb if k not in ka)]:
        ra, rb = ka.get(key), kb.get(key)
        unit = figure(ra)[1] if ra else figure(rb)[1] if rb else ""
        op, shape, nth = key
        out.append(MetricRow(f"{op} {shape}" + (f" (#{nth + 1})" if nth else ""), unit,
                             figure(ra)[0] if ra else None, figure(rb)[0] if rb else None,
                             True))
    return out
