"""Helpers for the fleet tests: real `gputui export` subprocesses over the fake NVML library,
a garbage HTTP server and free loopback ports. Everything binds to 127.0.0.1 and is
terminated in teardown."""

from __future__ import annotations

import contextlib
import http.server
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.registry import Collector, CollectorRegistry

from gputui.fleet.listen import ListenAddress
from gputui.fleet.metrics_server import MetricsServer
from tests.fakenvml.harness import FakeNvmlLib, write_scenario

LOOPBACK = "127.0.0.1"
START_TIMEOUT_S = 20.0
NO_PROXY = urllib.request.build_opener(urllib.request.ProxyHandler({}))
ROOT = Path(__file__).resolve().parents[2]
ALERT_RULES = ROOT / "deploy" / "prometheus" / "gputui-alerts.yml"
FLEET_RULES = ROOT / "deploy" / "prometheus" / "gputui-fleet.yml"
PROMETHEUS = shutil.which("prometheus") or (
    "/usr/bin/prometheus" if Path("/usr/bin/prometheus").is_file() else None)
needs_prometheus = pytest.mark.skipif(
    PROMETHEUS is None,
    reason="the prometheus server binary is not installed (apt-get install -y prometheus)")


def free_port() -> int:
    """A port nobody listens on right now (bind to port 0, read it, close)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((LOOPBACK, 0))
        return int(s.getsockname()[1])


def gputui_cmd(*args: str) -> list[str]:
    return [sys.executable, "-m", "gputui", *args]


def http_get(url: str, timeout: float = 5.0,
             opener: urllib.request.OpenerDirector = NO_PROXY) -> str:
    with opener.open(url, timeout=timeout) as resp:
        return resp.read().decode()


Series = dict[tuple[str, frozenset[tuple[str, str]]], float]


def parse_page(text: str) -> Series:
    """{(sample name, labels): value}, through prometheus_client's own parser."""
    out: Series = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            out[(s.name, frozenset(s.labels.items()))] = s.value
    return out


def value(series: Series, name: str, **labels: str) -> float:
    """The one sample of `name` whose labels include `labels`."""
    hits = [v for (n, ls), v in series.items()
            if n == name and set(labels.items()) <= set(ls)]
    assert len(hits) == 1, f"{name}{labels}: {len(hits)} matches"
    return hits[0]


def wait_for(predicate: Callable[[], Any], timeout: float, what: str,
             step: float = 0.1) -> Any:
    deadline = time.monotonic() + timeout
    last_exc: BaseException | None = None
    while time.monotonic() < deadline:
        try:
            result = predicate()
        except Exception as exc:  # not ready yet
            last_exc = exc
        else:
            if result:
                return result
        time.sleep(step)
    raise AssertionError(f"timed out after {timeout:g} s waiting for {what} ({last_exc!r})")


class _One(Collector):
    def collect(self) -> Iterator[Metric]:
        fam = GaugeMetricFamily("test_value", "A constant.")
        fam.add_metric([], 42.0)
        yield fam


@contextlib.contextmanager
def serving(collector: Collector | None = None, **kw: Any) -> Iterator[MetricsServer]:
    """A MetricsServer in this process on 127.0.0.1 (a free port) serving `collector`'s
    metrics (default `test_value 42.0`); `kw` goes to MetricsServer. Nothing a client does
    may be reported as the server's error."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(collector or _One())
    errors: list[str] = []
    server = MetricsServer(ListenAddress(LOOPBACK, 0), registry, on_error=errors.append, **kw)
    t = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05},
                         daemon=True)
    t.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        t.join(10)
    assert errors == [], errors


@dataclass
class Exporter:
    proc: subprocess.Popen[bytes]
    port: int
    stdout: Path
    stderr: Path
    scheme: str = "http"
    # How the tests read it: with the CA and password a --web.config.file asks for.
    opener: urllib.request.OpenerDirector = NO_PROXY

    @property
    def target(self) -> str:
        return f"{LOOPBACK}:{self.port}"

    @property
    def url(self) -> str:
        return f"{self.scheme}://{self.target}/metrics"

    def scrape(self) -> Series:
        return parse_page(http_get(self.url, opener=self.opener))

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 10.0) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        return int(self.proc.returncode)


ExporterFactory = Callable[..., Exporter]


@contextlib.contextmanager
def exporter_factory(fake_nvml_lib: FakeNvmlLib, tmp_path: Path) -> Iterator[ExporterFactory]:
    """start(scenario (path, shipped name or dict), hostname=..., interval=...): real
    `gputui export` processes, stopped when the block ends (files under `tmp_path`)."""
    started: list[Exporter] = []

    def start(scenario: str | os.PathLike[str] | Mapping[str, Any], *, hostname: str,
              interval: float = 0.5, port: int = 0, extra: tuple[str, ...] = (),
              opener: urllib.request.OpenerDirector = NO_PROXY) -> Exporter:
        n = len(started)
        if isinstance(scenario, Mapping):
            scenario = write_scenario(tmp_path / f"exporter{n}.conf", scenario)
        env = fake_nvml_lib.env(scenario)
        out, err = tmp_path / f"exporter{n}.out", tmp_path / f"exporter{n}.err"
        # Port 0 (the default): the exporter picks a free port itself and announces it,
        # so no other process can grab it between our choice and its bind. A given port
        # restarts an exporter where a stopped one was.
        with out.open("wb") as o, err.open("wb") as e:
            proc = subprocess.Popen(
                gputui_cmd("export", "--listen", f"{LOOPBACK}:{port}", "--interval", str(interval),
                           "--hostname", hostname, *extra),
                env=env, stdout=o, stderr=e, stdin=subprocess.DEVNULL)
        exp = Exporter(proc, 0, out, err, opener=opener)
        started.append(exp)

        def announced() -> int | None:
            if proc.poll() is not None:
                raise AssertionError(f"exporter exited {proc.returncode}: {err.read_text()}")
            for line in out.read_text().splitlines():
                found = re.search(r"serving metrics on (https?)://[^ ]*:(\d+)/metrics", line)
                if found:
                    exp.scheme = found.group(1)
                    return int(found.group(2))
            return None

        exp.port = wait_for(announced, START_TIMEOUT_S, "the exporter to announce its port")
        # Ready when a snapshot after the first is served: host metrics come with every
        # snapshot, CPU % from the second tick on (the first has no window to measure).
        wait_for(lambda: "gputui_host_cpu_percent" in http_get(exp.url, opener=opener),
                 START_TIMEOUT_S, "the second snapshot on /metrics")
        return exp

    try:
        yield start
    finally:
        for exp in started:
            exp.stop()


@pytest.fixture
def start_exporter(fake_nvml_lib: FakeNvmlLib, tmp_path: Path) -> Iterator[ExporterFactory]:
    """start_exporter(scenario (path, shipped name or dict), hostname=..., interval=...)."""
    with exporter_factory(fake_nvml_lib, tmp_path) as start:
        yield start


class LoopbackHttpServer:
    """A threaded HTTP server on 127.0.0.1 (an ephemeral port) for one request handler."""

    def _serve(self, handler: type[http.server.BaseHTTPRequestHandler]) -> None:
        self.server = http.server.ThreadingHTTPServer((LOOPBACK, 0), handler)
        self.server.daemon_threads = True
        self.port = int(self.server.server_address[1])
        # A short poll: close() waits for it, and tests close several servers each.
        self.thread = threading.Thread(target=self.server.serve_forever, args=(0.05,),
                                       daemon=True)
        self.thread.start()

    @property
    def target(self) -> str:
        return f"{LOOPBACK}:{self.port}"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(5)


class GarbageServer(LoopbackHttpServer):
    """Answers every GET with 200 and a page that is not Prometheus text."""

    BODY = b"<html><body>{{{ this is not a metrics page }}}</body></html>\n"

    def __init__(self) -> None:
        body = self.BODY

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "text/html")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: object) -> None:
                pass

        self._serve(Handler)


@pytest.fixture
def garbage_server() -> Iterator[GarbageServer]:
    srv = GarbageServer()
    try:
        yield srv
    finally:
        srv.close()


@contextlib.contextmanager
def listening_socket() -> Iterator[int]:
    """A port that is in use (bound and listening) for the duration."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        s.bind((LOOPBACK, 0))
        s.listen(1)
        yield int(s.getsockname()[1])
    finally:
        s.close()


class StubbornServer:
    """A raw TCP server on 127.0.0.1 that misbehaves the way real hosts sometimes do.

    mode "trickle-body": valid headers announcing a big page, then one body byte every
    `step` seconds, never finishing. "trickle-headers": the status line one byte every
    `step` seconds. "not-http": answers like an SSH server would. "silent": reads the
    request and never answers (a hung process that still accepts connections).
    Every connection is served by a daemon thread; close() hangs up on all of them.
    """

    def __init__(self, mode: str, step: float = 0.5) -> None:
        self.mode = mode
        self.step = step
        self.stop = threading.Event()
        self.connections = 0
        self._clients: list[socket.socket] = []
        self._lock = threading.Lock()
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.bind((LOOPBACK, 0))
        self.sock.listen(16)
        self.sock.settimeout(0.2)
        self.port = int(self.sock.getsockname()[1])
        self.thread = threading.Thread(target=self._accept, daemon=True)
        self.thread.start()

    @property
    def target(self) -> str:
        return f"{LOOPBACK}:{self.port}"

    def _accept(self) -> None:
        while not self.stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            with self._lock:
                self.connections += 1
                self._clients.append(conn)
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _drip(self, conn: socket.socket, data: bytes) -> None:
        for i in range(len(data)):
            if self.stop.wait(self.step):
                return
            conn.sendall(data[i:i + 1])

    def _serve(self, conn: socket.socket) -> None:
        try:
            conn.settimeout(5)
            conn.recv(65536)  # the request
            if self.mode == "not-http":
                conn.sendall(b"SSH-2.0-OpenSSH_9.2p1 Debian-2\r\n")
                self.stop.wait(30)
            elif self.mode == "silent":
                self.stop.wait(120)
            elif self.mode == "trickle-headers":
                self._drip(conn, b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n" * 1000)
            else:
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\n"
                             b"Content-Length: 1000000\r\n\r\n")
                self._drip(conn, b"# " + b"x" * 999998)
        except OSError:
            pass
        finally:
            conn.close()

    def close(self) -> None:
        self.stop.set()
        self.sock.close()
        with self._lock:
            for c in self._clients:
                with contextlib.suppress(OSError):
                    c.shutdown(socket.SHUT_RDWR)
        self.thread.join(5)


@pytest.fixture
def stubborn_server() -> Iterator[Callable[..., StubbornServer]]:
    made: list[StubbornServer] = []

    def make(mode: str = "trickle-body", step: float = 0.5) -> StubbornServer:
        srv = StubbornServer(mode, step)
        made.append(srv)
        return srv

    try:
        yield make
    finally:
        for srv in made:
            srv.close()


class PageServer(LoopbackHttpServer):
    """Serves one metrics page (bytes, replaceable) on 127.0.0.1 and counts the requests."""

    def __init__(self, body: bytes) -> None:
        self.body = body
        self.requests = 0
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                outer.requests += 1
                body = outer.body
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                try:
                    self.wfile.write(body)
                except OSError:
                    pass  # the fleet gave up on a page it found too large

            def log_message(self, format: str, *args: object) -> None:
                pass

        self._serve(Handler)


@pytest.fixture
def page_server() -> Iterator[Callable[[bytes], PageServer]]:
    made: list[PageServer] = []

    def make(body: bytes) -> PageServer:
        srv = PageServer(body)
        made.append(srv)
        return srv

    try:
        yield make
    finally:
        for srv in made:
            srv.close()


GPU_LABELS = ('gpu="{i}",UUID="GPU-{i:04d}",device="nvidia{i}",modelName="NVIDIA H100 80GB HBM3",'
              'Hostname="{host}",pci_bus_id="00000000:{i:02X}:00.0"')


def gpu_page(host: str, gpus: int = 1, util: int = 50) -> bytes:
    """A small dcgm-exporter-like page: utilisation, memory and temperature per GPU."""
    lines = []
    for i in range(gpus):
        labels = GPU_LABELS.format(i=i, host=host)
        lines += [f"DCGM_FI_DEV_GPU_UTIL{{{labels}}} {util}",
                  f"DCGM_FI_DEV_FB_USED{{{labels}}} 1024", f"DCGM_FI_DEV_FB_FREE{{{labels}}} 3072",
                  f"DCGM_FI_DEV_GPU_TEMP{{{labels}}} 60"]
    return ("\n".join(lines) + "\n").encode()


def huge_page(host: str, series: int = 200_000, *, gpu_series: bool) -> bytes:
    """About 16 MB: `series` series of GPU utilisation (one per made-up GPU) when
    `gpu_series`, else one real GPU and `series` series the fleet does not read."""
    if gpu_series:
        return "".join(f'DCGM_FI_DEV_GPU_UTIL{{gpu="{i}",UUID="GPU-{i:06d}",Hostname="{host}"}}'
                       f" 1\n" for i in range(series)).encode()
    other = "".join(f'node_systemd_unit_state{{name="unit-{i:06d}.service",state="active",'
                    f'type="simple"}} 1\n' for i in range(series))
    return gpu_page(host) + other.encode()


@dataclass
class Prometheus:
    url: str
    dir: Path

    @property
    def query_log(self) -> Path:
        return self.dir / "queries.log"


@contextlib.contextmanager
def running_prometheus(targets: list[str], dir: Path, *, job: str = "gpus",
                       interval: str = "1s", rules: tuple[Path, ...] = ()
                       ) -> Iterator[Prometheus]:
    """A real Prometheus on 127.0.0.1 scraping `targets` every `interval` (evaluating
    `rules` as often), logging every query it runs to `dir`/queries.log; ready when this
    yields (its first scrapes may still be under way)."""
    assert PROMETHEUS is not None
    dir.mkdir(parents=True, exist_ok=True)
    port = free_port()
    config = dir / "prometheus.yml"
    quoted = ", ".join(f"'{t}'" for t in targets)
    config.write_text(
        f"global:\n  scrape_interval: {interval}\n  scrape_timeout: {interval}\n"
        f"  evaluation_interval: {interval}\n  query_log_file: {dir / 'queries.log'}\n"
        + (f"rule_files: [{', '.join(repr(str(r)) for r in rules)}]\n" if rules else "")
        + f"scrape_configs:\n  - job_name: {job}\n"
        f"    static_configs:\n      - targets: [{quoted}]\n")
    log = (dir / "prometheus.log").open("wb")
    proc = subprocess.Popen(
        [PROMETHEUS, f"--config.file={config}", f"--storage.tsdb.path={dir / 'tsdb'}",
         f"--web.listen-address={LOOPBACK}:{port}", "--storage.tsdb.retention.time=1h"],
        stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    url = f"http://{LOOPBACK}:{port}"
    try:
        wait_for(lambda: proc.poll() is None and http_get(f"{url}/-/ready"), 30,
                 "Prometheus to be ready", step=0.1)
        yield Prometheus(url, dir)
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)
        log.close()


def prometheus_query(url: str, q: str) -> list[dict[str, Any]]:
    import json
    import urllib.parse

    doc = json.loads(http_get(f"{url}/api/v1/query?" + urllib.parse.urlencode({"query": q})))
    assert doc["status"] == "success"
    return list(doc["data"]["result"])
