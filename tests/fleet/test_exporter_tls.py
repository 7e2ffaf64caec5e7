"""The exporter behind a web config: TLS and basic auth read by real clients (urllib and
ssl with the test CA), oversized headers, and password floods. All on 127.0.0.1."""

from __future__ import annotations

import base64
import http.client
import shutil
import socket
import ssl
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import bcrypt
import pytest

from gputui.fleet import basic_auth, web_config
from tests.fleet.conftest import (
    LOOPBACK,
    ExporterFactory,
    http_get,
    serving,
    value,
    wait_for,
)

TLS_DIR = Path(__file__).parent / "tls"
PASSWORD = "correct horse"
HASH = bcrypt.hashpw(PASSWORD.encode(), bcrypt.gensalt(4)).decode()  # cost 4: quick


def client_context(*, cert: bool = False) -> ssl.SSLContext:
    """What a careful client uses: the test CA, hostname checked, strict X.509 checks
    (Python 3.13's default)."""
    ctx = ssl.create_default_context(cafile=TLS_DIR / "ca.pem")
    ctx.verify_flags |= ssl.VERIFY_X509_STRICT
    if cert:
        ctx.load_cert_chain(TLS_DIR / "client.pem", TLS_DIR / "client-key.pem")
    return ctx


def opener(user: str | None = "prometheus", password: str = PASSWORD, *,
           ctx: ssl.SSLContext | None = None) -> urllib.request.OpenerDirector:
    """urllib as Prometheus scrapes: basic auth sent with the request, no proxy."""
    o = urllib.request.build_opener(urllib.request.ProxyHandler({}),
                                    urllib.request.HTTPSHandler(context=ctx or client_context()))
    if user is not None:
        token = base64.b64encode(f"{user}:{password}".encode()).decode()
        o.addheaders = [("Authorization", f"Basic {token}")]
    return o


def status(url: str, o: urllib.request.OpenerDirector,
           headers: dict[str, str] | None = None) -> tuple[int, http.client.HTTPMessage, bytes]:
    try:
        with o.open(urllib.request.Request(url, headers=headers or {}), timeout=10) as resp:
            return resp.status, resp.headers, resp.read()
    except urllib.error.HTTPError as err:
        with err:
            return err.code, err.headers, err.read()


@pytest.fixture
def web_file(tmp_path: Path) -> Iterator[Path]:
    for name in ("server.pem", "server-key.pem", "ca.pem"):
        shutil.copy(TLS_DIR / name, tmp_path / name)
    path = tmp_path / "web.yml"
    path.write_text(f"""# as for node_exporter
tls_server_config:
  cert_file: server.pem
  key_file: server-key.pem
basic_auth_users:
  prometheus: '{HASH}'
http_server_config:
  headers:
    X-Content-Type-Options: nosniff
""")
    yield path


def test_prometheus_reads_the_exporter_over_tls_with_its_password(
        start_exporter: ExporterFactory, web_file: Path) -> None:
    exp = start_exporter("two_gpus", hostname="node-a", opener=opener(),
                         extra=("--web.config.file", str(web_file)))
    assert exp.scheme == "https"
    assert f"serving metrics on https://{LOOPBACK}:{exp.port}/metrics (basic auth)" \
        in exp.stdout.read_text()
    page = exp.scrape()
    assert value(page, "gputui_up") == 1
    assert value(page, "DCGM_FI_DEV_GPU_UTIL", gpu="0") == 87

    for who in (opener(None), opener(password="wrong"), opener("nobody")):
        code, headers, body = status(exp.url, who)
        assert code == 401 and headers["WWW-Authenticate"].startswith("Basic ")
        assert b"DCGM" not in body
        assert headers["X-Content-Type-Options"] == "nosniff"
    # A client that does not trust the certificate refuses it: the page is really TLS.
    with pytest.raises(urllib.error.URLError) as err:
        status(exp.url, opener(ctx=ssl.create_default_context()))
    assert isinstance(err.value.reason, ssl.SSLCertVerificationError)
    # Plain HTTP to the TLS port fails (no page, no hang), and the exporter goes on serving.
    with pytest.raises((OSError, http.client.HTTPException)):
        http_get(exp.url.replace("https://", "http://"))
    assert value(exp.scrape(), "gputui_up") == 1
    assert exp.stop() == 0
    assert exp.stderr.read_text() == ""


def _tls_server_config(tmp_path: Path, extra: str = "") -> web_config.WebConfig:
    for name in ("server.pem", "server-key.pem", "ca.pem"):
        shutil.copy(TLS_DIR / name, tmp_path / name)
    path = tmp_path / "web.yml"
    path.write_text("tls_server_config:\n  cert_file: server.pem\n  key_file: server-key.pem\n"
                    + extra)
    return web_config.load(path)


@pytest.mark.parametrize("tls", [False, True], ids=["http", "https"])
def test_an_oversized_header_gets_431_and_the_next_request_is_served(
        tls: bool, tmp_path: Path) -> None:
    web = _tls_server_config(tmp_path) if tls else None
    with serving(web=web) as server:
        url = f"{'https' if tls else 'http'}://{LOOPBACK}:{server.port}/metrics"
        o = opener(None)
        code, _, body = status(url, o, {"Cookie": "x" * 20_000})
        assert code == 431 and body == b"request headers larger than 16 KiB\n"
        code, _, body = status(url, o)
        assert code == 200 and b"test_value 42.0" in body


def test_a_client_still_sending_a_huge_head_reads_its_431() -> None:
    with serving() as server, socket.create_connection((LOOPBACK, server.port), 10) as s:
        s.sendall(b"GET /metrics HTTP/1.1\r\nX-Big: " + b"x" * 300_000)  # and never ends it
        answer = b""
        while chunk := s.recv(65536):
            answer += chunk
        assert answer.startswith(b"HTTP/1.1 431 Request Header Fields Too Large\r\n")


def _web(users: dict[str, str]) -> web_config.WebConfig:
    return web_config.WebConfig(users={u: h.encode() for u, h in users.items()})


def test_a_password_that_passed_is_not_checked_with_bcrypt_again() -> None:
    with serving(web=_web({"prometheus": HASH})) as server:
        url = f"http://{LOOPBACK}:{server.port}/metrics"
        for _ in range(5):
            assert status(url, opener())[0] == 200
        assert server.auth is not None and server.auth.checks == 1
        assert status(url, opener(password="wrong"))[0] == 401
        assert status(url, opener(password="wrong"))[0] == 401  # a wrong one is never kept
        assert server.auth.checks == 3
        assert status(url, opener())[0] == 200
        assert server.auth.checks == 3


def test_a_flood_of_wrong_passwords_neither_delays_a_known_scraper_nor_queues_unbounded(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Wrong passwords are held inside bcrypt until the test lets them go, standing for a
    flood that keeps the check busy."""
    gate = threading.Event()
    real = basic_auth._checkpw

    def slow_for_wrong(password: bytes, hashed: bytes) -> bool:
        if password != PASSWORD.encode():
            gate.wait(30)
        return real(password, hashed)

    monkeypatch.setattr(basic_auth, "_checkpw", slow_for_wrong)
    with serving(web=_web({"prometheus": HASH})) as server:
        auth = server.auth
        assert auth is not None
        url = f"http://{LOOPBACK}:{server.port}/metrics"
        assert status(url, opener())[0] == 200  # Prometheus' first scrape: checked, kept
        codes: list[int] = []
        flood = [threading.Thread(target=lambda: codes.append(
            status(url, opener(password="guess"))[0])) for _ in range(basic_auth.MAX_WAITING)]
        for t in flood:
            t.start()
        wait_for(lambda: auth._waiting == basic_auth.MAX_WAITING, 10, "the queue to fill")
        # While bcrypt is busy with the flood: one more guess is turned away at once, and
        # Prometheus' scrape is answered without waiting for any of it.
        code, headers, _ = status(url, opener(password="one more guess"))
        assert code == 503 and headers["Retry-After"] == "1"
        assert status(url, opener())[0] == 200
        assert codes == []  # the flood is still waiting
        gate.set()
        for t in flood:
            t.join(10)
        assert codes == [401] * basic_auth.MAX_WAITING


def test_client_certificates_when_the_file_requires_them(tmp_path: Path) -> None:
    web = _tls_server_config(tmp_path, "  client_ca_file: ca.pem\n"
                                       "  client_auth_type: RequireAndVerifyClientCert\n")
    with serving(web=web) as server:
        url = f"https://{LOOPBACK}:{server.port}/metrics"
        code, _, body = status(url, opener(None, ctx=client_context(cert=True)))
        assert code == 200 and b"test_value 42.0" in body
        with pytest.raises((OSError, http.client.HTTPException)):
            status(url, opener(None))  # no client certificate
        assert status(url, opener(None, ctx=client_context(cert=True)))[0] == 200


def test_a_client_that_never_starts_its_handshake_is_hung_up_on(tmp_path: Path) -> None:
    with serving(web=_tls_server_config(tmp_path), read_timeout_s=0.3) as server:
        with socket.create_connection((LOOPBACK, server.port), 10) as s:
            assert s.recv(100) == b""  # closed by the server (10 s is the test's own limit)
        assert status(f"https://{LOOPBACK}:{server.port}/metrics", opener(None))[0] == 200


def test_answers_are_sent_without_waiting_for_acks(tmp_path: Path) -> None:
    """Nagle's algorithm off on every connection: with it, a TLS answer waited ~40 ms
    behind the session tickets sent just before it (the client delays its ACK)."""
    with serving(web=_tls_server_config(tmp_path), read_timeout_s=30) as server, \
            socket.create_connection((LOOPBACK, server.port), 10) as raw, \
            client_context().wrap_socket(raw, server_hostname=LOOPBACK) as s:
        s.sendall(b"GET /metrics HTTP/1.1\r\n")  # the rest of the request never comes
        wait_for(lambda: server.open_connections == 1, 10, "the connection to be accepted")
        (writer,) = server._conns
        sock = writer.get_extra_info("socket")
        assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) != 0
