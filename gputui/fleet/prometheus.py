"""The fleet read from a Prometheus server's HTTP API instead of from each host."""

from __future__ import annotations

import json
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime

from gputui.fleet import metric_names as mn
from gputui.fleet.errors import ScrapeError
from gputui.fleet.fetch import DEFAULT_TIMEOUT_S, fetch_text
from gputui.fleet.model import HOT_TEMP_C, FleetHost, FleetSnapshot, HostReading, HostState
from gputui.fleet.page import Series
from gputui.fleet.readings import GPU_SERIES, HOST_SERIES, reading_from_series

GPU_SERIES_QUERY = '{__name__=~"%s"}' % "|".join(GPU_SERIES + HOST_SERIES)  # noqa: UP031


@dataclass(frozen=True, slots=True)
class TargetFailure:
    """A target whose last scrape by Prometheus failed (`up == 0`)."""

    instance: str
    job: str


def prometheus_query_url(base: str, query: str) -> str:
    return base.rstrip("/") + "/api/v1/query?" + urllib.parse.urlencode({"query": query})


def query_prometheus(base: str, query: str, timeout: float = DEFAULT_TIMEOUT_S,
                     auth: str | None = None) -> list[Series]:
    """The series of an instant query; ScrapeError when the server fails."""
    text = fetch_text(prometheus_query_url(base, query), timeout, auth)
    try:
        doc = json.loads(text)
    except ValueError:
        raise ScrapeError("Prometheus answered with something that is not JSON",
                          down=False) from None
    if not isinstance(doc, dict) or doc.get("status") != "success":
        err = doc.get("error") if isinstance(doc, dict) else None
        raise ScrapeError(f"Prometheus query failed: {err or 'unexpected answer'}", down=False)
    data = doc.get("data") or {}
    if data.get("resultType") != "vector" or not isinstance(data.get("result"), list):
        raise ScrapeError("Prometheus answered with an unexpected result type", down=False)
    return list(_series(data["result"]))


def _series(result: Iterable[object]) -> Iterable[Series]:
    for item in result:
        try:
            labels = {str(k): str(v) for k, v in item["metric"].items()}  # type: ignore[index]
            value = float(item["value"][1])  # type: ignore[index]
        except (KeyError, IndexError, TypeError, ValueError, AttributeError):
            continue
        yield Series(labels.pop("__name__", ""), labels, value)


# Prometheus' (Go's) words for a scrape that got no answer, as opposed to a bad one.
_UNREACHABLE = ("dial tcp", "connection refused", "context deadline exceeded", "i/o timeout",
                "no such host", "connection reset", "no route to host",
                "network is unreachable", ": EOF")


def unreachable(last_error: str) -> bool:
    """True when Prometheus' lastError says the target did not answer at all."""
    low = last_error.lower()
    return any(w.lower() in low for w in _UNREACHABLE)


def prometheus_target_errors(base: str, timeout: float = DEFAULT_TIMEOUT_S,
                             auth: str | None = None) -> dict[tuple[str, str], str]:
    """{(instance, job): lastError} for the active targets whose last scrape failed."""
    text = fetch_text(base.rstrip("/") + "/api/v1/targets?state=active", timeout, auth)
    try:
        doc = json.loads(text)
        targets = doc["data"]["activeTargets"]
    except (ValueError, KeyError, TypeError):
        raise ScrapeError("Prometheus answered /api/v1/targets with something unexpected",
                          down=False) from None
    out: dict[tuple[str, str], str] = {}
    for t in targets if isinstance(targets, list) else ():
        if not isinstance(t, dict):
            continue
        labels = t.get("labels") or {}
        err = t.get("lastError")
        if isinstance(labels, dict) and isinstance(err, str) and err.strip():
            out[(str(labels.get("instance", "")), str(labels.get("job", "")))] = err.strip()
    return out


class PrometheusPoller:
    """The same fleet, read from a Prometheus server instead of each host.

    Hosts are grouped by the `instance` label (two exporters on one machine stay
    apart), named by their `hostname` (or older `Hostname`) label. A host is unreadable
    when Prometheus' own `up` series for it is 0, in a job that has served GPU metrics;
    why is Prometheus'
    own `lastError` for that target (from /api/v1/targets). One poll, all its queries
    together, ends within `timeout` seconds. Live, one daemon thread polls every
    `interval` seconds.
    """

    def __init__(self, url: str, *, interval: float = 2.0, timeout: float = DEFAULT_TIMEOUT_S,
                 hot_temp_c: float = HOT_TEMP_C, auth: str | None = None) -> None:
        self.url = url
        self._auth = auth  # basic auth's Authorization value, or None
        self.interval = interval
        self.timeout = timeout
        self.hot_temp_c = hot_temp_c
        self._gpu_jobs: set[str] = set()
        self._last_seen: dict[str, datetime] = {}
        self._last_reading: dict[str, HostReading] = {}
        self._lock = threading.Lock()  # one poll at a time
        self._latest: FleetSnapshot | None = None  # until the first poll has ended
        self._stop = threading.Event()
        self._wake = threading.Event()

    def poll(self, force: bool = False) -> FleetSnapshot:
        with self._lock:
            try:
                snap = self._poll()
            except Exception as exc:  # a bug must not end the live loop: say it, go on
                snap = FleetSnapshot(time=datetime.now(UTC), source=self.url,
                                     hot_temp_c=self.hot_temp_c,
                                     error=f"reading Prometheus failed: "
                                     f"{type(exc).__name__}: {exc}")
            self._latest = snap
            return snap

    def start(self, notify: Callable[[], object]) -> None:
        def run() -> None:
            while not self._stop.is_set():
                self.poll()
                notify()
                if self._wake.wait(self.interval):
                    self._wake.clear()

        threading.Thread(target=run, name="gputui-fleet-prometheus", daemon=True).start()

    def snapshot(self) -> FleetSnapshot | None:
        return self._latest

    def refresh(self) -> None:
        self._wake.set()

    def close(self) -> None:
        self._stop.set()
        self._wake.set()

    def _poll(self) -> FleetSnapshot:
        now = datetime.now(UTC)
        end = time.monotonic() + self.timeout

        def left() -> float:
            remaining = end - time.monotonic()
            if remaining <= 0:
                raise ScrapeError(f"timed out: no complete answer within {self.timeout:g} s",
                                  down=True)
            return remaining

        try:
            series = query_prometheus(self.url, GPU_SERIES_QUERY, left(), self._auth)
            up = query_prometheus(self.url, "up", left(), self._auth)
        except ScrapeError as exc:
            return FleetSnapshot(time=now, source=self.url, hot_temp_c=self.hot_temp_c,
                                 error=f"Prometheus at {self.url}: {exc}")
        groups: dict[str, list[Series]] = {}
        for s in series:
            instance = (s.labels.get("instance") or s.labels.get(mn.HOSTNAME_LABEL)
                        or s.labels.get(mn.LEGACY_HOSTNAME_LABEL) or "?")
            if "job" in s.labels:
                self._gpu_jobs.add(s.labels["job"])
            groups.setdefault(instance, []).append(s)
        hosts: dict[str, FleetHost] = {}
        for instance, group in groups.items():
            reading = reading_from_series(group)
            self._last_seen[instance] = now
            self._last_reading[instance] = reading
            hosts[instance] = FleetHost(target=instance, url=None, state=HostState.UP,
                                        reading=reading, last_seen=now)
        failing = [TargetFailure(s.labels.get("instance", "?"), s.labels.get("job", ""))
                   for s in up if s.value == 0 and s.labels.get("job") in self._gpu_jobs]
        reasons: dict[tuple[str, str], str] = {}
        if failing:
            try:
                reasons = prometheus_target_errors(self.url, left(), self._auth)
            except ScrapeError:
                pass  # the generic reason below will do
        for f in failing:
            why = reasons.get((f.instance, f.job))
            last = self._last_reading.get(f.instance, HostReading())
            hosts[f.instance] = FleetHost(
                target=f.instance, url=None,
                state=HostState.DOWN if why is None or unreachable(why) else HostState.ERROR,
                reading=HostReading(hostname=last.hostname, exporter=last.exporter),
                error=f"Prometheus: {why}" if why else "Prometheus cannot scrape it (up == 0)",
                last_seen=self._last_seen.get(f.instance))
        ordered = tuple(hosts[k] for k in sorted(hosts))
        return FleetSnapshot(time=now, source=self.url, hosts=ordered,
                             hot_temp_c=self.hot_temp_c)
