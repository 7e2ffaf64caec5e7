"""Reading metrics pages (gputui or dcgm-exporter) and Prometheus' query API into fleet records.

All of it blocks (urllib with a timeout) and is meant to run off the event loop:
the Textual view calls `poll()` in a thread worker, `fleet --once` calls it directly.
One host's failure is that host's state; it never stops the others.
"""

from __future__ import annotations

import contextlib
import http.client
import ipaddress
import json
import math
import re
import socket
import ssl
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterable
from concurrent.futures import Future
from concurrent.futures import wait as wait_futures
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any, Protocol

from prometheus_client.parser import text_string_to_metric_families

from gputui.fleet.model import (
    HOT_TEMP_C,
    FleetGpu,
    FleetHost,
    FleetSnapshot,
    HostReading,
    HostState,
)

DEFAULT_TIMEOUT_S = 2.0
MAX_BODY_BYTES = 32 * 1024 * 1024  # a runaway page must not eat the monitor's memory
MAX_BACKOFF_S = 60.0
MIB = 1024 * 1024
USER_AGENT = "gputui-fleet"

# The series the fleet view reads. Newer DCGM calls the throttle field CLOCKS_EVENT_REASONS.
GPU_METRICS = (
    "DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_FB_FREE", "DCGM_FI_DEV_FB_TOTAL",
    "DCGM_FI_DEV_FB_RESERVED", "DCGM_FI_DEV_POWER_USAGE", "DCGM_FI_DEV_GPU_TEMP",
    "DCGM_FI_DEV_SLOWDOWN_TEMP", "DCGM_FI_DEV_SM_CLOCK", "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS",
    "DCGM_FI_DEV_CLOCKS_EVENT_REASONS", "gputui_gpu_lost",
)
HOST_METRICS = (
    "gputui_up", "gputui_nvml_error_info", "gputui_host_cpu_percent",
    "gputui_host_memory_used_bytes", "gputui_host_memory_total_bytes",
)
_WANTED = frozenset(GPU_METRICS + HOST_METRICS)

Sample = tuple[str, dict[str, str], float]


class TargetError(ValueError):
    """Not HOST:PORT or an http(s) URL (a usage error)."""


class ScrapeError(Exception):
    def __init__(self, message: str, *, down: bool) -> None:
        super().__init__(message)
        self.down = down  # True: no answer at all; False: answered with something unusable


@dataclass(frozen=True, slots=True)
class Target:
    name: str  # what the user typed, tidied (host:port or the URL)
    url: str


_HOSTNAME = re.compile(r"^(?=.{1,253}$)[A-Za-z0-9]([A-Za-z0-9-]{0,62})"
                       r"(\.[A-Za-z0-9]([A-Za-z0-9-]{0,62}))*\.?$")


def _check_host(host: str, text: str) -> None:
    try:
        ipaddress.ip_address(host)
        return
    except ValueError:
        pass
    if not _HOSTNAME.match(host):
        raise TargetError(f"not a host name or IP address: {host!r} in {text!r}")


def _check_port(port: str, text: str) -> int:
    if not port.isdigit() or not 1 <= int(port) <= 65535:
        raise TargetError(f"not a port number (1-65535): {port!r} in {text!r}")
    return int(port)


def parse_target(text: str) -> Target:
    """`host:port` (→ http://host:port/metrics), `[v6]:port`, or a full http(s) URL."""
    raw = text.strip()
    if "://" in raw:
        parts = urllib.parse.urlsplit(raw)
        if parts.scheme not in ("http", "https"):
            raise TargetError(f"only http:// and https:// URLs are supported: {text!r}")
        try:
            host, port = parts.hostname, parts.port
        except ValueError:
            raise TargetError(f"bad port in {text!r}") from None
        if not host:
            raise TargetError(f"no host in {text!r}")
        _check_host(host, text)
        if port is not None and port == 0:
            raise TargetError(f"not a port number (1-65535): 0 in {text!r}")
        path = parts.path if parts.path not in ("", "/") else "/metrics"
        url = urllib.parse.urlunsplit((parts.scheme, parts.netloc, path, parts.query, ""))
        return Target(raw, url)
    if raw.startswith("["):
        close = raw.find("]")
        if close < 0 or raw[close + 1:close + 2] != ":":
            raise TargetError(f"not HOST:PORT: {text!r}")
        host, port_text = raw[1:close], raw[close + 2:]
        try:
            ipaddress.IPv6Address(host)
        except ValueError:
            raise TargetError(f"not an IPv6 address: {host!r} in {text!r}") from None
        port = _check_port(port_text, text)
        return Target(raw, f"http://[{host}]:{port}/metrics")
    host, sep, port_text = raw.rpartition(":")
    if not sep or not host:
        raise TargetError(f"not HOST:PORT: {text!r} (e.g. gpu-node-1:9400)")
    if ":" in host:
        raise TargetError(f"not HOST:PORT: {text!r} (write IPv6 as [::1]:9400)")
    _check_host(host, text)
    port = _check_port(port_text, text)
    return Target(raw, f"http://{host}:{port}/metrics")


# --- HTTP ------------------------------------------------------------------------------
#
# http.client directly, not urllib: urllib's timeout bounds each socket read, so a host
# that sends its headers and then one byte every second would hold a scrape forever. Here
# every request has one overall deadline: a watchdog shuts the socket down when it passes
# (that unblocks a read stuck anywhere, in the status line, the headers or the body), and
# the body is read in chunks that check the deadline too. No proxies: the fleet is reached
# directly, and an http_proxy meant for the internet must not swallow (or leak) requests to
# the monitored hosts.

MAX_REDIRECTS = 3


class _Deadline:
    """Shuts the connection's socket down once `seconds` have passed (a daemon timer)."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.end = time.monotonic() + seconds
        self.expired = threading.Event()
        self._conn: http.client.HTTPConnection | None = None
        self._lock = threading.Lock()
        self._timer = threading.Timer(seconds, self._fire)
        self._timer.daemon = True
        self._timer.start()

    def left(self) -> float:
        return self.end - time.monotonic()

    def watch(self, conn: http.client.HTTPConnection) -> None:
        with self._lock:
            self._conn = conn
        if self.expired.is_set():
            self._fire()

    def _fire(self) -> None:
        self.expired.set()
        with self._lock:
            sock = self._conn.sock if self._conn is not None else None
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)

    def check(self) -> None:
        if self.expired.is_set() or self.left() <= 0:
            raise self.error()

    def error(self) -> ScrapeError:
        return ScrapeError(f"timed out: no complete answer within {self.seconds:g} s",
                           down=True)

    def cancel(self) -> None:
        self._timer.cancel()


def _first_line(text: str) -> str:
    line = text.strip().splitlines()[0] if text.strip() else ""
    return line[:60] + ("…" if len(line) > 60 else "")


def _get_once(url: str, deadline: _Deadline) -> tuple[int, str, http.client.HTTPMessage,
                                                       bytes]:
    parts = urllib.parse.urlsplit(url)
    host = parts.hostname or ""
    timeout = max(0.001, deadline.left())
    conn: http.client.HTTPConnection
    if parts.scheme == "https":
        conn = http.client.HTTPSConnection(host, parts.port, timeout=timeout,
                                           context=ssl.create_default_context())
    else:
        conn = http.client.HTTPConnection(host, parts.port, timeout=timeout)
    deadline.watch(conn)
    try:
        path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        conn.request("GET", path, headers={
            "User-Agent": USER_AGENT, "Accept": "text/plain;version=0.0.4;q=1,*/*;q=0.1",
            "Connection": "close"})
        deadline.check()
        resp = conn.getresponse()
        chunks: list[bytes] = []
        size = 0
        while True:
            deadline.check()
            chunk = resp.read1(65536)
            if not chunk:
                break
            size += len(chunk)
            if size > MAX_BODY_BYTES:
                raise ScrapeError(f"page larger than {MAX_BODY_BYTES // MIB} MiB", down=False)
            chunks.append(chunk)
        deadline.check()  # a shutdown by the watchdog looks like an early end of the page
        return resp.status, resp.reason, resp.headers, b"".join(chunks)
    finally:
        conn.close()


def fetch_text(url: str, timeout: float = DEFAULT_TIMEOUT_S) -> str:
    """GET `url` and return its body; ScrapeError (down or not) for anything else.

    The whole exchange, connection to last byte (redirects included), ends within
    `timeout` seconds, except for a host name lookup, which no socket option can bound
    (the poller never waits for that longer than the timeout either).
    """
    deadline = _Deadline(timeout)
    try:
        for _ in range(MAX_REDIRECTS + 1):
            try:
                status, reason, headers, body = _get_once(url, deadline)
            except ScrapeError:
                raise
            except Exception as exc:
                if deadline.expired.is_set():
                    raise deadline.error() from None
                raise _http_error(exc, timeout) from None
            if status in (301, 302, 303, 307, 308) and headers.get("Location"):
                url = urllib.parse.urljoin(url, headers["Location"])
                if urllib.parse.urlsplit(url).scheme not in ("http", "https"):
                    raise ScrapeError(f"redirected to a non-HTTP URL: {url}", down=False)
                continue
            if status != 200:
                raise ScrapeError(f"HTTP {status} {reason}".rstrip(), down=False)
            charset = headers.get_content_charset() or "utf-8"
            try:
                return body.decode(charset, errors="replace")
            except LookupError:  # a charset Python does not know
                return body.decode("utf-8", errors="replace")
        raise ScrapeError(f"more than {MAX_REDIRECTS} redirects", down=False)
    finally:
        deadline.cancel()


def _http_error(exc: Exception, timeout: float) -> ScrapeError:
    if isinstance(exc, TimeoutError):
        return ScrapeError(f"timed out: no complete answer within {timeout:g} s", down=True)
    if isinstance(exc, http.client.RemoteDisconnected):
        return ScrapeError("closed the connection without answering", down=True)
    if isinstance(exc, http.client.BadStatusLine):
        said = _first_line(str(exc.args[0] if exc.args else ""))
        return ScrapeError("not an HTTP metrics endpoint" + (f" (it said {said!r})"
                                                             if said else ""), down=False)
    if isinstance(exc, http.client.IncompleteRead):
        return ScrapeError("the answer ended early (incomplete page)", down=False)
    if isinstance(exc, ssl.SSLError):
        return ScrapeError(f"TLS error: {exc.reason or exc}", down=False)
    if isinstance(exc, socket.gaierror):
        return ScrapeError(f"cannot resolve host name ({exc.strerror or exc})", down=True)
    if isinstance(exc, http.client.HTTPException):  # LineTooLong, UnknownProtocol, …
        return ScrapeError(f"not an HTTP metrics endpoint ({type(exc).__name__})",
                           down=False)
    if isinstance(exc, OSError):
        return ScrapeError(exc.strerror or str(exc) or type(exc).__name__, down=True)
    return ScrapeError(f"{type(exc).__name__}: {exc}", down=False)


# --- metrics pages -----------------------------------------------------------------------


def parse_metrics(text: str) -> HostReading:
    """One metrics page → a HostReading. ScrapeError (down=False) if it is not one."""
    samples: list[Sample] = []
    seen_any = False
    try:
        for fam in text_string_to_metric_families(text):
            seen_any = True
            for s in fam.samples:
                if s.name in _WANTED:
                    samples.append((s.name, dict(s.labels), float(s.value)))
    except Exception as exc:  # the parser raises ValueError, IndexError, … on garbage
        first = str(exc).splitlines()[0][:120] if str(exc) else type(exc).__name__
        raise ScrapeError(f"malformed metrics page: {first}", down=False) from None
    if not samples:
        what = "no DCGM_FI_DEV_* or gputui_* metrics on the page" if seen_any \
            else "empty metrics page"
        raise ScrapeError(what, down=False)
    return reading_from_samples(samples)


def _num(v: float | None) -> float | None:
    """A usable reading, or None: NaN ("no value" in Prometheus) and ±Inf are not readings."""
    return None if v is None or not math.isfinite(v) else v


# NVML's clocks-event reasons use bits 0x1..0x100 today, plus 0x8000000000000000 for
# "unknown"; 32 low bits leave room for reasons a newer driver adds.
_MASK_ROOM = 0xFFFF_FFFF | 0x8000_0000_0000_0000


def _mask(v: float | None) -> int | None:
    """A throttle bitmask, or None when the value cannot be one (negative, fractional,
    infinite, NaN, or bits no NVML reason could set): decoding it would invent reasons."""
    v = _num(v)
    if v is None or v < 0 or v != int(v):
        return None
    m = int(v)
    return m if m & ~_MASK_ROOM == 0 else None


def reading_from_samples(samples: Iterable[Sample]) -> HostReading:
    """Build one host's reading from (name, labels, value) series, whichever the source."""
    per_gpu: dict[tuple[str, str], dict[str, Any]] = {}
    host: dict[str, Any] = {}
    hostname: str | None = None
    exporter: str | None = None
    for name, labels, value in samples:
        if name.startswith("gputui_"):
            exporter = "gputui"
        elif exporter is None:
            exporter = "dcgm-exporter"
        if name in HOST_METRICS:
            if name == "gputui_nvml_error_info":
                host["nvml_error"] = labels.get("reason") or "NVML unavailable"
            else:
                host[name] = value
            hostname = hostname or labels.get("Hostname")
            continue
        key = (labels.get("gpu", ""), labels.get("UUID", ""))
        g = per_gpu.setdefault(key, {"model": labels.get("modelName", "")})
        g.setdefault(name, value)  # first series wins (MIG adds per-instance duplicates)
        hostname = hostname or labels.get("Hostname")
    gpus = []
    for (index, uuid), g in per_gpu.items():
        used = _num(g.get("DCGM_FI_DEV_FB_USED"))
        free = _num(g.get("DCGM_FI_DEV_FB_FREE"))
        total = _num(g.get("DCGM_FI_DEV_FB_TOTAL"))
        if total is None and used is not None and free is not None:
            total = used + free + (_num(g.get("DCGM_FI_DEV_FB_RESERVED")) or 0)
        mask = _mask(g.get("DCGM_FI_DEV_CLOCK_THROTTLE_REASONS",
                           g.get("DCGM_FI_DEV_CLOCKS_EVENT_REASONS")))
        gpus.append(FleetGpu(
            gpu=index, uuid=uuid, model=g["model"],
            util_pct=_num(g.get("DCGM_FI_DEV_GPU_UTIL")),
            mem_used_bytes=None if used is None else int(used * MIB),
            mem_total_bytes=None if total is None else int(total * MIB),
            power_w=_num(g.get("DCGM_FI_DEV_POWER_USAGE")),
            temp_c=_num(g.get("DCGM_FI_DEV_GPU_TEMP")),
            slowdown_temp_c=_num(g.get("DCGM_FI_DEV_SLOWDOWN_TEMP")),
            clock_sm_mhz=_num(g.get("DCGM_FI_DEV_SM_CLOCK")),
            throttle_mask=mask,
            lost=bool(_num(g.get("gputui_gpu_lost"))),
        ))
    gpus.sort(key=lambda x: x.sort_key)
    mem_used = _num(host.get("gputui_host_memory_used_bytes"))
    mem_total = _num(host.get("gputui_host_memory_total_bytes"))
    return HostReading(
        gpus=tuple(gpus), hostname=hostname, exporter=exporter,
        nvml_error=host.get("nvml_error"),
        cpu_pct=_num(host.get("gputui_host_cpu_percent")),
        mem_used_bytes=None if mem_used is None else int(mem_used),
        mem_total_bytes=None if mem_total is None else int(mem_total),
    )


def scrape(target: Target, timeout: float = DEFAULT_TIMEOUT_S) -> HostReading:
    return parse_metrics(fetch_text(target.url, timeout))


# --- polling many targets --------------------------------------------------------------


class Poller(Protocol):
    """What the CLI and the Textual view need: a blocking poll, and close at the end."""

    def poll(self, force: bool = False) -> FleetSnapshot: ...

    def close(self) -> None: ...


def backoff_s(failures: int, interval: float, cap: float = MAX_BACKOFF_S) -> float:
    """Wait before retrying a host that failed `failures` times in a row: interval, 2×, 4×…"""
    if failures <= 0:
        return 0.0
    return min(max(cap, interval), interval * 2 ** min(failures - 1, 16))


@dataclass
class _TargetState:
    target: Target
    host: FleetHost
    next_at: float = 0.0  # (injected) clock time of the next attempt
    inflight: Future[HostReading] | None = None
    wait_until: float = 0.0  # time.monotonic() after which the poll stops waiting for it
    reported: bool = False  # the in-flight attempt was already reported as timed out


def run_in_daemon_thread(fn: Callable[..., HostReading], *args: Any) -> Future[HostReading]:
    """Run fn(*args) on a new daemon thread; its Future carries the result.

    Not a ThreadPoolExecutor: its workers are joined when the interpreter exits, so one
    request stuck in a host name lookup would keep `fleet --once` (or the TUI after `q`)
    alive. A daemon thread dies with the process.
    """
    fut: Future[HostReading] = Future()

    def run() -> None:
        if not fut.set_running_or_notify_cancel():
            return
        try:
            result = fn(*args)
        except BaseException as exc:  # handed to whoever reads the future
            fut.set_exception(exc)
        else:
            fut.set_result(result)

    threading.Thread(target=run, name="gputui-scrape", daemon=True).start()
    return fut


# How long past its deadline the poll waits for a request's own timeout error to arrive.
_GRACE_S = 0.2


class FleetPoller:
    """Scrapes every due target concurrently; remembers state, last-seen and backoff.

    `poll()` returns within about `timeout` seconds whatever the hosts do, and is safe
    to call from a worker thread; calls are serialised by a lock. A host whose request
    is still running at the deadline is reported as timed out and retried (with backoff)
    once that request has ended; each request ends by its own deadline.
    """

    def __init__(self, targets: Iterable[Target], *, interval: float = 2.0,
                 timeout: float = DEFAULT_TIMEOUT_S, hot_temp_c: float = HOT_TEMP_C,
                 clock: Callable[[], float] = time.monotonic,
                 scrape_fn: Callable[[Target, float], HostReading] = scrape) -> None:
        self.interval = interval
        self.timeout = timeout
        self.hot_temp_c = hot_temp_c
        self._clock = clock
        self._scrape = scrape_fn
        self._states = [_TargetState(t, FleetHost(target=t.name, url=t.url)) for t in targets]
        self._lock = threading.Lock()

    def _timed_out(self) -> ScrapeError:
        return ScrapeError(f"timed out: no complete answer within {self.timeout:g} s",
                           down=True)

    def poll(self, force: bool = False) -> FleetSnapshot:
        with self._lock:
            now = self._clock()
            for st in self._states:
                if st.inflight is None and (force or st.next_at <= now):
                    st.inflight = run_in_daemon_thread(self._scrape, st.target, self.timeout)
                    st.wait_until = time.monotonic() + self.timeout + _GRACE_S
                    st.reported = False
            # Wait for the requests started now; one that was already reported as timed
            # out (a lookup that hangs) does not hold up the others any longer.
            waiting = [st for st in self._states if st.inflight is not None and not st.reported]
            if waiting:
                left = max(st.wait_until for st in waiting) - time.monotonic()
                wait_futures([st.inflight for st in waiting if st.inflight is not None],
                             timeout=max(0.0, left))
            now = self._clock()
            for st in self._states:
                fut = st.inflight
                if fut is None:
                    if st.host.state is HostState.DOWN:
                        st.host = replace(st.host, retry_in_s=max(0.0, st.next_at - now))
                    continue
                if not fut.done():
                    if not st.reported or now >= st.next_at:
                        self._failed(st, self._timed_out(), now)
                        st.reported = True
                    continue
                st.inflight = None
                reported, st.reported = st.reported, False
                try:
                    reading = fut.result()
                except ScrapeError as exc:
                    if not reported:  # else it was counted when the poll gave up on it
                        self._failed(st, exc, now)
                except Exception as exc:  # a bug in parsing one page stays with that host
                    if not reported:
                        self._failed(st, ScrapeError(f"{type(exc).__name__}: {exc}",
                                                     down=False), now)
                else:
                    st.host = FleetHost(target=st.target.name, url=st.target.url,
                                        state=HostState.UP, reading=reading,
                                        last_seen=datetime.now(UTC))
                    st.next_at = now
            return FleetSnapshot(time=datetime.now(UTC), source="targets",
                                 hosts=tuple(st.host for st in self._states),
                                 hot_temp_c=self.hot_temp_c)

    def _failed(self, st: _TargetState, exc: ScrapeError, now: float) -> None:
        failures = st.host.failures + 1
        if exc.down:
            wait = backoff_s(failures, self.interval)
            state = HostState.DOWN
        else:
            wait = 0.0  # it answers: ask again next interval, no need to back off
            state = HostState.ERROR
        st.next_at = now + wait
        last = st.host.reading
        st.host = FleetHost(target=st.target.name, url=st.target.url, state=state,
                            # No readings, but the name it last gave itself stays.
                            reading=HostReading(hostname=last.hostname, exporter=last.exporter),
                            error=str(exc), last_seen=st.host.last_seen, failures=failures,
                            retry_in_s=wait if exc.down else None)

    def close(self) -> None:
        pass  # requests still running are on daemon threads and end by their deadline


# --- Prometheus' HTTP API --------------------------------------------------------------


def prometheus_query_url(base: str, query: str) -> str:
    return base.rstrip("/") + "/api/v1/query?" + urllib.parse.urlencode({"query": query})


def parse_prometheus_url(text: str) -> str:
    raw = text.strip()
    if "://" not in raw:
        raw = "http://" + raw
    parts = urllib.parse.urlsplit(raw)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise TargetError(f"not a Prometheus URL: {text!r} (e.g. http://prometheus:9090)")
    try:
        parts.port  # noqa: B018 -- raises on a bad port
    except ValueError:
        raise TargetError(f"bad port in {text!r}") from None
    _check_host(parts.hostname, text)
    return urllib.parse.urlunsplit((parts.scheme, parts.netloc, parts.path.rstrip("/"), "", ""))


GPU_SERIES_QUERY = '{__name__=~"%s"}' % "|".join(GPU_METRICS + HOST_METRICS)  # noqa: UP031


def query_prometheus(base: str, query: str, timeout: float = DEFAULT_TIMEOUT_S
                     ) -> list[dict[str, Any]]:
    """The `result` list of an instant query; ScrapeError when the server fails."""
    text = fetch_text(prometheus_query_url(base, query), timeout)
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
    return data["result"]


def _series(result: list[dict[str, Any]]) -> Iterable[tuple[dict[str, str], float]]:
    for item in result:
        try:
            labels = dict(item["metric"])
            value = float(item["value"][1])
        except (KeyError, IndexError, TypeError, ValueError):
            continue
        yield labels, value


class PrometheusPoller:
    """The same fleet, read from a Prometheus server instead of each host.

    Hosts are grouped by the `instance` label (two exporters on one machine stay
    apart), named by their `Hostname` label. A host is unreadable when Prometheus' own
    `up` series for it is 0, in a job that has served GPU metrics; why is Prometheus'
    own `lastError` for that target (from /api/v1/targets). One poll, all its queries
    together, ends within `timeout` seconds.
    """

    def __init__(self, url: str, *, interval: float = 2.0, timeout: float = DEFAULT_TIMEOUT_S,
                 hot_temp_c: float = HOT_TEMP_C) -> None:
        self.url = url
        self.interval = interval
        self.timeout = timeout
        self.hot_temp_c = hot_temp_c
        self._gpu_jobs: set[str] = set()
        self._last_seen: dict[str, datetime] = {}
        self._last_reading: dict[str, HostReading] = {}
        self._lock = threading.Lock()

    def poll(self, force: bool = False) -> FleetSnapshot:
        with self._lock:
            now = datetime.now(UTC)
            end = time.monotonic() + self.timeout

            def left() -> float:
                remaining = end - time.monotonic()
                if remaining <= 0:
                    raise ScrapeError(f"timed out: no complete answer within "
                                      f"{self.timeout:g} s", down=True)
                return remaining

            try:
                series = query_prometheus(self.url, GPU_SERIES_QUERY, left())
                up = query_prometheus(self.url, "up", left())
            except ScrapeError as exc:
                return FleetSnapshot(time=now, source=self.url, hot_temp_c=self.hot_temp_c,
                                     error=f"Prometheus at {self.url}: {exc}")
            groups: dict[str, list[Sample]] = {}
            for labels, value in _series(series):
                name = labels.pop("__name__", "")
                instance = labels.get("instance") or labels.get("Hostname") or "?"
                if "job" in labels:
                    self._gpu_jobs.add(labels["job"])
                groups.setdefault(instance, []).append((name, labels, value))
            hosts: dict[str, FleetHost] = {}
            for instance, samples in groups.items():
                reading = reading_from_samples(samples)
                self._last_seen[instance] = now
                self._last_reading[instance] = reading
                hosts[instance] = FleetHost(target=instance, url=None, state=HostState.UP,
                                            reading=reading, last_seen=now)
            failing = [(labels.get("instance", "?"), labels.get("job", ""))
                       for labels, value in _series(up)
                       if value == 0 and labels.get("job") in self._gpu_jobs]
            reasons: dict[tuple[str, str], str] = {}
            if failing:
                try:
                    reasons = prometheus_target_errors(self.url, left())
                except ScrapeError:
                    pass  # the generic reason below will do
            for instance, job in failing:
                why = reasons.get((instance, job))
                last = self._last_reading.get(instance, HostReading())
                hosts[instance] = FleetHost(
                    target=instance, url=None,
                    state=HostState.DOWN if why is None or unreachable(why) else HostState.ERROR,
                    reading=HostReading(hostname=last.hostname, exporter=last.exporter),
                    error=f"Prometheus: {why}" if why
                    else "Prometheus cannot scrape it (up == 0)",
                    last_seen=self._last_seen.get(instance))
            ordered = tuple(hosts[k] for k in sorted(hosts))
            return FleetSnapshot(time=now, source=self.url, hosts=ordered,
                                 hot_temp_c=self.hot_temp_c)

    def close(self) -> None:
        pass


# Prometheus' (Go's) words for a scrape that got no answer, as opposed to a bad one.
_UNREACHABLE = ("dial tcp", "connection refused", "context deadline exceeded", "i/o timeout",
                "no such host", "connection reset", "no route to host",
                "network is unreachable", ": EOF")


def unreachable(last_error: str) -> bool:
    """True when Prometheus' lastError says the target did not answer at all."""
    low = last_error.lower()
    return any(w.lower() in low for w in _UNREACHABLE)


def prometheus_target_errors(base: str, timeout: float = DEFAULT_TIMEOUT_S
                             ) -> dict[tuple[str, str], str]:
    """{(instance, job): lastError} for the active targets whose last scrape failed."""
    text = fetch_text(base.rstrip("/") + "/api/v1/targets?state=active", timeout)
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
