"""Local webhook receivers (127.0.0.1 only): one that answers, one that returns 500, one
that accepts the connection and never answers."""

from __future__ import annotations

import http.server
import json
import socket
import threading
from collections.abc import Iterator

import pytest


class Receiver:
    """An HTTP server answering every POST with `status`, keeping what it received."""

    def __init__(self, status: int) -> None:
        self.status = status
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
                    receiver.headers.append(dict(self.headers))
                    receiver.bodies.append(json.loads(body))
                    receiver.got.notify_all()
                self.send_response(receiver.status)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"ok")

            def log_message(self, format: str, *args: object) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def url(self, path: str = "/hook") -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def wait_for(self, n: int, timeout: float = 30.0) -> list[dict[str, object]]:
        with self.got:
            self.got.wait_for(lambda: len(self.bodies) >= n, timeout)
            return list(self.bodies)

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


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


__all__ = ["Receiver", "Silent", "clean_env"]
