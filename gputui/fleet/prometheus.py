"""The fleet read from a Prometheus server: one row per host, aggregated by Prometheus.

Each poll sends one instant query for every host's figures (`host_queries.fleet_query`,
each aggregated `by (instance)`), the GPU-level series of the host that is open (and of
every host only for `fleet --once`), and, every `HistoryWindow.every_s`, one range query
for the hosts' utilisation over the last hour. So what travels and what is parsed grows
with the hosts, not with their GPUs' series. The figures that aggregate every GPU series
are read from the recording rules of deploy/prometheus/gputui-fleet.yml where Prometheus
has them (evaluated once per rule interval, however many views are open); where it has
not, the same expressions are evaluated at each poll, and looked for again every
`RECORDED_RECHECK_S`. A host is unreadable when Prometheus' own
`up` for it is 0, in a job that has served GPU metrics; why is Prometheus' own
`lastError` for that target (from /api/v1/targets, read again when the failing targets
change). One poll, all its queries together, ends within `timeout` seconds. Live, one
daemon thread polls every `interval` seconds.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime

from gputui.fleet.errors import ScrapeError
from gputui.fleet.fetch import DEFAULT_TIMEOUT_S
from gputui.fleet.host_queries import (
    BY,
    HostFigures,
    collect,
    fleet_query,
    history_query,
    host_gpus_query,
    summary_of,
)
from gputui.fleet.model import (
    HOT_TEMP_C,
    FleetHost,
    FleetSnapshot,
    HostReading,
    HostState,
    HostSummary,
    problems_first,
)
from gputui.fleet.page import Series
from gputui.fleet.prometheus_api import (
    prometheus_target_errors,
    query_prometheus,
    query_range,
    query_result,
    unreachable,
)
from gputui.fleet.readings import reading_from_series

REASONS_EVERY_S = 30.0  # Prometheus' reasons for failing targets, read again at least this often
RECORDED_RECHECK_S = 60.0  # without recording rules: how often to look for them again
RULES_FILE = "deploy/prometheus/gputui-fleet.yml"


@dataclass(frozen=True, slots=True)
class HistoryWindow:
    """The history column: `points` means over `seconds`, read again every `every_s`."""

    seconds: float = 3600.0
    points: int = 12
    every_s: float = 30.0

    @property
    def step_s(self) -> float:
        return self.seconds / self.points


def short_error(last_error: str) -> str:
    """Prometheus' lastError without the request it repeats (`Get "URL": `): the row
    already says which target."""
    return re.sub(r'^Get "[^"]*": ', "", last_error)


class PrometheusPoller:
    def __init__(self, url: str, *, interval: float = 2.0, timeout: float = DEFAULT_TIMEOUT_S,
                 hot_temp_c: float = HOT_TEMP_C, auth: str | None = None,
                 every_gpu: bool = False, history: HistoryWindow | None = None,
                 recorded: bool = True, clock: Callable[[], float] = time.monotonic) -> None:
        self.url = url
        self._auth = auth  # basic auth's Authorization value, or None
        self.interval = interval
        self.timeout = timeout
        self.hot_temp_c = hot_temp_c
        self.every_gpu = every_gpu  # `fleet --once`: every GPU, as JSON has always listed them
        self.history = history or HistoryWindow()
        self._clock = clock
        # The recording rules' series first (False: aggregate at each poll, always).
        self.use_recorded = recorded
        self._recorded = recorded
        self._recorded_tried = 0.0
        self._open: str | None = None  # the instance whose GPUs the view shows
        self._gpu_jobs: set[str] = set()
        self._names: dict[str, str] = {}
        self._last_seen: dict[str, datetime] = {}
        self._history: dict[str, tuple[float | None, ...]] = {}
        self._history_at: float | None = None
        self._reasons: dict[tuple[str, str], str] = {}
        self._reasons_for: frozenset[tuple[str, str]] = frozenset()
        self._reasons_at = 0.0
        self._lock = threading.Lock()  # one poll at a time
        self._latest: FleetSnapshot | None = None  # until the first poll has ended
        self._polled_at = 0.0  # time.monotonic() when the latest poll ended
        self._stop = threading.Event()
        self._wake = threading.Event()

    def poll(self, force: bool = False, *, quick: bool = False) -> FleetSnapshot:
        """One read of Prometheus; not forced, one that ended under half an interval ago
        (`prefetch`'s) is answer enough. `quick`: the hosts only, as soon as can be (the
        hour's history and why targets fail come with the next read)."""
        with self._lock:
            started = time.monotonic()
            if (not force and self._latest is not None
                    and started - self._polled_at < self.interval / 2):
                return self._latest
            try:
                snap = self._poll(started, quick)
            except Exception as exc:  # a bug must not end the live loop: say it, go on
                snap = FleetSnapshot(time=datetime.now(UTC), source=self.url,
                                     hot_temp_c=self.hot_temp_c,
                                     error=f"reading Prometheus failed: "
                                     f"{type(exc).__name__}: {exc}")
            snap = replace(snap, poll_s=time.monotonic() - started)
            self._latest = snap
            self._polled_at = time.monotonic()
            return snap

    def prefetch(self) -> None:
        """Read the hosts now, on a daemon thread: the view starts meanwhile, and its first
        screen shows them."""
        threading.Thread(target=self.poll, kwargs={"quick": True}, daemon=True,
                         name="gputui-fleet-prefetch").start()

    def start(self, notify: Callable[[], object]) -> None:
        def run() -> None:
            force = False
            quick = True  # the first screen as soon as can be
            while not self._stop.is_set():
                snap = self.poll(force, quick=quick)
                notify()
                if quick:
                    force, quick = True, False  # and the rest right after it
                    continue
                # Every `interval` from start to start; a slow Prometheus still gets a
                # breather between polls.
                took = snap.poll_s or 0.0
                force = self._wake.wait(max(self.interval - took, self.interval / 4))
                self._wake.clear()

        threading.Thread(target=run, name="gputui-fleet-prometheus", daemon=True).start()

    def snapshot(self) -> FleetSnapshot | None:
        return self._latest

    def refresh(self) -> None:
        self._wake.set()

    def open(self, target: str | None) -> None:
        """Read this host's GPUs from now on (None: no host's); asks at once."""
        if target != self._open:
            self._open = target
            self._wake.set()

    def close(self) -> None:
        self._stop.set()
        self._wake.set()

    # --- one poll ------------------------------------------------------------------------

    def _poll(self, started: float, quick: bool) -> FleetSnapshot:
        now = datetime.now(UTC)
        end = started + self.timeout

        def left() -> float:
            remaining = end - time.monotonic()
            if remaining <= 0:
                raise ScrapeError(f"timed out: no complete answer within {self.timeout:g} s",
                                  down=True)
            return remaining

        try:
            figures = self._read_figures(left)
        except ScrapeError as exc:
            error = f"Prometheus at {self.url}: {exc}"
            last = self._latest
            if last is None or (last.error is not None and not last.summaries):
                return FleetSnapshot(time=now, source=self.url, hot_temp_c=self.hot_temp_c,
                                     error=error)
            # A slow or failed read once: keep showing the last one (its time says when).
            return replace(last, error=error, poll_s=None)
        warnings = []
        for instance, h in figures.items():
            if h.name:
                self._names[instance] = h.name
            if h.job and not h.down:
                self._gpu_jobs.add(h.job)
        try:
            if not quick:
                self._read_history(left)
        except ScrapeError as exc:
            warnings.append(f"history not read: {exc}")
        failing = frozenset((i, h.job or "") for i, h in figures.items()
                            if h.down and h.job in self._gpu_jobs)
        try:
            if not quick:
                self._read_reasons(failing, left)
        except ScrapeError:
            pass  # the generic reason below will do
        summaries: list[HostSummary] = []
        empty = (None,) * self.history.points
        for instance, h in figures.items():
            history = self._history.get(instance, empty)
            if h.down:
                if (instance, h.job or "") not in failing:
                    continue  # not a GPU exporter's target
                why = self._reasons.get((instance, h.job or ""))
                summaries.append(HostSummary(
                    target=instance, name=self._names.get(instance, instance),
                    state=HostState.DOWN if why is None or unreachable(why) else HostState.ERROR,
                    error=f"Prometheus: {short_error(why)}" if why
                    else "Prometheus cannot scrape it (up == 0)",
                    last_seen=self._last_seen.get(instance), alerts=tuple(h.alerts),
                    history=history))
                continue
            if "gpus" not in h.values and "no_gpu_data" not in h.values:
                continue  # no GPU series: not a GPU host (its alerts are another's)
            self._last_seen[instance] = now
            summaries.append(summary_of(instance, h, name=self._names.get(instance),
                                        hot_temp_c=self.hot_temp_c, last_seen=now,
                                        history=history))
        hosts: tuple[FleetHost, ...] = ()
        want = [s for s in summaries if self.every_gpu or s.target == self._open]
        if want:
            try:
                hosts = self._read_gpus(want, now, left)
            except ScrapeError as exc:
                warnings.append(f"GPUs not read: {exc}")
        if not self._recorded and time.monotonic() - started > self.interval / 2:
            warnings.append(f"aggregating every GPU series at each refresh is slow here: "
                            f"load {RULES_FILE} into Prometheus")
        return FleetSnapshot(time=now, source=self.url, hosts=hosts,
                             hot_temp_c=self.hot_temp_c,
                             summaries=tuple(problems_first(summaries)),
                             history_s=self.history.seconds,
                             aggregation="recording rules" if self._recorded else "live",
                             warning="; ".join(warnings) or None)

    def _read_figures(self, left: Callable[[], float]) -> dict[str, HostFigures]:
        """Every host's figures: from the recording rules where Prometheus has them."""
        mono = self._clock()
        if (self.use_recorded and not self._recorded
                and mono - self._recorded_tried >= RECORDED_RECHECK_S):
            self._recorded = True  # look for them again
        if self._recorded:
            figures = collect(query_result(self.url, fleet_query(recorded=True), left(),
                                           self._auth))
            if any("gpus" in h.values for h in figures.values()):
                return figures
            self._recorded = False  # not loaded (or not evaluated yet)
            self._recorded_tried = mono
        return collect(query_result(self.url, fleet_query(recorded=False), left(),
                                    self._auth))

    def _read_gpus(self, rows: list[HostSummary], now: datetime,
                   left: Callable[[], float]) -> tuple[FleetHost, ...]:
        """The GPU-level reading of the open host (or of every host, for --once)."""
        series = query_prometheus(self.url, host_gpus_query(
            None if self.every_gpu else rows[0].target), left(), self._auth)
        groups: dict[str, list[Series]] = {}
        for s in series:
            groups.setdefault(s.labels.get(BY, "?"), []).append(s)
        hosts = []
        for row in sorted(rows, key=lambda r: r.target):
            if row.state is not HostState.UP:
                hosts.append(FleetHost(target=row.target, url=None, state=row.state,
                                       reading=HostReading(hostname=self._names.get(row.target)),
                                       error=row.error, last_seen=row.last_seen))
                continue
            reading = reading_from_series(groups.get(row.target, ()))
            if reading.nvml_error is None and row.no_gpu_data and not reading.gpus:
                reading = replace(reading, nvml_error=row.no_gpu_data)
            hosts.append(FleetHost(target=row.target, url=None, state=HostState.UP,
                                   reading=reading, last_seen=now))
        return tuple(hosts)

    def _read_history(self, left: Callable[[], float]) -> None:
        w = self.history
        mono = self._clock()
        if self._history_at is not None and mono - self._history_at < w.every_s:
            return
        end = time.time()
        start = end - w.step_s * (w.points - 1)
        rows = query_range(self.url, history_query(w.step_s, recorded=self._recorded),
                           start=start, end=end,
                           step=w.step_s, timeout=left(), auth=self._auth)
        history: dict[str, tuple[float | None, ...]] = {}
        for r in rows:
            instance = r.labels.get(BY)
            if instance is None:
                continue
            points: list[float | None] = [None] * w.points
            for t, v in r.points:
                i = round((t - start) / w.step_s)
                if 0 <= i < w.points:
                    points[i] = v
            history[instance] = tuple(points)
        self._history = history
        self._history_at = mono

    def _read_reasons(self, failing: frozenset[tuple[str, str]],
                      left: Callable[[], float]) -> None:
        """Prometheus' lastError of each failing target: read when they change."""
        mono = self._clock()
        if not failing or (failing <= self._reasons_for
                           and mono - self._reasons_at < REASONS_EVERY_S):
            return
        self._reasons = prometheus_target_errors(self.url, left(), self._auth)
        self._reasons_for = failing
        self._reasons_at = mono

