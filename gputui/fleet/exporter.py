"""`gputui export`: the latest Snapshot as Prometheus metrics, named as dcgm-exporter names them.

The HTTP handler never calls NVML: a running Sampler reads the GPUs on its own
thread at a fixed interval, and a scrape only formats the latest immutable
Snapshot plus counters accumulated from the ticks. Existing Grafana dashboards
written for NVIDIA's dcgm-exporter work unchanged because the names, units and
labels (`gpu`, `UUID`, `device`, `modelName`, `Hostname`, `pci_bus_id`) match.
"""

from __future__ import annotations

import errno
import ipaddress
import socket
import socketserver
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector, CollectorRegistry
from prometheus_client.utils import floatToGoString

from gputui.telemetry.model import GpuSample, Snapshot
from gputui.telemetry.throttle import REASONS, THROTTLE_MASK, is_throttling

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 9400  # dcgm-exporter's port: dashboards and scrape configs expect it
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
MIB = 1024 * 1024

GPU_LABELS = ("gpu", "UUID", "device", "modelName", "Hostname", "pci_bus_id")
THROTTLING_REASONS = tuple(r for r in REASONS if r.throttling)


# --- --listen parsing ------------------------------------------------------------------


class ListenAddressError(ValueError):
    """A --listen value that is not HOST:PORT (a usage error, exit 2)."""


@dataclass(frozen=True, slots=True)
class ListenAddress:
    host: str  # an IP literal; "" never appears (all interfaces is "0.0.0.0")
    port: int

    @property
    def family(self) -> socket.AddressFamily:
        return socket.AF_INET6 if ":" in self.host else socket.AF_INET

    def url(self, port: int | None = None) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port if port is None else port}/metrics"


def parse_listen(text: str) -> ListenAddress:
    """`127.0.0.1:9400`, `[::1]:9400`, `localhost:9400`, `:9400` (all interfaces) or `9400`.

    Only IP literals and `localhost` are accepted as hosts: an exporter binds to an
    address of this machine, and resolving other names could block on DNS.
    """
    raw = text.strip()
    if not raw:
        raise ListenAddressError("empty --listen address (expected HOST:PORT)")
    if raw.isdigit():
        host, port_text = DEFAULT_HOST, raw
    elif raw.startswith("["):
        close = raw.find("]")
        if close < 0 or raw[close + 1:close + 2] != ":":
            raise ListenAddressError(f"not HOST:PORT: {text!r} (IPv6 looks like [::1]:9400)")
        host, port_text = raw[1:close], raw[close + 2:]
    else:
        host, sep, port_text = raw.rpartition(":")
        if not sep:
            raise ListenAddressError(f"not HOST:PORT: {text!r}")
        if ":" in host:
            raise ListenAddressError(f"not HOST:PORT: {text!r} (write IPv6 as [::1]:9400)")
        if host in ("", "*"):
            host = "0.0.0.0"
    if host == "localhost":
        host = DEFAULT_HOST
    try:
        host = str(ipaddress.ip_address(host))
    except ValueError:
        raise ListenAddressError(
            f"not an IP address: {host!r} in {text!r} (use e.g. 127.0.0.1:9400)") from None
    if not port_text.isdigit() or not 0 <= int(port_text) <= 65535:
        raise ListenAddressError(f"not a port number (0-65535): {port_text!r} in {text!r}")
    return ListenAddress(host, int(port_text))


def machine_addresses() -> set[str] | None:
    """This machine's interface addresses (zones stripped), or None if they cannot be read."""
    try:
        import psutil

        found = psutil.net_if_addrs()
    except Exception:  # no psutil support here: leave the verdict to bind()
        return None
    out: set[str] = set()
    for addrs in found.values():
        for a in addrs:
            if a.family in (socket.AF_INET, socket.AF_INET6):
                try:
                    out.add(str(ipaddress.ip_address(a.address.split("%", 1)[0])))
                except ValueError:
                    continue
    return out


def check_local(addr: ListenAddress, local: Iterable[str] | None = None) -> None:
    """ListenAddressError unless `addr` can be served from this machine.

    Checked before binding: a foreign address is bad usage, and the kernel's answer for
    some (EINVAL for a link-local IPv6 without a zone) would otherwise read as a runtime
    failure. `local`: this machine's addresses (default: read from the interfaces).
    """
    ip = ipaddress.ip_address(addr.host)
    where = addr.url().removeprefix("http://").removesuffix("/metrics")
    if ip.is_unspecified or ip.is_loopback:
        return
    if isinstance(ip, ipaddress.IPv6Address) and ip.is_link_local and not ip.scope_id:
        raise ListenAddressError(
            f"cannot listen on {where}: a link-local IPv6 address needs a zone "
            f"(e.g. [{ip}%eth0]:{addr.port}) and must be one of this machine's")
    known = machine_addresses() if local is None else set(local)
    if known is None:
        return
    plain = str(ip).split("%", 1)[0]
    if plain not in {str(ipaddress.ip_address(a.split("%", 1)[0])) for a in known}:
        raise ListenAddressError(f"cannot listen on {where}: not an address of this machine")


# --- the collector ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Dcgm:
    name: str
    typ: str  # "gauge" or "counter", as in dcgm-exporter's counters CSV
    help: str
    get: Callable[[GpuSample], float | None]


def _mib(n: int | None) -> int | None:
    # DCGM reports framebuffer sizes as whole MiB.
    return None if n is None else n // MIB


def _fb_free(g: GpuSample) -> int | None:
    total = g.mem_total_bytes if g.mem_total_bytes is not None else g.info.mem_total_bytes
    if total is None or g.mem_used_bytes is None:
        return None
    # GpuSample carries no reserved figure, so "free" here includes driver-reserved memory.
    return _mib(max(0, total - g.mem_used_bytes))


def _mj(j: float | None) -> int | None:
    return None if j is None else round(j * 1000)


def _kib(bps: float | None) -> float | None:
    return None if bps is None else bps / 1024


DCGM_METRICS: tuple[_Dcgm, ...] = (
    _Dcgm("DCGM_FI_DEV_GPU_UTIL", "gauge", "GPU utilization (in %).", lambda g: g.util_gpu_pct),
    _Dcgm("DCGM_FI_DEV_MEM_COPY_UTIL", "gauge", "Memory utilization (in %).",
          lambda g: g.util_mem_pct),
    _Dcgm("DCGM_FI_DEV_FB_USED", "gauge", "Framebuffer memory used (in MiB).",
          lambda g: _mib(g.mem_used_bytes)),
    _Dcgm("DCGM_FI_DEV_FB_FREE", "gauge", "Framebuffer memory free (in MiB).", _fb_free),
    _Dcgm("DCGM_FI_DEV_FB_TOTAL", "gauge", "Framebuffer memory total (in MiB).",
          lambda g: _mib(g.mem_total_bytes if g.mem_total_bytes is not None
                         else g.info.mem_total_bytes)),
    _Dcgm("DCGM_FI_DEV_POWER_USAGE", "gauge", "Power draw (in W).", lambda g: g.power_w),
    _Dcgm("DCGM_FI_DEV_ENFORCED_POWER_LIMIT", "gauge", "Enforced power limit (in W).",
          lambda g: g.power_limit_w),
    _Dcgm("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "counter",
          "Total energy consumption since boot (in mJ).", lambda g: _mj(g.energy_j)),
    _Dcgm("DCGM_FI_DEV_GPU_TEMP", "gauge", "GPU temperature (in C).", lambda g: g.temp_c),
    _Dcgm("DCGM_FI_DEV_SLOWDOWN_TEMP", "gauge", "Slowdown temperature threshold (in C).",
          lambda g: g.info.temp_slowdown_c),
    _Dcgm("DCGM_FI_DEV_SM_CLOCK", "gauge", "SM clock frequency (in MHz).",
          lambda g: g.clock_sm_mhz),
    _Dcgm("DCGM_FI_DEV_MEM_CLOCK", "gauge", "Memory clock frequency (in MHz).",
          lambda g: g.clock_mem_mhz),
    _Dcgm("DCGM_FI_DEV_CLOCK_THROTTLE_REASONS", "gauge",
          "Current clock throttle reasons (bitmask of nvmlClocksEventReasons).",
          lambda g: g.throttle_mask),
    _Dcgm("DCGM_FI_DEV_FAN_SPEED", "gauge", "Fan speed (in %).", lambda g: g.fan_pct),
    _Dcgm("DCGM_FI_DEV_PSTATE", "gauge", "Performance state (0 fastest).", lambda g: g.pstate),
    # dcgm-exporter's CSV declares these two "counter", but NVML (and DCGM) give a rate in
    # KB/s sampled over ~20 ms; a counter type would make rate() nonsense, so: gauge.
    _Dcgm("DCGM_FI_DEV_PCIE_TX_THROUGHPUT", "gauge", "PCIe TX throughput (in KB/s) via NVML.",
          lambda g: _kib(g.pcie_tx_bps)),
    _Dcgm("DCGM_FI_DEV_PCIE_RX_THROUGHPUT", "gauge", "PCIe RX throughput (in KB/s) via NVML.",
          lambda g: _kib(g.pcie_rx_bps)),
    _Dcgm("DCGM_FI_DEV_PCIE_LINK_GEN", "gauge", "Current PCIe link generation.",
          lambda g: g.pcie_gen),
    _Dcgm("DCGM_FI_DEV_PCIE_LINK_WIDTH", "gauge", "Current PCIe link width (lanes).",
          lambda g: g.pcie_width),
    _Dcgm("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "counter",
          "Total number of double-bit volatile ECC errors.", lambda g: g.ecc_uncorrected),
)


def gpu_labels(g: GpuSample, hostname: str) -> list[str]:
    return [str(g.index), g.info.uuid, f"nvidia{g.index}", g.info.name, hostname,
            g.info.pci_bus_id]


@dataclass
class _GpuCounters:
    labels: list[str]
    episodes: int = 0
    throttling: bool = False
    seconds: dict[str, float] | None = None


class ThrottleAccounting:
    """Per-GPU throttle counters accumulated from ticks (a Sampler listener).

    Counters must never go down, so they live here for the exporter's lifetime
    rather than being derived from the tracker's bounded episode list. The rule for
    an episode matches ThrottleTracker: it starts on the first tick with a
    throttling reason and ends on the first tick without one, or when the GPU is lost.
    Each tick's elapsed time is charged to the reasons set on that tick.
    """

    def __init__(self, hostname: Callable[[Snapshot], str]) -> None:
        self._hostname = hostname
        self._lock = threading.Lock()
        self._gpus: dict[tuple[int, str], _GpuCounters] = {}
        self._last_mono: float | None = None

    def __call__(self, snap: Snapshot) -> None:
        host = self._hostname(snap)
        with self._lock:
            dt = 0.0 if self._last_mono is None else max(0.0, snap.mono - self._last_mono)
            self._last_mono = snap.mono
            for g in snap.gpus:
                key = (g.index, g.info.uuid)
                c = self._gpus.get(key)
                if c is None:
                    c = self._gpus[key] = _GpuCounters(
                        gpu_labels(g, host), seconds={r.key: 0.0 for r in THROTTLING_REASONS})
                throttling = not g.lost and is_throttling(g.throttle_mask)
                if throttling and not c.throttling:
                    c.episodes += 1
                c.throttling = throttling
                if throttling:
                    assert c.seconds is not None
                    for r in THROTTLING_REASONS:
                        if (g.throttle_mask or 0) & THROTTLE_MASK & r.bit:
                            c.seconds[r.key] += dt

    def rows(self) -> list[tuple[list[str], int, dict[str, float]]]:
        with self._lock:
            return [(list(c.labels), c.episodes, dict(c.seconds or {}))
                    for c in self._gpus.values()]


class SnapshotCollector(Collector):
    """Formats whatever the sampler read last; never touches NVML itself."""

    def __init__(self, latest: Callable[[], Snapshot | None], accounting: ThrottleAccounting,
                 *, nvml_error: str | None, interval: float,
                 hostname: str | None = None) -> None:
        self._latest = latest
        self._accounting = accounting
        self._nvml_error = nvml_error
        self._interval = interval
        self._hostname = hostname

    def hostname(self, snap: Snapshot) -> str:
        return self._hostname or snap.host.hostname

    def collect(self) -> Iterator[Metric]:
        snap = self._latest()
        up = GaugeMetricFamily(
            "gputui_up", "1 while GPU telemetry is flowing (NVML initialised and the sampler "
            "ticking); 0 otherwise, see gputui_nvml_error_info.")
        fresh = snap is not None and time.monotonic() - snap.mono < 3 * self._interval + 2.0
        up.add_metric([], 1.0 if fresh and self._nvml_error is None else 0.0)
        yield up
        if self._nvml_error is not None:
            err = GaugeMetricFamily("gputui_nvml_error_info",
                                    "Why NVML is unavailable (GPU metrics are absent).",
                                    labels=["reason"])
            err.add_metric([self._nvml_error], 1.0)
            yield err
        if snap is None:
            return
        host = self.hostname(snap)
        yield from self._host_metrics(snap, host)
        yield from self._gpu_metrics(snap, host)
        yield from self._throttle_metrics()

    def _host_metrics(self, snap: Snapshot, host: str) -> Iterator[Metric]:
        h = snap.host
        for name, doc, value in (
            ("gputui_host_cpu_percent", "Host CPU utilisation (in %).", h.cpu_pct),
            ("gputui_host_memory_used_bytes", "Host memory in use (total - available).",
             h.mem_used_bytes),
            ("gputui_host_memory_total_bytes", "Host memory total.", h.mem_total_bytes),
        ):
            if value is None:
                continue
            fam = GaugeMetricFamily(name, doc, labels=["Hostname"])
            fam.add_metric([host], float(value))
            yield fam

    def _gpu_metrics(self, snap: Snapshot, host: str) -> Iterator[Metric]:
        lost = GaugeMetricFamily("gputui_gpu_lost", "1 when the GPU fell off the bus.",
                                 labels=list(GPU_LABELS))
        for g in snap.gpus:
            lost.add_metric(gpu_labels(g, host), 1.0 if g.lost else 0.0)
        for spec in DCGM_METRICS:
            fam = Metric(spec.name, spec.help, spec.typ)
            for g in snap.gpus:
                if g.lost:
                    continue  # a lost GPU has no readings; gputui_gpu_lost says why
                value = spec.get(g)
                if value is None:
                    continue  # not available on this device: absent, never 0
                fam.add_sample(spec.name, dict(zip(GPU_LABELS, gpu_labels(g, host),
                                                   strict=True)), float(value))
            if fam.samples:
                yield fam
        yield lost

    def _throttle_metrics(self) -> Iterator[Metric]:
        rows = self._accounting.rows()
        episodes = CounterMetricFamily(
            "gputui_throttle_episodes", "Throttle episodes started since the exporter started.",
            labels=list(GPU_LABELS))
        seconds = CounterMetricFamily(
            "gputui_throttle_seconds", "Seconds spent throttled, per reason.",
            labels=[*GPU_LABELS, "reason"])
        for labels, n, per_reason in rows:
            episodes.add_metric(labels, float(n))
            for reason, s in per_reason.items():
                seconds.add_metric([*labels, reason], s)
        yield episodes
        yield seconds


# --- text exposition -------------------------------------------------------------------


def _escape_label(value: str) -> str:
    return value.replace("\\", r"\\").replace("\n", r"\n").replace('"', r"\"")


def render(families: Iterable[Metric]) -> bytes:
    """Prometheus text format 0.0.4, as dcgm-exporter writes it.

    prometheus_client's generate_latest renames every counter family to NAME_total,
    which would break the dcgm-exporter names that have no such suffix
    (DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION); here the TYPE line names the samples
    exactly as they are written.
    """
    out: list[str] = []
    for fam in families:
        name = fam.name
        if fam.type == "counter" and not any(s.name == name for s in fam.samples):
            name += "_total"
        typ = {"unknown": "untyped", "info": "gauge", "stateset": "gauge"}.get(fam.type, fam.type)
        doc = fam.documentation.replace("\\", r"\\").replace("\n", r"\n")
        out.append(f"# HELP {name} {doc}\n# TYPE {name} {typ}\n")
        for s in fam.samples:
            labels = ",".join(f'{k}="{_escape_label(v)}"' for k, v in s.labels.items())
            out.append(f"{s.name}{{{labels}}} " if labels else f"{s.name} ")
            out.append(floatToGoString(s.value) + "\n")
    return "".join(out).encode()


# --- serving ---------------------------------------------------------------------------


class BindError(Exception):
    """The listening socket could not be opened; `usage` tells a bad address from a busy port."""

    def __init__(self, message: str, *, usage: bool) -> None:
        super().__init__(message)
        self.usage = usage


class _Handler(BaseHTTPRequestHandler):
    server: MetricsServer

    def do_GET(self) -> None:
        path = self.path.split("?", 1)[0]
        if path == "/metrics":
            try:
                body = render(self.server.registry.collect())
            except Exception as exc:  # report, don't kill the connection without an answer
                self._send(500, f"gputui: collecting metrics failed: {exc}\n".encode(),
                           "text/plain; charset=utf-8")
                return
            self._send(200, body, CONTENT_TYPE)
        elif path == "/":
            self._send(200, b"<html><body><h1>gputui exporter</h1>"
                       b'<p><a href="/metrics">/metrics</a></p></body></html>\n',
                       "text/html; charset=utf-8")
        else:
            self._send(404, b"not found; metrics are at /metrics\n", "text/plain; charset=utf-8")

    def _send(self, code: int, body: bytes, ctype: str) -> None:
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass  # one line per scrape every few seconds would drown real messages


class MetricsServer(ThreadingHTTPServer):
    daemon_threads = True  # a stuck client must not keep the process alive on shutdown

    def __init__(self, addr: ListenAddress, registry: CollectorRegistry) -> None:
        self.address_family = addr.family
        self.registry = registry
        super().__init__((addr.host, addr.port), _Handler, bind_and_activate=False)
        try:
            # TCPServer's bind, not HTTPServer's: that one calls socket.getfqdn(), a
            # reverse DNS lookup that can hang for seconds on a machine without DNS.
            socketserver.TCPServer.server_bind(self)
            self.server_name, self.server_port = addr.host, self.server_address[1]
            self.server_activate()
        except OSError as exc:
            self.server_close()
            where = f"{addr.host}:{addr.port}" if addr.family == socket.AF_INET \
                else f"[{addr.host}]:{addr.port}"
            reason = exc.strerror or str(exc)
            if exc.errno == errno.EADDRINUSE:
                raise BindError(f"cannot listen on {where}: port {addr.port} is already in use",
                                usage=False) from None
            if exc.errno in (errno.EADDRNOTAVAIL, errno.EAFNOSUPPORT):
                raise BindError(f"cannot listen on {where}: not an address of this machine "
                                f"({reason})", usage=True) from None
            raise BindError(f"cannot listen on {where}: {reason}", usage=False) from None

    @property
    def port(self) -> int:
        return int(self.server_address[1])
