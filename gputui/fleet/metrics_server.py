"""The exporter's HTTP side: /metrics on one asyncio event loop, bounded and quiet.

Not http.server's ThreadingHTTPServer: it starts a thread per connection (1,000
half-sent requests held 1,003 threads), has no read timeout, and prints a traceback
to stderr for every client that hangs up early. Here one thread serves every
connection; a request must arrive within `read_timeout_s` and its answer leave within
`write_timeout_s`; at most `max_connections` are open at once — a new one pushes out
the oldest that has still not sent its request, so idle connections cannot lock a
real scrape out —; and a client that goes away is nobody's error. Each answer closes
its connection (Prometheus reconnects at each scrape anyway).
"""

from __future__ import annotations

import asyncio
import errno
import socket
import sys
import threading
from collections.abc import Callable

from prometheus_client.registry import CollectorRegistry

from gputui.fleet.exposition import CONTENT_TYPE, render
from gputui.fleet.listen import ListenAddress

READ_TIMEOUT_S = 10.0  # Prometheus' default scrape timeout: a request slower than that is dead
WRITE_TIMEOUT_S = 10.0
MAX_CONNECTIONS = 256
MAX_HEAD_BYTES = 16 * 1024  # request line and headers; a scrape sends a few hundred bytes

_INDEX = (b"<html><body><h1>gputui exporter</h1>"
          b'<p><a href="/metrics">/metrics</a></p></body></html>\n')
_TEXT = "text/plain; charset=utf-8"
_REASONS = {200: "OK", 400: "Bad Request", 404: "Not Found", 405: "Method Not Allowed",
            500: "Internal Server Error"}
# What a client hanging up, or a timeout, looks like to the server: not an error of ours.
_GONE = (ConnectionError, TimeoutError, asyncio.IncompleteReadError, asyncio.LimitOverrunError,
         OSError)


class BindError(Exception):
    """The listening socket could not be opened; `usage` tells a bad address from a busy port."""

    def __init__(self, message: str, *, usage: bool) -> None:
        super().__init__(message)
        self.usage = usage


def _bind(addr: ListenAddress) -> socket.socket:
    sock = socket.socket(addr.family, socket.SOCK_STREAM)
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
                 read_timeout_s: float = READ_TIMEOUT_S,
                 write_timeout_s: float = WRITE_TIMEOUT_S,
                 max_connections: int = MAX_CONNECTIONS,
                 on_error: Callable[[str], object] | None = None) -> None:
        self.registry = registry
        self.read_timeout_s = read_timeout_s
        self.write_timeout_s = write_timeout_s
        self.max_connections = max_connections
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

    async def _serve(self, poll_interval: float) -> None:
        loop = asyncio.get_running_loop()
        loop.set_exception_handler(self._loop_error)
        server = await asyncio.start_server(self._connection, sock=self._sock,
                                            limit=MAX_HEAD_BYTES)
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
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), self.read_timeout_s)
            if writer in self._conns:
                self._conns[writer] = False
            code, body, ctype, head_only = self._answer(head)
            writer.write(
                f"HTTP/1.1 {code} {_REASONS[code]}\r\nContent-Type: {ctype}\r\n"
                f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode()
                + (b"" if head_only else body))
            await asyncio.wait_for(writer.drain(), self.write_timeout_s)
            answered = True
            self.served += 1
        except _GONE:
            pass  # hung up, too slow, or sent something too large: drop it, say nothing
        except Exception as exc:  # a bug: one line, and the server goes on
            self._on_error(f"gputui: exporter: {type(exc).__name__}: {exc}")
        finally:
            self._conns.pop(writer, None)
            if answered:
                writer.close()
            else:
                self.dropped += 1
                writer.transport.abort()

    def _answer(self, head: bytes) -> tuple[int, bytes, str, bool]:
        line = head.split(b"\r\n", 1)[0].decode("latin-1")
        parts = line.split()
        if len(parts) != 3 or not parts[2].startswith("HTTP/"):
            return 400, b"bad request\n", _TEXT, False
        method, target = parts[0], parts[1]
        if method not in ("GET", "HEAD"):
            return 405, b"only GET and HEAD\n", _TEXT, False
        head_only = method == "HEAD"
        path = target.split("?", 1)[0]
        if path == "/metrics":
            try:
                return 200, render(self.registry.collect()), CONTENT_TYPE, head_only
            except Exception as exc:  # report, don't hang up without an answer
                return (500, f"gputui: collecting metrics failed: {exc}\n".encode(), _TEXT,
                        head_only)
        if path == "/":
            return 200, _INDEX, "text/html; charset=utf-8", head_only
        return 404, b"not found; metrics are at /metrics\n", _TEXT, head_only


