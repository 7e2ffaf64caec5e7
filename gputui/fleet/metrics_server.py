"""The exporter's HTTP side: /metrics on one asyncio event loop, bounded and quiet.

Not http.server's ThreadingHTTPServer: it starts a thread per connection (1,000
half-sent requests held 1,003 threads), has no read timeout, and prints a traceback
to stderr for every client that hangs up early. Here one thread serves every
connection; a request must arrive within `read_timeout_s` and its answer leave within
`write_timeout_s`; at most `max_connections` are open at once — a new one pushes out
the oldest that has still not sent its request, so idle connections cannot lock a
real scrape out —; and a client that goes away is nobody's error. Each answer closes
its connection (Prometheus reconnects at each scrape anyway). A request whose head
(request line and headers) is over 16 KiB is answered 431 and its connection closed.

With a web config (`web_config`): TLS on the same loop (a handshake must finish within
the read timeout; a client speaking plain HTTP to the TLS port just fails its handshake),
basic auth on every path (`basic_auth`: 401 with `WWW-Authenticate: Basic`), and the
file's extra headers on every answer.
"""

from __future__ import annotations

import asyncio
import errno
import socket
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass, replace

from prometheus_client.registry import CollectorRegistry

from gputui.fleet.basic_auth import BasicAuth, Verdict
from gputui.fleet.exposition import CONTENT_TYPE, render
from gputui.fleet.listen import ListenAddress
from gputui.fleet.web_config import WebConfig

READ_TIMEOUT_S = 10.0  # Prometheus' default scrape timeout: a request slower than that is dead
WRITE_TIMEOUT_S = 10.0
MAX_CONNECTIONS = 256
MAX_HEAD_BYTES = 16 * 1024  # request line and headers; a scrape sends a few hundred bytes
# After a 431, what the client still sends is read and dropped (up to this much, for up to
# the read timeout) before closing: closing with unread data makes the kernel send a reset,
# which can destroy the 431 before the client reads it.
LINGER_BYTES = 1024 * 1024

_INDEX = (b"<html><body><h1>gputui exporter</h1>"
          b'<p><a href="/metrics">/metrics</a></p></body></html>\n')
_TEXT = "text/plain; charset=utf-8"
_REASONS = {200: "OK", 400: "Bad Request", 401: "Unauthorized", 404: "Not Found",
            405: "Method Not Allowed", 431: "Request Header Fields Too Large",
            500: "Internal Server Error", 503: "Service Unavailable"}
# What a client hanging up, or a timeout, looks like to the server: not an error of ours.
_GONE = (ConnectionError, TimeoutError, asyncio.IncompleteReadError, asyncio.LimitOverrunError,
         OSError)


@dataclass(frozen=True, slots=True)
class Answer:
    code: int
    body: bytes
    content_type: str = _TEXT
    head_only: bool = False  # a HEAD request: headers only
    headers: tuple[tuple[str, str], ...] = ()


_TOO_LARGE = Answer(431, b"request headers larger than 16 KiB\n")
_UNAUTHORIZED = Answer(401, b"unauthorized\n",
                       headers=(("WWW-Authenticate", 'Basic realm="gputui", charset="UTF-8"'),))
_BUSY = Answer(503, b"too many password checks waiting; try again\n",
               headers=(("Retry-After", "1"),))


class BindError(Exception):
    """The listening socket could not be opened; `usage` tells a bad address from a busy port."""

    def __init__(self, message: str, *, usage: bool) -> None:
        super().__init__(message)
        self.usage = usage


def _bind(addr: ListenAddress) -> socket.socket:
    # IPPROTO_TCP named, not 0: asyncio turns Nagle off (TCP_NODELAY) only on sockets that
    # say they are TCP. With Nagle on, a TLS answer waited ~40 ms behind the session
    # tickets sent just before it (the client delays its ACK).
    sock = socket.socket(addr.family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        # As http.server does: a restarted exporter can take its port back at once.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((addr.host, addr.port))
        sock.listen(128)
    except OSError as exc:
        sock.close()
        reason = exc.strerror or str(exc)
        if exc.errno == errno.EADDRINUSE:
            raise BindError(f"cannot listen on {addr.where}: port {addr.port} is already in use",
                            usage=False) from None
        if exc.errno in (errno.EADDRNOTAVAIL, errno.EAFNOSUPPORT):
            raise BindError(f"cannot listen on {addr.where}: not an address of this machine "
                            f"({reason})", usage=True) from None
        raise BindError(f"cannot listen on {addr.where}: {reason}", usage=False) from None
    sock.setblocking(False)
    return sock


class MetricsServer:
    """Binds at construction (BindError); `serve_forever()` on a thread; `shutdown()` from another.

    `on_error(line)` hears about the unexpected (a bug), one line each; client
    disconnects and timeouts are not reported at all.
    """

    def __init__(self, addr: ListenAddress, registry: CollectorRegistry, *,
                 web: WebConfig | None = None,
                 read_timeout_s: float = READ_TIMEOUT_S,
                 write_timeout_s: float = WRITE_TIMEOUT_S,
                 max_connections: int = MAX_CONNECTIONS,
                 on_error: Callable[[str], object] | None = None) -> None:
        self.registry = registry
        self.read_timeout_s = read_timeout_s
        self.write_timeout_s = write_timeout_s
        self.max_connections = max_connections
        self._web = web or WebConfig()
        self.auth = BasicAuth(self._web.users) if self._web.users else None
        # Open connections in the order they came, each True while its request is still
        # being read (only the loop's thread changes it).
        self._conns: dict[asyncio.StreamWriter, bool] = {}
        self.served = 0  # answers sent
        self.dropped = 0  # connections closed without an answer (timeout, limit, hang-up)
        self._on_error = on_error or (lambda line: print(line, file=sys.stderr))
        self._sock = _bind(addr)
        self._shutdown = threading.Event()
        self._done = threading.Event()
        self._done.set()  # not serving yet

    @property
    def open_connections(self) -> int:
        return len(self._conns)

    @property
    def port(self) -> int:
        return int(self._sock.getsockname()[1])

    def serve_forever(self, poll_interval: float = 0.5) -> None:
        self._done.clear()
        try:
            asyncio.run(self._serve(poll_interval))
        finally:
            self._done.set()

    def shutdown(self, timeout: float = 5.0) -> None:
        """Stop serving_forever and wait (up to `timeout`) until it has returned."""
        self._shutdown.set()
        self._done.wait(timeout)

    def server_close(self) -> None:
        self._sock.close()
        if self.auth is not None:
            self.auth.close()

    async def _serve(self, poll_interval: float) -> None:
        loop = asyncio.get_running_loop()
        loop.set_exception_handler(self._loop_error)
        server = await asyncio.start_server(
            self._connection, sock=self._sock, limit=MAX_HEAD_BYTES, ssl=self._web.tls,
            ssl_handshake_timeout=self.read_timeout_s if self._web.tls else None,
            ssl_shutdown_timeout=self.write_timeout_s if self._web.tls else None)
        try:
            while not self._shutdown.is_set():
                await asyncio.sleep(poll_interval)
        finally:
            server.close()
            for writer in list(self._conns):
                writer.transport.abort()
            await asyncio.sleep(0)  # their handlers see the hang-up and finish

    def _loop_error(self, loop: asyncio.AbstractEventLoop, context: dict[str, object]) -> None:
        exc = context.get("exception")
        if isinstance(exc, (*_GONE, asyncio.CancelledError)):
            return
        what = f": {type(exc).__name__}: {exc}" if exc is not None else ""
        self._on_error(f"gputui: exporter: {context.get('message', 'error')}{what}")

    async def _connection(self, reader: asyncio.StreamReader,
                          writer: asyncio.StreamWriter) -> None:
        if len(self._conns) >= self.max_connections:
            idle = next((w for w, reading in self._conns.items() if reading), None)
            if idle is None:  # every one is being answered: this one waits its turn elsewhere
                self.dropped += 1
                writer.transport.abort()
                return
            del self._conns[idle]
            idle.transport.abort()  # its handler sees the hang-up and counts it dropped
        self._conns[writer] = True
        answered = False
        try:
            try:
                head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"),
                                              self.read_timeout_s)
            except asyncio.LimitOverrunError:
                head = None  # a head over MAX_HEAD_BYTES
            if writer in self._conns:
                self._conns[writer] = False
            answer = _TOO_LARGE if head is None else await self._answer(head)
            lines = [f"HTTP/1.1 {answer.code} {_REASONS[answer.code]}",
                     f"Content-Type: {answer.content_type}",
                     f"Content-Length: {len(answer.body)}", "Connection: close",
                     *(f"{k}: {v}" for k, v in (*answer.headers, *self._web.headers))]
            writer.write(("\r\n".join(lines) + "\r\n\r\n").encode()
                         + (b"" if answer.head_only else answer.body))
            await asyncio.wait_for(writer.drain(), self.write_timeout_s)
            answered = True
            self.served += 1
            if head is None:
                await self._linger(reader, writer)
        except _GONE:
            pass  # hung up or too slow: drop it, say nothing
        except Exception as exc:  # a bug: one line, and the server goes on
            self._on_error(f"gputui: exporter: {type(exc).__name__}: {exc}")
        finally:
            self._conns.pop(writer, None)
            if answered:
                writer.close()
            else:
                self.dropped += 1
                writer.transport.abort()

    async def _linger(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """Let the client read an early answer: end our side, drop what it still sends."""
        if writer.can_write_eof():
            writer.write_eof()
        loop = asyncio.get_running_loop()
        end = loop.time() + self.read_timeout_s
        dropped = 0
        while dropped < LINGER_BYTES and (left := end - loop.time()) > 0:
            chunk = await asyncio.wait_for(reader.read(65536), left)
            if not chunk:
                return
            dropped += len(chunk)

    async def _answer(self, head: bytes) -> Answer:
        lines = head.split(b"\r\n")
        parts = lines[0].decode("latin-1").split()
        if len(parts) != 3 or not parts[2].startswith("HTTP/"):
            return Answer(400, b"bad request\n")
        method, target = parts[0], parts[1]
        head_only = method == "HEAD"
        if self.auth is not None:
            verdict = await self.auth.check(_header(lines[1:], b"authorization"))
            if verdict is not Verdict.OK:
                return replace(_BUSY if verdict is Verdict.BUSY else _UNAUTHORIZED,
                               head_only=head_only)
        if method not in ("GET", "HEAD"):
            return Answer(405, b"only GET and HEAD\n")
        path = target.split("?", 1)[0]
        if path == "/metrics":
            try:
                return Answer(200, render(self.registry.collect()), CONTENT_TYPE, head_only)
            except Exception as exc:  # report, don't hang up without an answer
                return Answer(500, f"gputui: collecting metrics failed: {exc}\n".encode(),
                              head_only=head_only)
        if path == "/":
            return Answer(200, _INDEX, "text/html; charset=utf-8", head_only)
        return Answer(404, b"not found; metrics are at /metrics\n", head_only=head_only)


def _header(lines: list[bytes], name: bytes) -> str | None:
    """The first value of header `name` (lower case) among a request's header lines."""
    for line in lines:
        key, sep, value = line.partition(b":")
        if sep and key.strip().lower() == name:
            return value.strip().decode("latin-1")
    return None
