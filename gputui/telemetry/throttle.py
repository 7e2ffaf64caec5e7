"""Clocks-event reasons in words, and a tracker that turns samples into episodes.

"Throttling" means any reason except GPU idle, application-clock setting and
display-clock setting: those three lower clocks on purpose, not under duress.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import datetime

from gputui.telemetry.model import GpuSample, iso_utc
from gputui.telemetry.units import fmt_duration


@dataclass(frozen=True, slots=True)
class Reason:
    """One bit of gputui's throttle vocabulary: NVML's clock-event reasons, and the AMD
    throttlers NVML has no bit for."""

    bit: int
    key: str  # stable snake_case name used in JSON and metrics
    words: str  # what a person reads
    throttling: bool
    kind: str  # "thermal", "power", "other", or "none"


CURRENT_LIMIT = 0x10000  # TDC/EDC: a voltage regulator's current limit
MEM_THERMAL = 0x20000  # HBM/GDDR temperature
VR_THERMAL = 0x40000  # a voltage regulator's temperature, or its VRHOT signal
PROCHOT = 0x80000  # the platform asserts PROCHOT
PLATFORM_POWER = 0x100000  # PPM: the platform's power management
RELIABILITY = 0x200000  # FIT: the firmware's reliability (voltage/frequency) limit

REASONS: tuple[Reason, ...] = (
    Reason(0x1, "gpu_idle", "GPU idle", False, "none"),
    Reason(0x2, "applications_clocks_setting", "application clocks setting", False, "none"),
    Reason(0x4, "sw_power_cap", "SW power cap", True, "power"),
    Reason(0x8, "hw_slowdown", "HW slowdown", True, "other"),
    Reason(0x10, "sync_boost", "sync boost", True, "other"),
    Reason(0x20, "sw_thermal_slowdown", "SW thermal slowdown", True, "thermal"),
    Reason(0x40, "hw_thermal_slowdown", "HW thermal slowdown", True, "thermal"),
    Reason(0x80, "hw_power_brake_slowdown", "HW power brake slowdown", True, "power"),
    Reason(0x100, "display_clock_setting", "display clock setting", False, "none"),
    # AMD throttlers that have no NVML bit (gputui.telemetry.amd.throttle_bits decodes
    # amdgpu's indep_throttle_status into these and the bits above). They sit above
    # NVML's range (0x1FF and its reserved bits), so an NVML mask never sets them.
    Reason(CURRENT_LIMIT, "current_limit", "current limit (TDC/EDC)", True, "power"),
    Reason(MEM_THERMAL, "mem_thermal_slowdown", "memory thermal slowdown", True, "thermal"),
    Reason(VR_THERMAL, "vr_thermal_slowdown", "VR thermal slowdown", True, "thermal"),
    Reason(PROCHOT, "prochot", "PROCHOT", True, "thermal"),
    Reason(PLATFORM_POWER, "platform_power_limit", "platform power limit (PPM)", True,
           "power"),
    # A voltage/frequency limit the firmware keeps for the chip's life, as a power cap is
    # kept: not a fault ("other" is what the fleet view calls critical).
    Reason(RELIABILITY, "reliability_limit", "reliability limit (FIT)", True, "power"),
)
# The AMD-only reasons' bits (none of them is ever set on an NVIDIA GPU).
AMD_ONLY_MASK = (CURRENT_LIMIT | MEM_THERMAL | VR_THERMAL | PROCHOT | PLATFORM_POWER
                 | RELIABILITY)
# The reasons an AMD GPU can give: its own and the two NVML ones its limits map onto.
AMD_MASK = AMD_ONLY_MASK | 0x4 | 0x20
_BY_KEY = {r.key: r for r in REASONS}
THROTTLE_MASK = sum(r.bit for r in REASONS if r.throttling)


def reasons_of(mask: int | None) -> list[Reason]:
    if not mask:
        return []
    known = [r for r in REASONS if mask & r.bit]
    return known


def reason_keys(mask: int | None) -> list[str]:
    keys = [r.key for r in reasons_of(mask)]
    unknown = (mask or 0) & ~sum(r.bit for r in REASONS)
    if unknown:
        keys.append(f"unknown_0x{unknown:x}")
    return keys


def mask_from_keys(keys: list[str]) -> int:
    return sum(_BY_KEY[k].bit for k in keys if k in _BY_KEY)


def is_throttling(mask: int | None) -> bool:
    return bool((mask or 0) & THROTTLE_MASK)


def throttle_words(mask: int | None) -> str:
    """The throttling reasons in words, most serious first ("HW thermal slowdown, SW power cap")."""
    order = (0x40, 0x80, 0x8, PROCHOT, VR_THERMAL, MEM_THERMAL, 0x20, CURRENT_LIMIT,
             PLATFORM_POWER, 0x4, RELIABILITY, 0x10)
    words = [r.words for bit in order for r in REASONS if r.bit == bit and (mask or 0) & bit]
    return ", ".join(words)


def state_words(mask: int | None) -> str:
    """Every reason set, throttling or not, in words: what `snapshot` prints."""
    if mask is None:
        return "N/A"
    if is_throttling(mask):
        return throttle_words(mask)
    benign = [r.words for r in reasons_of(mask)]
    return ", ".join(benign) if benign else "none"


def explain(sample: GpuSample, since: datetime | None = None, now: datetime | None = None,
            base_clock_sm_mhz: int | None = None) -> str:
    """One sentence a person can act on.

    "HW thermal slowdown since 14:02:11 (3m12s), SM clock 1410→945 MHz, 87 °C ≥ slowdown 85 °C"
    """
    mask = sample.throttle_mask
    if not is_throttling(mask):
        return ""
    parts = [throttle_words(mask)]
    if since is not None:
        local = since.astimezone()
        text = f"since {local:%H:%M:%S}"
        if now is not None:
            text += f" ({fmt_duration((now - since).total_seconds())})"
        parts[0] += " " + text
    info = sample.info
    if sample.clock_sm_mhz is not None:
        if base_clock_sm_mhz is not None and base_clock_sm_mhz != sample.clock_sm_mhz:
            parts.append(f"SM clock {base_clock_sm_mhz}→{sample.clock_sm_mhz} MHz")
        elif info.clock_sm_max_mhz:
            parts.append(f"SM clock {sample.clock_sm_mhz}/{info.clock_sm_max_mhz} MHz")
        else:
            parts.append(f"SM clock {sample.clock_sm_mhz} MHz")
    thermal = any(r.kind == "thermal" for r in reasons_of(mask))
    power = any(r.kind == "power" for r in reasons_of(mask))
    if thermal and sample.temp_c is not None:
        if info.temp_slowdown_c is not None:
            cmp = "≥" if sample.temp_c >= info.temp_slowdown_c else "<"
            parts.append(f"{sample.temp_c} °C {cmp} slowdown {info.temp_slowdown_c} °C")
        else:
            parts.append(f"{sample.temp_c} °C")
    if power and sample.power_w is not None:
        if sample.power_limit_w:
            parts.append(f"{sample.power_w:.0f} W of {sample.power_limit_w:.0f} W limit")
        else:
            parts.append(f"{sample.power_w:.0f} W")
    return ", ".join(parts)


@dataclass(frozen=True, slots=True)
class ThrottleEpisode:
    """A stretch of ticks one GPU spent throttling (open while `end` is None)."""

    gpu_index: int
    gpu_uuid: str
    mask: int  # union of throttling reasons seen during the episode
    start: datetime
    end: datetime | None  # None while ongoing
    peak_temp_c: int | None
    min_clock_sm_mhz: int | None
    clock_sm_before_mhz: int | None  # SM clock on the last tick before it started
    start_mono: float = 0.0
    end_mono: float | None = None

    @property
    def ongoing(self) -> bool:
        return self.end is None

    def duration_s(self, now: datetime | None = None) -> float:
        end = self.end or now or self.start
        return max(0.0, (end - self.start).total_seconds())

    @property
    def reasons(self) -> list[str]:
        return reason_keys(self.mask)

    @property
    def words(self) -> str:
        return throttle_words(self.mask)

    def to_dict(self, now: datetime | None = None) -> dict[str, object]:
        return {
            "gpu": self.gpu_index,
            "uuid": self.gpu_uuid,
            "reasons": self.reasons,
            "reasons_text": self.words,
            "start": iso_utc(self.start),
            "end": iso_utc(self.end) if self.end else None,
            "duration_s": round(self.duration_s(now), 3),
            "peak_temp_c": self.peak_temp_c,
            "min_clock_sm_mhz": self.min_clock_sm_mhz,
            "clock_sm_before_mhz": self.clock_sm_before_mhz,
        }


@dataclass
class ThrottleTracker:
    """Feed it every sample in order; it keeps open and closed episodes per GPU.

    An episode starts on the first tick with a throttling reason and ends on the
    first tick without one (or when the device is lost). Not thread-safe: the
    sampler thread owns it and publishes copies.
    """

    max_closed: int = 1000
    _open: dict[int, ThrottleEpisode] = field(default_factory=dict)
    _closed: list[ThrottleEpisode] = field(default_factory=list)
    _last_clock: dict[int, int | None] = field(default_factory=dict)
    started_total: int = 0

    def update(self, samples: tuple[GpuSample, ...] | list[GpuSample], now: datetime,
               mono: float) -> list[ThrottleEpisode]:
        """Returns the episodes that started on this tick."""
        started: list[ThrottleEpisode] = []
        for s in samples:
            idx = s.index
            ep = self._open.get(idx)
            if s.throttle_mask is None and not s.lost:
                # A failed read says nothing: an open episode stays open rather than
                # being split in two by one missing tick.
                continue
            throttling = not s.lost and is_throttling(s.throttle_mask)
            if throttling:
                mask = (s.throttle_mask or 0) & THROTTLE_MASK
                if ep is None:
                    ep = ThrottleEpisode(
                        gpu_index=idx, gpu_uuid=s.info.uuid, mask=mask, start=now, end=None,
                        peak_temp_c=s.temp_c, min_clock_sm_mhz=s.clock_sm_mhz,
                        clock_sm_before_mhz=self._last_clock.get(idx), start_mono=mono,
                    )
                    self.started_total += 1
                    started.append(ep)
                else:
                    ep = replace(
                        ep, mask=ep.mask | mask,
                        peak_temp_c=_max(ep.peak_temp_c, s.temp_c),
                        min_clock_sm_mhz=_min(ep.min_clock_sm_mhz, s.clock_sm_mhz),
                    )
                self._open[idx] = ep
            else:
                if ep is not None:
                    self._close(idx, now, mono)
                if not s.lost:
                    self._last_clock[idx] = s.clock_sm_mhz
        return started

    def _close(self, idx: int, now: datetime, mono: float) -> None:
        ep = self._open.pop(idx)
        self._closed.append(replace(ep, end=now, end_mono=mono))
        if len(self._closed) > self.max_closed:
            del self._closed[: len(self._closed) - self.max_closed]

    def ongoing(self) -> dict[int, ThrottleEpisode]:
        return dict(self._open)

    def episodes(self) -> tuple[ThrottleEpisode, ...]:
        """Closed then ongoing, oldest first."""
        return tuple(sorted([*self._closed, *self._open.values()], key=lambda e: e.start))

    def overlapping(self, start: datetime, end: datetime,
                    gpu_index: int | None = None) -> list[ThrottleEpisode]:
        out = []
        for ep in self.episodes():
            ep_end = ep.end or end
            if ep.start <= end and ep_end >= start and (gpu_index is None
                                                        or ep.gpu_index == gpu_index):
                out.append(ep)
        return out


def _max(a: int | None, b: int | None) -> int | None:
    return b if a is None else a if b is None else max(a, b)


def _min(a: int | None, b: int | None) -> int | None:
    return b if a is None else a if b is None else min(a, b)
