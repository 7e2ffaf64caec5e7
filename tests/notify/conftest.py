"""Local webhook receivers (127.0.0.1 only): one that answers (any status, a redirect's
Location too), one that returns 500, one that accepts the connection and never answers,
and one that drips its answer a byte at a time."""

from __future__ import annotations

import http.server
import json
import socket
import ssl
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest


class Receiver:
    """An HTTP server answering every POST with `status`, keeping what it received."""

    def __init__(self, status: int) -> None:
        self.status = status
        self.script: list[int] = []  # statuses for the next requests, before `status`
        self.location: str | None = None  # sent as the Location header when set
        self.retry_after: str | None = None  # sent as the Retry-After header when set
        self.times: list[float] = []  # time.monotonic() of each request
        self.bodies: list[dict[str, object]] = []
        self.paths: list[str] = []
        self.headers: list[dict[str, str]] = []
        self.got = threading.Condition()
        receiver = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                with receiver.got:
                    receiver.paths.append(self.path)
                    receiver.times.append(time.monotonic())
                    receiver.headers.append(dict(self.headers))
                    receiver.bodies.append(json.loads(body))
                    status = receiver.script.pop(0) if receiver.script else receiver.status
                    receiver.got.notify_all()
                self.send_response(status)
                if receiver.location is not None:
                    self.send_header("Location", receiver.location)
                if receiver.retry_after is not None:
                    self.send_header("Retry-After", receiver.retry_after)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"ok")

            def log_message(self, format: str, *args: object) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        # A short poll: shutting the server down after each test waits for one.
        self.thread = threading.Thread(target=self.server.serve_forever,
                                       kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()

    def url(self, path: str = "/hook", creds: str = "") -> str:
        return f"http://{creds}127.0.0.1:{self.port}{path}"

    def wait_for(self, n: int, timeout: float = 30.0) -> list[dict[str, object]]:
        with self.got:
            self.got.wait_for(lambda: len(self.bodies) >= n, timeout)
            return list(self.bodies)

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


TLS_DIR = Path(__file__).resolve().parent / "tls"  # a self-signed pair for 127.0.0.1


class TlsReceiver(Receiver):
    """A Receiver over TLS (tls/cert.pem, which a client trusts through SSL_CERT_FILE),
    counting the connections it gets, handshakes that fail included."""

    def __init__(self, status: int) -> None:
        super().__init__(status)
        self.connections = 0
        ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        ctx.load_cert_chain(TLS_DIR / "cert.pem", TLS_DIR / "key.pem")
        receiver = self
        plain_finish = self.server.finish_request

        def finish_request(request: socket.socket, client_address: object) -> None:
            with receiver.got:
                receiver.connections += 1
            try:
                tls = ctx.wrap_socket(request, server_side=True)
            except (ssl.SSLError, OSError):
                return
            plain_finish(tls, client_address)  # type: ignore[arg-type]

        self.server.finish_request = finish_request  # type: ignore[method-assign]

    def url(self, path: str = "/hook", creds: str = "") -> str:
        return f"https://{creds}127.0.0.1:{self.port}{path}"


class Silent:
    """Accepts connections and never answers (a webhook that hangs)."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self.conns: list[socket.socket] = []
        self.accepted = threading.Event()
        self.thread = threading.Thread(target=self._accept, daemon=True)
        self.thread.start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.conns.append(conn)
            self.accepted.set()

    def url(self, path: str = "/hook") -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def close(self) -> None:
        self.sock.close()
        for c in self.conns:
            c.close()


class Dripper:
    """Reads each request whole, then answers the first `drip` connections one byte every
    `every_s` seconds (a complete 200, were anyone to wait for it), the later ones at once.
    Counts the requests it read whole."""

    ANSWER = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok"

    def __init__(self, drip: int = 1, every_s: float = 0.2) -> None:
        self.drip = drip
        self.every_s = every_s
        self.requests = 0
        self.got = threading.Condition()
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        with conn:
            data = b""
            while b"\r\n\r\n" not in data:
                chunk = conn.recv(65536)
                if not chunk:
                    return
                data += chunk
            head, _, body = data.partition(b"\r\n\r\n")
            length = next(int(line.split(b":")[1]) for line in head.split(b"\r\n")
                          if line.lower().startswith(b"content-length:"))
            while len(body) < length:
                body += conn.recv(65536)
            with self.got:
                self.requests += 1
                n = self.requests
                self.got.notify_all()
            try:
                if n > self.drip:
                    conn.sendall(self.ANSWER)
                    return
                for i in range(len(self.ANSWER)):
                    conn.sendall(self.ANSWER[i:i + 1])
                    time.sleep(self.every_s)
            except OSError:  # the client hung up: what a deadline does
                return

    def url(self, path: str = "/hook") -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def wait_for(self, n: int, timeout: float = 30.0) -> int:
        with self.got:
            self.got.wait_for(lambda: self.requests >= n, timeout)
            return self.requests

    def close(self) -> None:
        self.sock.close()


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    r = Receiver(200)
    yield r
    r.close()


@pytest.fixture
def failing() -> Iterator[Receiver]:
    r = Receiver(500)
    yield r
    r.close()


@pytest.fixture
def silent() -> Iterator[Silent]:
    s = Silent()
    yield s
    s.close()


@pytest.fixture
def dripper() -> Iterator[Dripper]:
    d = Dripper()
    yield d
    d.close()


@pytest.fixture(autouse=True)
def no_proxy(monkeypatch: pytest.MonkeyPatch) -> None:
    """The receivers are local: a proxy from the environment must not be asked."""
    for var in ("http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY", "all_proxy",
                "ALL_PROXY"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("no_proxy", "127.0.0.1,localhost")


def clean_env(base: dict[str, str]) -> dict[str, str]:
    env = {k: v for k, v in base.items() if k.lower() not in ("http_proxy", "https_proxy",
                                                               "all_proxy")}
    env["no_proxy"] = "127.0.0.1,localhost"
    return env


__all__ = ["TLS_DIR", "Dripper", "Receiver", "Silent", "TlsReceiver", "clean_env"]
