"""HTTP GET with one deadline for the whole exchange, the body handed over as it arrives.

http.client directly, not urllib: urllib's timeout bounds each socket read, so a host
that sends its headers and then one byte every second would hold a scrape forever. Here
every request has one overall `Deadline`: a watchdog shuts the socket down when it passes
(that unblocks a read stuck anywhere, in the status line, the headers or the body), and
the body is handed out in chunks that check the deadline too — so whoever consumes the
chunks (the page parser) is bounded by the same deadline. No proxies: the fleet is
reached directly, and an http_proxy meant for the internet must not swallow (or leak)
requests to the monitored hosts.
"""

from __future__ import annotations

import contextlib
import http.client
import socket
import ssl
import threading
import time
import urllib.parse
import zlib
from collections.abc import Iterator
from dataclasses import dataclass

from gputui.fleet.errors import ScrapeError

DEFAULT_TIMEOUT_S = 2.0
MAX_BODY_BYTES = 32 * 1024 * 1024  # a runaway page must not eat the monitor's memory
MAX_REDIRECTS = 3
CHUNK_BYTES = 65536
USER_AGENT = "gputui-fleet"
MIB = 1024 * 1024


class Deadline:
    """The end of one request (fetch and parse); shuts the watched socket down when it passes."""

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
        """ScrapeError (down) once the deadline has passed: a late answer is no answer."""
        if self.expired.is_set() or self.left() <= 0:
            raise self.error()

    def error(self) -> ScrapeError:
        return ScrapeError(f"timed out: no complete answer within {self.seconds:g} s",
                           down=True)

    def cancel(self) -> None:
        self._timer.cancel()


@dataclass(frozen=True, slots=True)
class Page:
    """A 200 answer whose body is being read: `chunks()` yields it, bounded in size and time."""

    url: str
    charset: str | None
    encoding: str | None  # Content-Encoding ("gzip" where asked for and given)
    _resp: http.client.HTTPResponse
    _deadline: Deadline

    def chunks(self) -> Iterator[bytes]:
        size = 0
        while True:
            self._deadline.check()
            try:
                chunk = self._resp.read1(CHUNK_BYTES)
            except Exception as exc:
                if self._deadline.expired.is_set():
                    raise self._deadline.error() from None
                raise http_error(exc, self._deadline.seconds) from None
            if not chunk:
                break
            size += len(chunk)
            if size > MAX_BODY_BYTES:
                raise ScrapeError(f"page larger than {MAX_BODY_BYTES // MIB} MiB", down=False)
            yield chunk
        self._deadline.check()  # a shutdown by the watchdog looks like an early end of the page


def _origin(url: str) -> tuple[str, str, int | None]:
    parts = urllib.parse.urlsplit(url)
    return parts.scheme, (parts.hostname or "").lower(), parts.port


def _connect(url: str, deadline: Deadline, auth: str | None,
             gzip: bool) -> http.client.HTTPConnection:
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
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    headers = {"User-Agent": USER_AGENT, "Accept": "text/plain;version=0.0.4;q=1,*/*;q=0.1",
               "Connection": "close"}
    if auth is not None:
        headers["Authorization"] = auth
    if gzip:
        headers["Accept-Encoding"] = "gzip"
    conn.request("GET", path, headers=headers)
    return conn


@contextlib.contextmanager
def open_page(url: str, deadline: Deadline, auth: str | None = None, *,
              gzip: bool = False) -> Iterator[Page]:
    """GET `url`, following up to MAX_REDIRECTS redirects; ScrapeError unless it answers 200.

    `auth`: the Authorization header's value, sent to `url`'s scheme, host and port only
    (a redirect elsewhere goes without it). The whole exchange ends by `deadline`, except
    for a host name lookup, which no socket option can bound (the poller never waits for
    that longer than the timeout either).
    """
    for _ in range(MAX_REDIRECTS + 1):
        conn: http.client.HTTPConnection | None = None
        try:
            try:
                conn = _connect(url, deadline, auth, gzip)
                deadline.check()
                resp = conn.getresponse()
            except ScrapeError:
                raise
            except Exception as exc:
                if deadline.expired.is_set():
                    raise deadline.error() from None
                raise http_error(exc, deadline.seconds) from None
            location = resp.headers.get("Location")
            if resp.status in (301, 302, 303, 307, 308) and location:
                target = urllib.parse.urljoin(url, location)
                if urllib.parse.urlsplit(target).scheme not in ("http", "https"):
                    raise ScrapeError(f"redirected to a non-HTTP URL: {target}", down=False)
                if _origin(target) != _origin(url):
                    auth = None  # the password is for the host it was given for
                url = target
                continue
            if resp.status == 401:
                raise ScrapeError("HTTP 401 Unauthorized: " + (
                    "wrong user or password" if auth else
                    "it wants a user and password (https://USER:PASSWORD@HOST:PORT or "
                    "~/.netrc)"), down=False)
            if resp.status != 200:
                raise ScrapeError(f"HTTP {resp.status} {resp.reason}".rstrip(), down=False)
            yield Page(url, resp.headers.get_content_charset(),
                       resp.headers.get("Content-Encoding"), resp, deadline)
            return
        finally:
            if conn is not None:
                conn.close()
    raise ScrapeError(f"more than {MAX_REDIRECTS} redirects", down=False)


def fetch_text(url: str, timeout: float = DEFAULT_TIMEOUT_S, auth: str | None = None) -> str:
    """GET `url` and return its whole body as text; ScrapeError (down or not) for anything else.

    For answers read whole (Prometheus' API, asked for gzip: a thousand hosts' figures are
    ~1.5 MB of JSON, ~10 times less compressed); metrics pages are parsed as they stream in.
    """
    deadline = Deadline(timeout)
    try:
        with open_page(url, deadline, auth, gzip=True) as page:
            if page.encoding == "gzip":
                body = _gunzip(page.chunks())
            else:
                body = b"".join(page.chunks())
            try:
                return body.decode(page.charset or "utf-8", errors="replace")
            except LookupError:  # a charset Python does not know
                return body.decode("utf-8", errors="replace")
    finally:
        deadline.cancel()


def _gunzip(chunks: Iterator[bytes]) -> bytes:
    """A gzip body, bounded by MAX_BODY_BYTES once inflated too."""
    inflate = zlib.decompressobj(16 + zlib.MAX_WBITS)
    out: list[bytes] = []
    size = 0
    try:
        for chunk in chunks:
            part = inflate.decompress(chunk, MAX_BODY_BYTES + 1 - size)
            size += len(part)
            if size > MAX_BODY_BYTES or inflate.unconsumed_tail:
                raise ScrapeError(f"answer larger than {MAX_BODY_BYTES // MIB} MiB",
                                  down=False)
            out.append(part)
        out.append(inflate.flush())
    except zlib.error as exc:
        raise ScrapeError(f"bad gzip answer: {exc}", down=False) from None
    return b"".join(out)


def _first_line(text: str) -> str:
    line = text.strip().splitlines()[0] if text.strip() else ""
    return line[:60] + ("…" if len(line) > 60 else "")


def http_error(exc: Exception, timeout: float) -> ScrapeError:
    """What a failed exchange means for the user, in one line."""
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
