"""The one place where NVML's units become the units gputui stores and shows.

NVML reports power in milliwatts, energy in millijoules, memory in bytes, PCIe
throughput in KB/s (KiB: NVIDIA's tools multiply by 1024) and clocks in MHz.
Everything downstream stores W, J, bytes and B/s.
"""

from __future__ import annotations

KIB = 1024
GIB = KIB**3


def mw_to_w(milliwatts: int | None) -> float | None:
    return None if milliwatts is None else milliwatts / 1000.0


def mj_to_j(millijoules: int | None) -> float | None:
    return None if millijoules is None else millijoules / 1000.0


def kbps_to_bps(kilobytes_per_s: int | None) -> float | None:
    return None if kilobytes_per_s is None else float(kilobytes_per_s * KIB)


def us_to_ns(microseconds: int) -> int:
    """NVML's violation counters count nanoseconds against a microsecond clock."""
    return microseconds * 1000


def ms_to_s(milliseconds: float) -> float:
    """NVML's waits (the event set's) take milliseconds."""
    return milliseconds / 1000.0


def kib_to_bytes(kibibytes: int | None) -> int | None:
    """NVML's NVLink data counters count KiB."""
    return None if kibibytes is None else int(kibibytes) * KIB


def cuda_version_str(version: int | None) -> str | None:
    """NVML encodes the CUDA driver version as 1000*major + 10*minor (12040 → "12.4")."""
    if version is None:
        return None
    return f"{version // 1000}.{(version % 1000) // 10}"


# --- Formatting for people -------------------------------------------------------------

NA = "N/A"


def fmt_bytes(n: float | None, *, unit: str | None = None) -> str:
    """Binary units, as nvidia-smi uses for memory (MiB/GiB)."""
    if n is None:
        return NA
    units = ["B", "KiB", "MiB", "GiB", "TiB"]
    if unit is not None:
        return f"{n / KIB ** units.index(unit):.0f}{unit}"
    value = float(n)
    for u in units:
        if abs(value) < 1024 or u == units[-1]:
            return f"{value:.0f}{u}" if u in ("B", "KiB", "MiB") else f"{value:.1f}{u}"
        value /= 1024
    return NA  # unreachable; keeps type checkers calm


def gib(n: float | None) -> str:
    """Bytes as a bare GiB number with one decimal ("40.0"), for "used/total G" gauges."""
    return NA if n is None else f"{n / GIB:.1f}"


def fmt_rate(bps: float | None) -> str:
    if bps is None:
        return NA
    return fmt_bytes(bps) + "/s"


def fmt_pct(p: float | None) -> str:
    return NA if p is None else f"{p:.0f}%"


def fmt_w(w: float | None) -> str:
    return NA if w is None else f"{w:.0f}W"


def fmt_temp(c: float | None) -> str:
    return NA if c is None else f"{c:.0f}°C"


def fmt_mhz(m: float | None) -> str:
    return NA if m is None else f"{m:.0f}MHz"


def fmt_j(j: float | None) -> str:
    if j is None:
        return NA
    if j >= 1e6:
        return f"{j / 1e6:.2f}MJ"
    if j >= 1e3:
        return f"{j / 1e3:.1f}kJ"
    return f"{j:.1f}J"


def fmt_j_per(j: float | None) -> str:
    """Energy per step, sample or token: three significant digits ("46 J", "0.359 J",
    "2.81 mJ")."""
    if j is None:
        return NA
    if 0 < abs(j) < 0.01:
        return f"{j * 1e3:.3g} mJ"
    return f"{j:.3g} J"


def fmt_duration(seconds: float) -> str:
    """3m12s / 1h02m / 45s: how nvidia-smi users read durations."""
    s = int(max(0, round(seconds)))
    if s < 60:
        return f"{s}s"
    m, s = divmod(s, 60)
    if m < 60:
        return f"{m}m{s:02d}s"
    h, m = divmod(m, 60)
    if h < 24:
        return f"{h}h{m:02d}m"
    d, h = divmod(h, 24)
    return f"{d}d{h:02d}h"


def fmt_per_s(v: float | None) -> str:
    """A job's samples or tokens per second: "12,345", "87.5", N/A."""
    if v is None:
        return NA
    return f"{v:,.0f}" if v >= 100 else f"{v:.1f}"


def fmt_step_time(s: float | None) -> str:
    """A step time: "85 ms", "2.41 s", N/A."""
    if s is None:
        return NA
    return f"{s * 1000:.0f} ms" if s < 1 else f"{s:.2f} s"
