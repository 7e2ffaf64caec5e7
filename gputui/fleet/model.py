"""What the fleet view knows about each host and GPU: immutable, built off the event loop.

Values come from metrics pages (ours or dcgm-exporter's) or from a Prometheus
server, so units are the ones those speak, converted to gputui's (bytes, W, °C).
`None` means the page did not say; it is shown as N/A, never as 0.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any

from gputui.telemetry.model import iso_utc
from gputui.telemetry.throttle import (
    is_throttling,
    reason_keys,
    reasons_of,
    state_words,
    throttle_words,
)

HOT_TEMP_C = 85.0  # alert threshold when the page does not give a slowdown temperature
STALE_TEXT = "stale: its driver is not answering"


def local_clock(t: datetime) -> str:
    """A time shown to the user (rows, alerts, status line): local wall clock, HH:MM:SS.

    Machine output (JSON's `time` and `last_seen`) stays ISO-8601 UTC.
    """
    return f"{t.astimezone():%H:%M:%S}"


class HostState(StrEnum):
    PENDING = "pending"  # not asked yet
    UP = "up"
    DOWN = "down"  # did not answer (refused, timed out, unreachable)
    ERROR = "error"  # answered, but not with a usable metrics page


@dataclass(frozen=True, slots=True)
class FleetGpu:
    gpu: str  # the `gpu` label: the index on its host
    uuid: str
    model: str
    util_pct: float | None = None
    # DCGM_FI_PROF_SM_ACTIVE / _PIPE_TENSOR_ACTIVE in %: the share of SMs (tensor pipes)
    # really busy, which "util" hides; None where the GPU or its exporter has no profiling.
    sm_active_pct: float | None = None
    tensor_active_pct: float | None = None
    mem_used_bytes: int | None = None
    mem_total_bytes: int | None = None
    power_w: float | None = None
    temp_c: float | None = None
    slowdown_temp_c: float | None = None
    clock_sm_mhz: float | None = None
    throttle_mask: int | None = None
    lost: bool = False
    # The exporter's reader for this GPU did not answer in time (a hung driver call): the
    # exporter serves no values for it, only that it is stale.
    stale: bool = False

    @property
    def throttling(self) -> bool:
        return not self.lost and not self.stale and is_throttling(self.throttle_mask)

    @property
    def state_text(self) -> str:
        """The throttle state in words: 'HW thermal slowdown', 'GPU idle', 'none', 'N/A'."""
        if self.lost:
            return "GPU is lost"
        if self.stale:
            return STALE_TEXT
        return state_words(self.throttle_mask)

    def hot(self, threshold_c: float = HOT_TEMP_C) -> bool:
        if self.lost or self.temp_c is None:
            return False
        if self.slowdown_temp_c is not None and self.temp_c >= self.slowdown_temp_c:
            return True
        return self.temp_c >= threshold_c

    @property
    def sort_key(self) -> tuple[int, str]:
        return (int(self.gpu), self.uuid) if self.gpu.isdigit() else (1 << 30, self.gpu)

    def to_dict(self) -> dict[str, Any]:
        return {
            "gpu": self.gpu,
            "uuid": self.uuid,
            "model": self.model,
            "lost": self.lost,
            "stale": self.stale,
            "util_gpu_pct": self.util_pct,
            "sm_active_pct": self.sm_active_pct,
            "tensor_active_pct": self.tensor_active_pct,
            "mem_used_bytes": self.mem_used_bytes,
            "mem_total_bytes": self.mem_total_bytes,
            "power_w": self.power_w,
            "temp_c": self.temp_c,
            "slowdown_temp_c": self.slowdown_temp_c,
            "clock_sm_mhz": self.clock_sm_mhz,
            "throttle_mask": self.throttle_mask,
            "throttle_reasons": None if self.throttle_mask is None
            else reason_keys(self.throttle_mask),
            "throttle_reasons_text": self.state_text,
            "throttling": self.throttling,
        }


@dataclass(frozen=True, slots=True)
class HostReading:
    """What one metrics page (or one Prometheus instance) said."""

    gpus: tuple[FleetGpu, ...] = ()
    hostname: str | None = None  # the hostname (or older Hostname) label
    exporter: str | None = None  # "gputui" or "dcgm-exporter"
    nvml_error: str | None = None
    cpu_pct: float | None = None
    mem_used_bytes: int | None = None
    mem_total_bytes: int | None = None


@dataclass(frozen=True, slots=True)
class FleetHost:
    target: str  # as the user named it (host:port, URL) or Prometheus' `instance`
    url: str | None
    state: HostState = HostState.PENDING
    reading: HostReading = field(default_factory=HostReading)
    error: str | None = None
    last_seen: datetime | None = None  # last successful read, wall clock UTC
    failures: int = 0  # consecutive failed attempts
    retry_in_s: float | None = None  # seconds until the next attempt, while backing off
    reads: int = 0  # successful reads so far: tells a fresh reading from the same one again

    @property
    def gpus(self) -> tuple[FleetGpu, ...]:
        return self.reading.gpus

    @property
    def name(self) -> str:
        """The hostname label where the page gave one, else the target."""
        return self.reading.hostname or self.target

    def to_dict(self) -> dict[str, Any]:
        r = self.reading
        return {
            "target": self.target,
            "url": self.url,
            "state": self.state.value,
            "hostname": r.hostname,
            "exporter": r.exporter,
            "error": self.error,
            "last_seen": iso_utc(self.last_seen) if self.last_seen else None,
            "failures": self.failures,
            "retry_in_s": None if self.retry_in_s is None else round(self.retry_in_s, 1),
            "nvml_error": r.nvml_error,
            "host_cpu_pct": r.cpu_pct,
            "host_mem_used_bytes": r.mem_used_bytes,
            "host_mem_total_bytes": r.mem_total_bytes,
            "gpus": [g.to_dict() for g in r.gpus],
        }


@dataclass(frozen=True, slots=True)
class Alert:
    severity: str  # "critical" or "warning"
    kind: str  # "down", "error", "lost", "stale", "throttling", "hot", "no_gpu_data"
    host: str
    gpu: str | None
    text: str

    def to_dict(self) -> dict[str, Any]:
        return {"severity": self.severity, "kind": self.kind, "host": self.host,
                "gpu": self.gpu, "text": self.text}


@dataclass(frozen=True, slots=True)
class FleetSnapshot:
    time: datetime
    source: str  # "targets", or the Prometheus server's URL
    hosts: tuple[FleetHost, ...] = ()
    hot_temp_c: float = HOT_TEMP_C
    error: str | None = None  # the source itself failed (Prometheus unreachable)

    def alerts(self) -> list[Alert]:
        out: list[Alert] = []
        if self.error:
            out.append(Alert("critical", "error", self.source, None, self.error))
        for h in self.hosts:
            if h.state is HostState.DOWN:
                seen = f"last seen {local_clock(h.last_seen)}" if h.last_seen else "never seen"
                out.append(Alert("critical", "down", h.name, None,
                                 f"{h.name} is down ({h.error or 'no answer'}; {seen})"))
                continue
            if h.state is HostState.ERROR:
                out.append(Alert("warning", "error", h.name, None, f"{h.name}: {h.error}"))
                continue
            if h.state is HostState.UP and h.reading.nvml_error:
                out.append(Alert("warning", "no_gpu_data", h.name, None,
                                 f"{h.name}: no GPU data ({h.reading.nvml_error})"))
            for g in h.gpus:
                where = f"{h.name} GPU {g.gpu}"
                if g.lost:
                    out.append(Alert("critical", "lost", h.name, g.gpu, f"{where}: GPU is lost"))
                    continue
                if g.stale:
                    out.append(Alert("warning", "stale", h.name, g.gpu,
                                     f"{where}: {STALE_TEXT}"))
                    continue
                if g.throttling:
                    severe = any(r.kind in ("thermal", "other") for r in reasons_of(
                        g.throttle_mask))
                    out.append(Alert("critical" if severe else "warning", "throttling", h.name,
                                     g.gpu, f"{where}: {throttle_words(g.throttle_mask)}"))
                if g.hot(self.hot_temp_c):
                    out.append(Alert("warning", "hot", h.name, g.gpu,
                                     f"{where}: {g.temp_c:.0f} °C"))
        return out

    def to_dict(self) -> dict[str, Any]:
        return {
            "time": iso_utc(self.time),
            "source": self.source,
            "error": self.error,
            "hot_temp_c": self.hot_temp_c,
            "hosts": [h.to_dict() for h in self.hosts],
            "alerts": [a.to_dict() for a in self.alerts()],
        }
