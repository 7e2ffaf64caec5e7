"""What the fleet view knows about each host and GPU: immutable, built off the event loop.

Values come from metrics pages (ours or dcgm-exporter's) or from a Prometheus
server, so units are the ones those speak, converted to gputui's (bytes, W, °C).
`None` means the page did not say; it is shown as N/A, never as 0.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from enum import IntEnum, StrEnum
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
class FleetJob:
    """A training job reporting with gputui.track, as its host's exporter serves it."""

    pid: int
    name: str
    gpus: tuple[str, ...] = ()  # the `gpu` labels of its series ("" when none is known)
    samples_per_s: float | None = None
    tokens_per_s: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"pid": self.pid, "job": self.name, "gpus": list(self.gpus),
                "samples_per_s": self.samples_per_s, "tokens_per_s": self.tokens_per_s}


@dataclass(frozen=True, slots=True)
class HostReading:
    """What one metrics page (or one Prometheus instance) said."""

    gpus: tuple[FleetGpu, ...] = ()
    jobs: tuple[FleetJob, ...] = ()
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
            "jobs": [j.to_dict() for j in r.jobs],
        }


class Problem(IntEnum):
    """What needs attention on a host, most urgent first: the view's default order."""

    DOWN = 0  # not answering, not a metrics page, or no GPU data at all
    LOST = 1  # a GPU fell off the bus or its driver stopped answering (stale)
    XID = 2  # XID errors in the last hour
    THROTTLING = 3
    HOT = 4
    IDLE_HELD = 5  # GPUs idle while holding memory: allocated, not working
    ALERT = 6  # another of the shipped alert rules is firing on it
    NONE = 7


@dataclass(frozen=True, slots=True)
class FiringAlert:
    """A firing Prometheus alert on a host: its rule, severity and how many series fire."""

    name: str
    severity: str
    count: int = 1

    def to_dict(self) -> dict[str, Any]:
        return {"alertname": self.name, "severity": self.severity, "count": self.count}


@dataclass(frozen=True, slots=True)
class HostSummary:
    target: str  # the row's key: the target as named, or Prometheus' `instance`
    name: str  # the host's own name where it gave one, else the target
    state: HostState = HostState.PENDING
    error: str | None = None  # why it is down or unreadable
    no_gpu_data: str | None = None  # it answers, but serves no GPU data (and why)
    last_seen: datetime | None = None
    gpus: int = 0
    busy: int | None = None  # GPUs at or above IDLE_BELOW_PCT
    util_mean_pct: float | None = None
    util_min_pct: float | None = None
    mem_used_bytes: int | None = None
    mem_total_bytes: int | None = None
    power_w: float | None = None
    hottest_c: float | None = None
    hottest_gpu: str | None = None
    margin_c: float | None = None  # the smallest distance of a GPU to its slowdown temperature
    hot: bool = False  # a GPU at its slowdown temperature or at --hot
    throttling: int = 0  # GPUs throttling now
    throttle_mask: int = 0  # their reasons, together
    lost: int = 0
    stale: int = 0
    idle_held: int | None = None  # GPUs idle for IDLE_WINDOW_S while holding memory
    xids_1h: int | None = None
    jobs: int | None = None  # training jobs reporting with gputui.track
    samples_per_s: float | None = None
    tokens_per_s: float | None = None
    alerts: tuple[FiringAlert, ...] = ()
    # Mean utilisation per step of the history window, oldest first (None: no data then).
    history: tuple[float | None, ...] | None = None
    # What needs attention, most urgent first ((Problem.NONE,) when nothing does): worked
    # out once, as every sort, filter and drawn line asks for it.
    problems: tuple[Problem, ...] = field(init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "problems", self._problems())

    @property
    def idle(self) -> int | None:
        return None if self.busy is None else max(0, self.gpus - self.lost - self.stale
                                                  - self.busy)

    @property
    def history_mean_pct(self) -> float | None:
        known = [v for v in self.history or () if v is not None]
        return sum(known) / len(known) if known else None

    def _problems(self) -> tuple[Problem, ...]:
        if self.state is not HostState.UP or self.no_gpu_data is not None:
            return (Problem.DOWN,)
        found = []
        if self.lost or self.stale:
            found.append(Problem.LOST)
        if self.xids_1h:
            found.append(Problem.XID)
        if self.throttling:
            found.append(Problem.THROTTLING)
        if self.hot:
            found.append(Problem.HOT)
        if self.idle_held:
            found.append(Problem.IDLE_HELD)
        if self.alerts:
            found.append(Problem.ALERT)
        return tuple(found) or (Problem.NONE,)

    @property
    def problem(self) -> Problem:
        return self.problems[0]

    @property
    def order(self) -> tuple[Problem, str, str]:
        """Problems first (in `Problem`'s order), then by name."""
        return (self.problem, self.name, self.target)

    def to_dict(self) -> dict[str, Any]:
        return {
            "target": self.target,
            "hostname": self.name,
            "state": self.state.value,
            "error": self.error,
            "no_gpu_data": self.no_gpu_data,
            "last_seen": iso_utc(self.last_seen) if self.last_seen else None,
            "problems": [p.name.lower() for p in self.problems if p is not Problem.NONE],
            "gpus": self.gpus,
            "busy": self.busy,
            "idle": self.idle,
            "util_mean_pct": self.util_mean_pct,
            "util_min_pct": self.util_min_pct,
            "mem_used_bytes": self.mem_used_bytes,
            "mem_total_bytes": self.mem_total_bytes,
            "power_w": self.power_w,
            "hottest_temp_c": self.hottest_c,
            "hottest_gpu": self.hottest_gpu,
            "slowdown_margin_c": self.margin_c,
            "hot": self.hot,
            "throttling": self.throttling,
            "throttle_reasons": reason_keys(self.throttle_mask) if self.throttle_mask else [],
            "lost": self.lost,
            "stale": self.stale,
            "idle_holding_memory": self.idle_held,
            "xids_1h": self.xids_1h,
            "jobs": self.jobs,
            "jobs_samples_per_s": self.samples_per_s,
            "jobs_tokens_per_s": self.tokens_per_s,
            "alerts": [a.to_dict() for a in self.alerts],
            "history_util_pct": None if self.history is None else list(self.history),
            "history_util_mean_pct": self.history_mean_pct,
        }


def problems_first(rows: Iterable[HostSummary]) -> list[HostSummary]:
    return sorted(rows, key=lambda s: s.order)


def _known_sum(values: Iterable[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return sum(known) if known else None


@dataclass(frozen=True, slots=True)
class FleetSummary:
    """The whole fleet in one line: hosts up and down, GPUs busy and idle, throttling,
    lost, total power and firing alerts."""

    hosts: int
    up: int
    gpus: int
    busy: int
    idle: int
    throttling: int
    lost: int  # lost or stale
    power_w: float | None
    alerts: int

    @property
    def down(self) -> int:
        return self.hosts - self.up

    @classmethod
    def of(cls, rows: Iterable[HostSummary]) -> FleetSummary:
        rows = list(rows)
        up = [r for r in rows if r.state is HostState.UP and r.no_gpu_data is None]
        return cls(hosts=len(rows), up=len(up), gpus=sum(r.gpus for r in up),
                   busy=sum(r.busy or 0 for r in up), idle=sum(r.idle or 0 for r in up),
                   throttling=sum(r.throttling for r in up),
                   lost=sum(r.lost + r.stale for r in up),
                   power_w=_known_sum(r.power_w for r in up),
                   alerts=sum(a.count for r in rows for a in r.alerts))

    def to_dict(self) -> dict[str, Any]:
        return {"hosts": self.hosts, "hosts_up": self.up, "hosts_down": self.down,
                "gpus": self.gpus, "gpus_busy": self.busy, "gpus_idle": self.idle,
                "gpus_throttling": self.throttling, "gpus_lost_or_stale": self.lost,
                "power_w": self.power_w, "alerts_firing": self.alerts}


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
    # One row per host, problems first. `hosts` has every host's GPUs when they are read
    # directly (and for `fleet --once`); from Prometheus, only the open host's.
    summaries: tuple[HostSummary, ...] = ()
    history_s: float | None = None  # the window of the summaries' history (Prometheus)
    poll_s: float | None = None  # how long reading this snapshot took (wall clock)
    warning: str | None = None  # a part that could not be read this time (history, GPUs)
    # Prometheus: "recording rules" (its own per-host series) or "live" (aggregated per poll)
    aggregation: str | None = None

    def host(self, target: str) -> FleetHost | None:
        return next((h for h in self.hosts if h.target == target), None)

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
            "fleet": FleetSummary.of(self.summaries).to_dict(),
            "aggregation": self.aggregation,
            "history_s": self.history_s,
            "summaries": [s.to_dict() for s in self.summaries],
        }
