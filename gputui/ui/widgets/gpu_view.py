"""What a GPU sample looks like on screen, as plain data (no widgets): testable alone."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Protocol

from gputui.safe_text import printable
from gputui.telemetry.gpm import LOW_SM_ACTIVE_PCT, verdict
from gputui.telemetry.model import DeviceInfo, GpuSample
from gputui.telemetry.throttle import (
    CURRENT_LIMIT,
    MEM_THERMAL,
    PLATFORM_POWER,
    PROCHOT,
    RELIABILITY,
    VR_THERMAL,
    ThrottleEpisode,
    explain,
    is_throttling,
    state_words,
)
from gputui.telemetry.units import NA, fmt_duration, fmt_pct, gib


class HistoryLike(Protocol):
    """What a sparkline reads: bucketed values of one GPU's metric (the view's TickBuckets)."""

    def buckets(self, gpu: int, metric: str, seconds: float, n: int,
                now: float | None = None, agg: str = "max") -> list[float | None]: ...


# History metrics drawn per GPU, in panel order: (metric, gauge label). SM active sits
# beside GPU util: "utilization" counts time with any kernel, SM active how much of the
# GPU those kernels used (GPM, Hopper and newer; "—" elsewhere). The SM clock last: the
# proof of throttling.
# The History series a panel's sparkline draws where it is not the gauge's own metric:
# power is drawn as the highest draw within each tick (the driver's sub-second samples),
# so a 100 ms spike between 1 s readings — the kind that trips a power brake — shows.
SPARK_SERIES: dict[str, str] = {"power_w": "power_w_peak"}
HISTORY_METRICS: tuple[tuple[str, str], ...] = (
    ("util_gpu_pct", "GPU"),
    ("sm_active_pct", "SM ACT"),
    ("util_mem_pct", "MEMC"),
    ("mem_used_bytes", "VRAM"),
    ("power_w", "PWR"),
    ("temp_c", "TEMP"),
    ("clock_sm_mhz", "SM CLK"),
)
# Shown where there is no value for a reason other than "this device lacks it" (no GPM
# counters, a lost GPU): a dash, never 0.
DASH = "—"


@dataclass(frozen=True, slots=True)
class GpuFrame:
    """Everything one GPU widget needs for one tick."""

    sample: GpuSample
    episode: ThrottleEpisode | None
    now: datetime
    history: HistoryLike
    seconds: float
    # Sparkline tops last known for this GPU (a lost GPU has no limits any more: keep
    # the scale its history was drawn on), kept by the view from every frame.
    scales: Mapping[str, float] = field(default_factory=dict)


# Compact rows are short of room: each reason keeps the words that tell it from the
# others ("HW thermal" vs "HW slowdown" vs "HW power brake"), most serious first.
SHORT_REASONS: tuple[tuple[int, str], ...] = (
    (0x40, "HW thermal"), (0x80, "HW power brake"), (0x8, "HW slowdown"),
    (PROCHOT, "PROCHOT"), (VR_THERMAL, "VR thermal"), (MEM_THERMAL, "mem thermal"),
    (0x20, "SW thermal"), (CURRENT_LIMIT, "current limit"), (PLATFORM_POWER, "platform power"),
    (0x4, "SW power cap"), (RELIABILITY, "FIT limit"), (0x10, "sync boost"),
)


def short_reasons(mask: int | None) -> str:
    return ", ".join(words for bit, words in SHORT_REASONS if (mask or 0) & bit)


def short_name(name: str) -> str:
    return name.removeprefix("NVIDIA ").removeprefix("GeForce ").removeprefix("AMD ")


def temp_scale_c(info: DeviceInfo) -> float:
    """Top of the temperature sparkline: shutdown, else slowdown+15, else 100 °C."""
    if info.temp_shutdown_c:
        return float(info.temp_shutdown_c)
    if info.temp_slowdown_c:
        return float(info.temp_slowdown_c + 15)
    return 100.0


def metric_scale(g: GpuSample, metric: str) -> float | None:
    """The fixed top of each sparkline's scale (None: unknown, nothing drawn)."""
    if metric in ("util_gpu_pct", "util_mem_pct", "sm_active_pct"):
        return 100.0
    if metric == "mem_used_bytes":
        return float(g.mem_total_bytes or g.info.mem_total_bytes or 0) or None
    if metric == "power_w":
        return g.power_limit_w or None
    if metric == "temp_c":
        return temp_scale_c(g.info)
    if metric == "clock_sm_mhz":
        return float(g.info.clock_sm_max_mhz or 0) or None
    return None


def scale_text(metric: str, top: float | None) -> str:
    """A sparkline's fixed scale in words ("0–100%", "0–400W"): every graph starts at 0."""
    if not top:
        return "scale N/A"
    if metric == "mem_used_bytes":
        return f"0–{top / 2**30:.0f}G"
    unit = {"power_w": "W", "temp_c": "°C", "clock_sm_mhz": "MHz"}.get(metric, "%")
    return f"0–{top:.0f}{unit}"


def scale_lines(metric: str, top: float | None, rows: int) -> str:
    """The scale beside a sparkline `rows` tall: "0–100%" on one row; on more, the top
    value on the top row and 0 on the bottom one, like a chart's axis."""
    text = scale_text(metric, top)
    if rows <= 1 or not top:
        return text
    return "\n".join([text.removeprefix("0–")] + [""] * (rows - 2) + ["0"])


def ago_text(seconds: float) -> str:
    """How long ago the left edge of a graph is: "−5m", "−60s", "−1h"."""
    s = round(seconds)
    if s < 60:
        return f"−{s}s"
    if s % 60:
        return f"−{s // 60}m{s % 60:02d}s"
    m = s // 60
    return f"−{m // 60}h" if m >= 60 and m % 60 == 0 else f"−{m}m"


def gpm_verdict(g: GpuSample) -> str | None:
    """What the profiling counters say about a busy GPU, in words (None: nothing to say)."""
    return verdict(g.util_gpu_pct, g.sm_active_pct, g.tensor_active_pct, g.fp32_active_pct)


def gpm_marker(g: GpuSample) -> str | None:
    """The verdict in a few words, for the compact row."""
    if gpm_verdict(g) is None:
        return None
    low = g.sm_active_pct is not None and g.sm_active_pct < LOW_SM_ACTIVE_PCT
    return "◇ SMs mostly idle" if low else "◇ fp32, tensor idle"


def _frac(v: float | None, top: float | None) -> float | None:
    if v is None or not top:
        return None
    return v / top


@dataclass(frozen=True, slots=True)
class GaugeView:
    """One gauge as drawn: how full, its text, and its severity."""

    fraction: float | None
    text: str
    severity: str | None = None


def gauges(g: GpuSample) -> dict[str, GaugeView]:
    """Gauge values for a live sample, keyed by metric (plus "fan" and "clock_sm_mhz")."""
    info = g.info
    total = g.mem_total_bytes or info.mem_total_bytes
    out: dict[str, GaugeView] = {}
    out["util_gpu_pct"] = GaugeView(_frac(g.util_gpu_pct, 100), fmt_pct(g.util_gpu_pct))
    out["util_mem_pct"] = GaugeView(_frac(g.util_mem_pct, 100), fmt_pct(g.util_mem_pct))
    out["sm_active_pct"] = GaugeView(_frac(g.sm_active_pct, 100),
                                     DASH if g.sm_active_pct is None else fmt_pct(g.sm_active_pct))
    mem_frac = _frac(g.mem_used_bytes, total)
    out["mem_used_bytes"] = GaugeView(
        mem_frac,
        NA if g.mem_used_bytes is None else f"{gib(g.mem_used_bytes)}/{gib(total)}G",
        _level(mem_frac, 0.85, 0.95))
    p_frac = _frac(g.power_w, g.power_limit_w)
    if g.power_w is None:
        p_text = NA
    elif g.power_limit_w:
        p_text = f"{g.power_w:.0f}/{g.power_limit_w:.0f}W"
    else:
        p_text = f"{g.power_w:.0f}W"
    out["power_w"] = GaugeView(p_frac, p_text, _level(p_frac, 0.97, 2.0))
    slow = info.temp_slowdown_c
    if g.temp_c is None:
        t_view = GaugeView(None, NA)
    elif slow:
        sev = "error" if g.temp_c >= slow else "warning" if g.temp_c >= slow - 5 else None
        t_view = GaugeView(g.temp_c / slow, f"{g.temp_c}/{slow}°C", sev)
    else:
        t_view = GaugeView(g.temp_c / 100, f"{g.temp_c}°C",
                           "warning" if g.temp_c >= 85 else None)
    out["temp_c"] = t_view
    out["fan"] = GaugeView(_frac(g.fan_pct, 100), fmt_pct(g.fan_pct))
    if g.clock_sm_mhz is None:
        c_view = GaugeView(None, NA)
    elif info.clock_sm_max_mhz:
        c_view = GaugeView(g.clock_sm_mhz / info.clock_sm_max_mhz,
                           f"{g.clock_sm_mhz}/{info.clock_sm_max_mhz}MHz",
                           "warning" if is_throttling(g.throttle_mask) else None)
    else:
        c_view = GaugeView(None, f"{g.clock_sm_mhz}MHz")
    out["clock_sm_mhz"] = c_view
    return out


def _level(frac: float | None, warn: float, err: float) -> str | None:
    if frac is None:
        return None
    return "error" if frac >= err else "warning" if frac >= warn else None


def pstate_text(g: GpuSample) -> str:
    return NA if g.pstate is None else f"P{g.pstate}"


@dataclass(frozen=True, slots=True)
class StateView:
    """The GPU's condition in words, long and short."""

    text: str
    severity: str | None  # None (fine), "warning" (throttling), "error" (lost/failed)
    short: str  # for the one-line compact row


def state(g: GpuSample, episode: ThrottleEpisode | None, now: datetime) -> StateView:
    """The GPU's condition in words, with a symbol so colour is never the only cue."""
    if g.lost:
        return StateView("✖ GPU is lost — it fell off the bus; a reset or reboot is needed",
                         "error", "✖ GPU is lost")
    if g.stale:
        age = fmt_duration(g.stale_s or 0.0)
        if g.error:  # never answered at all
            return StateView(f"⏳ STALE: not answering for {age} (driver call hung)", "error",
                             f"⏳ no answer {age}")
        return StateView(f"⏳ STALE: not answering for {age} — values shown are {age} old",
                         "error", f"⏳ stale {age}")
    if g.error:
        return StateView(f"✖ {printable(g.error)}", "error", "✖ error")
    if is_throttling(g.throttle_mask):
        since = episode.start if episode else None
        base = episode.clock_sm_before_mhz if episode else None
        text = explain(g, since=since, now=now, base_clock_sm_mhz=base)
        short = short_reasons(g.throttle_mask)
        if episode is not None:
            short += f" {fmt_duration(episode.duration_s(now))}"
        return StateView(f"⚠ THROTTLED: {text}", "warning", f"⚠ {short}")
    if g.throttle_mask is None:
        return StateView("· throttle reasons N/A", None, "·")
    benign = state_words(g.throttle_mask)
    suffix = "" if benign == "none" else f" ({benign})"
    return StateView(f"✓ not throttled{suffix}", None, "✓ ok")
