"""The webhook sink: each event's JSON POSTed to a URL within one deadline, no redirect
ever followed.

It speaks http.client over a socket it connects itself, not urllib, which (1) follows a
redirect by turning the POST into a bodiless GET, sending Authorization to whatever host
the answer names and counting that host's 200 as delivered, and (2) bounds each socket
read with its timeout, not the exchange, so a server answering one byte at a time held
the sink forever. Here:

- A 3xx answer is a failed delivery, named by its target's host, and not retried.
- Retried, twice (after 1 s, then 2 s): no connection, no complete answer within the
  deadline, a TLS failure other than the certificate's, HTTP 408, 429, 500, 502, 503 and
  504. Everything else (a redirect, other 4xx and 5xx, a certificate that does not
  verify) would only fail again.
- One deadline (5 s) bounds a whole try: connecting, the TLS handshake, sending, the
  answer's headers and body. A watchdog shuts the connection down when it passes,
  wherever the try is blocked, and at once when gputui is ending. Only the host name's
  resolution is outside it (the system resolver's own timeout bounds that).
- Proxies from the environment (http_proxy, https_proxy, no_proxy) are used as urllib
  uses them: an http:// URL through the proxy, an https:// one through a CONNECT tunnel.
"""

from __future__ import annotations

import base64
import contextlib
import socket
import ssl
import threading
import time
from dataclasses import dataclass, field
from datetime import UTC
from urllib.parse import unquote, urljoin, urlsplit

from gputui import __version__
from gputui.notify.events import Event
from gputui.notify.sinks import DeliveryError, url_host
from gputui.safe_text import printable

WEBHOOK_DEADLINE_S = 5.0  # one try, from connecting to the answer's last byte
WEBHOOK_ATTEMPTS = 3  # the first try and two retries
WEBHOOK_BACKOFF_S = 1.0  # before the first retry; doubled for each further one
RETRIED_STATUSES = frozenset({408, 429, 500, 502, 503, 504})
# The longest Retry-After a sink waits for (429, 503): its events queue meanwhile. Asked
# to wait longer, it gives the event up at once and says how long it was asked to wait.
RETRY_AFTER_MAX_S = 60.0
RETRY_AFTER_LONGEST_S = 1e9  # a header's wait is read as at most this (about 32 years)
ANSWER_MAX_BYTES = 64 * 1024  # of an answer's body: read, then the connection is closed
PROXY_ANSWER_MAX_BYTES = 16 * 1024  # a proxy's answer to CONNECT
WATCH_POLL_S = 0.05  # how often the watchdog looks at the deadline and at `stop`


class _Permanent(DeliveryError):
    """A failure a retry would only repeat."""


@dataclass
class WebhookSink:
    """POST the event's JSON to `url` (credentials in it go as HTTP basic auth)."""

    url: str
    deadline_s: float = WEBHOOK_DEADLINE_S
    attempts: int = WEBHOOK_ATTEMPTS
    backoff_s: float = WEBHOOK_BACKOFF_S
    _tls: ssl.SSLContext | None = field(default=None, init=False, repr=False)

    @property
    def name(self) -> str:
        return f"webhook {url_host(self.url)}"

    def send(self, event: Event, stop: threading.Event) -> None:
        body = event.to_json().encode("utf-8")
        reason = "not sent: gputui is ending"
        asked_s: float | None = None  # the last answer's Retry-After
        for attempt in range(self.attempts):
            if attempt:
                wait_s = self.backoff_s * 2 ** (attempt - 1)
                if stop.wait(wait_s if asked_s is None else max(wait_s, asked_s)):
                    break
            if stop.is_set():
                break
            try:
                status, location, asked_s = self._try(body, stop)
            except _Permanent as exc:
                raise DeliveryError(str(exc)) from None
            except DeliveryError as exc:
                reason, asked_s = str(exc), None
                continue
            if 200 <= status < 300:
                return
            reason = _status_words(self.url, status, location)
            if status not in RETRIED_STATUSES:
                break
            if asked_s is not None and asked_s > RETRY_AFTER_MAX_S:
                reason += f", asked to retry after {asked_s:.0f} s"
                break
        raise DeliveryError(reason)

    def _try(self, body: bytes, stop: threading.Event
             ) -> tuple[int, str | None, float | None]:
        """One POST: the answer's status, Location header and Retry-After (seconds; for a
        429 or 503 only), or DeliveryError."""
        # Imported on the first delivery: the monitor's start reads this module.
        import http.client

        route = _route(self.url)
        watchdog = _Watchdog(self.deadline_s, stop)
        sock: socket.socket | None = None
        conn: http.client.HTTPConnection | None = None
        try:
            sock = watchdog.connect(route.connect_host, route.connect_port)
            if route.tls:
                if route.via_proxy:
                    _open_tunnel(sock, route)
                sock = self._context().wrap_socket(sock, server_hostname=route.host)
                conn = http.client.HTTPSConnection(route.host, route.port,
                                                   context=self._context())
            else:
                conn = http.client.HTTPConnection(route.host, route.port)
            conn.sock = sock  # connected (and watched) here: http.client only frames
            headers = {"Content-Type": "application/json", "User-Agent": f"gputui/{__version__}",
                       "Connection": "close", **route.headers}
            conn.request("POST", route.target, body, headers)
            resp = conn.getresponse()
            status, location = resp.status, resp.getheader("Location")
            asked = retry_after_s(resp.getheader("Retry-After")) if status in (429, 503) \
                else None
            with contextlib.suppress(Exception):  # the status is the verdict; the body is
                resp.read(ANSWER_MAX_BYTES)  # read (bounded) only to close politely
            return status, location, asked
        except Exception as exc:
            if watchdog.fired == "stop":
                raise DeliveryError("not sent: gputui is ending") from None
            if watchdog.fired == "deadline" or isinstance(exc, TimeoutError):
                raise DeliveryError(f"no complete answer within {self.deadline_s:g} s") from None
            if isinstance(exc, DeliveryError):
                raise
            if isinstance(exc, ssl.SSLCertVerificationError | http.client.InvalidURL):
                raise _Permanent(_error_words(exc)) from None
            raise DeliveryError(_error_words(exc)) from None
        finally:
            watchdog.close()
            if conn is not None:
                conn.close()
            if sock is not None:
                sock.close()

    def _context(self) -> ssl.SSLContext:
        if self._tls is None:
            self._tls = ssl.create_default_context()
            self._tls.set_alpn_protocols(["http/1.1"])
        return self._tls


@dataclass(frozen=True, slots=True)
class _Route:
    """Where a try connects and what its request says."""

    tls: bool
    host: str  # the webhook's
    port: int
    connect_host: str  # the proxy's, or the webhook's
    connect_port: int
    via_proxy: bool
    target: str  # the request line's: the path, or the whole URL to a plain HTTP proxy
    headers: dict[str, str]  # Authorization; Proxy-Authorization to a plain HTTP proxy
    tunnel_headers: dict[str, str]  # Proxy-Authorization for CONNECT


def _route(url: str) -> _Route:
    parts = urlsplit(url)
    tls = parts.scheme == "https"
    host = parts.hostname or ""
    port = parts.port or (443 if tls else 80)
    target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    headers = {}
    if parts.username is not None:  # http.client does not take credentials from a URL
        headers["Authorization"] = _basic(parts.username, parts.password)
    proxy = _proxy_for(parts.scheme, host, parts.port)
    if proxy is None:
        return _Route(tls, host, port, host, port, False, target, headers, {})
    p = urlsplit(proxy if "://" in proxy else f"http://{proxy}")
    proxy_auth = {} if p.username is None else {
        "Proxy-Authorization": _basic(p.username, p.password)}
    if tls:
        return _Route(tls, host, port, p.hostname or "", p.port or 80, True, target, headers,
                      proxy_auth)
    netloc = parts.netloc.rpartition("@")[2]  # never the credentials in the request line
    return _Route(tls, host, port, p.hostname or "", p.port or 80, True,
                  f"http://{netloc}{target}", {**headers, **proxy_auth}, {})


def _proxy_for(scheme: str, host: str, port: int | None) -> str | None:
    """The proxy the environment names for this URL (urllib's rules), or None."""
    import urllib.request

    proxy = urllib.request.getproxies().get(scheme)
    if not proxy:
        return None
    if urllib.request.proxy_bypass(f"{host}:{port}" if port else host):
        return None
    return proxy


def _basic(user: str, password: str | None) -> str:
    creds = f"{unquote(user)}:{unquote(password or '')}"
    return "Basic " + base64.b64encode(creds.encode("utf-8")).decode("ascii")


def _open_tunnel(sock: socket.socket, route: _Route) -> None:
    """CONNECT through the proxy to the webhook's host (the watchdog bounds it too)."""
    hostport = f"[{route.host}]:{route.port}" if ":" in route.host else \
        f"{route.host}:{route.port}"
    lines = [f"CONNECT {hostport} HTTP/1.1", f"Host: {hostport}",
             *(f"{k}: {v}" for k, v in route.tunnel_headers.items())]
    sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode("idna"))
    head = b""
    while b"\r\n\r\n" not in head:
        chunk = sock.recv(4096)
        if not chunk:
            raise DeliveryError("the proxy closed the connection")
        head += chunk
        if len(head) > PROXY_ANSWER_MAX_BYTES:
            raise DeliveryError("the proxy's answer to CONNECT is too long")
    words = head.split(b"\r\n", 1)[0].split()
    status = int(words[1]) if len(words) > 1 and words[1].isdigit() else 0
    if status != 200:
        why = f"the proxy answered HTTP {status} to CONNECT"
        raise DeliveryError(why) if status in RETRIED_STATUSES else _Permanent(why)


class _Watchdog:
    """Shuts a try's connection down when its deadline passes or `stop` is set, wherever
    the try is blocked: a socket's timeout bounds each wait, not the sum of them. It
    holds a duplicate of the socket's descriptor, so it can reach the connection while
    TLS wraps the socket and never touches a descriptor the try has closed."""

    def __init__(self, deadline_s: float, stop: threading.Event) -> None:
        self._end = time.monotonic() + deadline_s
        self._deadline_s = deadline_s
        self._stop = stop
        self._lock = threading.Lock()
        self._done = threading.Event()
        self._socks: list[socket.socket] = []
        self.fired: str | None = None  # "deadline" or "stop"
        threading.Thread(target=self._watch, name="gputui-notify-deadline",
                         daemon=True).start()

    def left(self) -> float:
        return self._end - time.monotonic()

    def connect(self, host: str, port: int) -> socket.socket:
        """A TCP connection to host:port, every address tried within the deadline."""
        error: OSError = OSError("no address for the host")
        for family, kind, proto, _name, addr in socket.getaddrinfo(
                host, port, type=socket.SOCK_STREAM):
            left = self.left()
            if left <= 0 or self.fired:
                raise TimeoutError
            sock = socket.socket(family, kind, proto)
            self._watch_socket(sock)
            try:
                sock.settimeout(left)
                sock.connect(addr)
            except OSError as exc:
                sock.close()
                error = exc
                continue
            sock.settimeout(self._deadline_s)  # each wait; the watchdog bounds their sum
            return sock
        raise error

    def _watch_socket(self, sock: socket.socket) -> None:
        dup = sock.dup()
        with self._lock:
            self._socks.append(dup)
            if self.fired:
                _shutdown(dup)

    def _watch(self) -> None:
        while not self._done.wait(min(WATCH_POLL_S, max(0.0, self.left()))):
            why = "stop" if self._stop.is_set() else "deadline" if self.left() <= 0 else None
            if why:
                with self._lock:
                    if self._done.is_set():
                        return
                    self.fired = why
                    for sock in self._socks:
                        _shutdown(sock)
                return

    def close(self) -> None:
        with self._lock:
            self._done.set()
            for sock in self._socks:
                sock.close()
            self._socks.clear()


def _shutdown(sock: socket.socket) -> None:
    # Wakes a recv, send or TLS handshake blocked on the connection in another thread.
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)


def retry_after_s(value: str | None, now: float | None = None) -> float | None:
    """A Retry-After header in seconds from now (RFC 9110: delay-seconds or an HTTP date);
    None when absent or not understood."""
    if value is None:
        return None
    value = value.strip()
    # RFC 9110's digits are ASCII; isdigit alone passes "²", which float() refuses.
    if value.isascii() and value.isdigit():
        # A wait past RETRY_AFTER_MAX_S is given up at once all the same; the bound keeps a
        # huge header's figure finite in the words that say so.
        return min(float(value), RETRY_AFTER_LONGEST_S)
    try:
        from email.utils import parsedate_to_datetime

        date = parsedate_to_datetime(value)
        if date.tzinfo is None:  # "-0000": UTC of unknown origin (RFC 5322), not local time
            date = date.replace(tzinfo=UTC)
        when = date.timestamp()
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    return max(0.0, when - (time.time() if now is None else now))


def _status_words(url: str, status: int, location: str | None) -> str:
    """An answer that is not a success, in words; a redirect names its target's host."""
    if not 300 <= status < 400:
        return f"HTTP {status}"
    try:
        dest = urlsplit(urljoin(url, location)) if location else None
    except ValueError:
        dest = None
    if dest is None:
        return f"HTTP {status} redirect, not followed"
    if dest.scheme not in ("http", "https"):
        return f"HTTP {status} redirect to a {printable(dest.scheme)}: URL, not followed"
    return f"HTTP {status} redirect to {printable(url_host(dest.geturl()))}, not followed"


def _error_words(exc: BaseException) -> str:
    """An error in words that cannot quote the URL: an OS error's own words, a TLS error's
    reason, else only the error's type (http.client's messages quote the path)."""
    if isinstance(exc, ssl.SSLCertVerificationError):
        return f"TLS: {exc.verify_message or 'certificate verify failed'}"
    if isinstance(exc, ssl.SSLError):
        return f"TLS: {exc.reason or type(exc).__name__}"
    if isinstance(exc, socket.gaierror):
        return "cannot resolve the host's name"
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror.lower()
    if type(exc).__name__ == "RemoteDisconnected":
        return "the server closed the connection without an answer"
    return type(exc).__name__
