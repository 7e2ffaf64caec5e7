"""`gputui fleet` reading exporters behind TLS and basic auth: the password from the URL or
from ~/.netrc, never shown, and never handed to another host by a redirect."""

from __future__ import annotations

import http.server
import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import bcrypt
import pytest
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from gputui.fleet.errors import TargetError
from gputui.fleet.fetch import fetch_text
from gputui.fleet.targets import parse_prometheus_url, parse_target, with_netrc
from gputui.fleet.web_config import WebConfig, load
from tests.conftest import CliRunner
from tests.fleet.conftest import LOOPBACK, LoopbackHttpServer, serving

TLS_DIR = Path(__file__).parent / "tls"
PASSWORD = "pa55 w/rd"  # a space and a slash: percent-encoded in a URL
HASH = bcrypt.hashpw(PASSWORD.encode(), bcrypt.gensalt(4)).decode()


class _Gpu(Collector):
    def collect(self) -> Iterator[Metric]:
        fam = GaugeMetricFamily("DCGM_FI_DEV_GPU_UTIL", "GPU utilisation (in %).",
                                labels=["gpu", "UUID", "modelName", "Hostname"])
        fam.add_metric(["0", "GPU-0000", "NVIDIA H100", "secure-node"], 87.0)
        yield fam


@pytest.fixture
def tls_web(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> WebConfig:
    """TLS with the test certificate and one user; the test CA trusted through
    SSL_CERT_FILE, as a user would point gputui at a private CA."""
    for name in ("server.pem", "server-key.pem"):
        shutil.copy(TLS_DIR / name, tmp_path / name)
    path = tmp_path / "web.yml"
    path.write_text(f"tls_server_config:\n  cert_file: server.pem\n  key_file: server-key.pem\n"
                    f"basic_auth_users:\n  prometheus: {HASH}\n")
    monkeypatch.setenv("SSL_CERT_FILE", str(TLS_DIR / "ca.pem"))
    monkeypatch.setenv("NETRC", str(tmp_path / "no-netrc"))
    return load(path)


def _host(cli: CliRunner, *args: str) -> tuple[dict, str, str]:
    result = cli("fleet", "--once", "--json", *args)
    doc = json.loads(result.stdout)
    assert len(doc["hosts"]) == 1
    return doc["hosts"][0], result.stdout, result.stderr


def test_fleet_reads_a_tls_exporter_with_the_password_and_never_shows_it(
        tls_web: WebConfig, cli: CliRunner, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    with serving(_Gpu(), web=tls_web) as server:
        where = f"{LOOPBACK}:{server.port}"
        # In the URL: read, with a warning that names the host and not the password.
        host, out, err = _host(cli, f"https://prometheus:pa55%20w%2Frd@{where}")
        assert host["state"] == "up" and host["gpus"][0]["util_gpu_pct"] == 87
        assert host["target"] == f"https://{where}"
        assert "pa55" not in out and "pa55" not in err
        assert err.startswith(f"gputui: warning: the password for {LOOPBACK} is on the "
                              "command line")
        # From the netrc file: read, no warning.
        netrc = tmp_path / "netrc"
        netrc.write_text(f"machine {LOOPBACK}\n  login prometheus\n  password \"{PASSWORD}\"\n")
        monkeypatch.setenv("NETRC", str(netrc))
        host, out, err = _host(cli, f"https://{where}")
        assert host["state"] == "up" and err == ""
        # Without a password, or a wrong one: the host's error says which.
        netrc.write_text("")
        host, _, _ = _host(cli, f"https://{where}")
        assert host["error"].startswith("HTTP 401 Unauthorized: it wants a user and password")
        host, _, _ = _host(cli, f"https://prometheus:nope@{where}")
        assert host["error"] == "HTTP 401 Unauthorized: wrong user or password"


def test_a_bad_netrc_is_one_line_and_exit_2(tmp_path: Path, cli: CliRunner,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    netrc = tmp_path / "netrc"
    netrc.write_text("machine\n")
    monkeypatch.setenv("NETRC", str(netrc))
    result = cli("fleet", "--once", "node1:9400")
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"gputui: {netrc}: ")


def test_credentials_stay_out_of_names_urls_reprs_and_errors(tmp_path: Path) -> None:
    t = parse_target("https://bob:s3cret@node1:9400")
    assert (t.name, t.url) == ("https://node1:9400", "https://node1:9400/metrics")
    assert t.auth == "Basic Ym9iOnMzY3JldA==" and "s3cret" not in repr(t)
    p = parse_prometheus_url("https://bob:s3cret@prom:9090/")
    assert (p.url, p.auth) == ("https://prom:9090", "Basic Ym9iOnMzY3JldA==")
    for bad in ("https://bob:s3cret@node1:99999", "bob:s3cret@node1:9400"):
        with pytest.raises(TargetError) as err:
            parse_target(bad)
        assert "s3cret" not in str(err.value)
    # The netrc file fills in only what the command line left empty; `default` for others.
    netrc = tmp_path / "netrc"
    netrc.write_text("machine node1 login ann password one\ndefault login any password two\n")
    got = with_netrc([parse_target("node1:9400"), parse_target("node2:9400"), t], netrc)
    assert [x.auth for x in got] == ["Basic YW5uOm9uZQ==", "Basic YW55OnR3bw==", t.auth]


class _Recorder(LoopbackHttpServer):
    """Redirects /away to `to` and answers anything else with 200; records the
    Authorization header of every request it gets."""

    def __init__(self, to: str = "") -> None:
        self.seen: list[str | None] = []
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                outer.seen.append(self.headers.get("Authorization"))
                if self.path == "/away":
                    self.send_response(302)
                    self.send_header("Location", to)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                self.send_response(200)
                self.send_header("Content-Length", "3")
                self.end_headers()
                self.wfile.write(b"ok\n")

            def log_message(self, format: str, *args: object) -> None:
                pass

        self._serve(Handler)


def test_a_redirect_to_another_host_or_port_goes_without_the_password() -> None:
    other = _Recorder()
    first = _Recorder(f"http://{other.target}/metrics")
    same = _Recorder("/metrics")  # a redirect within the same server
    try:
        assert fetch_text(f"http://{first.target}/away", 5, "Basic c2VjcmV0") == "ok\n"
        assert first.seen == ["Basic c2VjcmV0"] and other.seen == [None]
        assert fetch_text(f"http://{same.target}/away", 5, "Basic c2VjcmV0") == "ok\n"
        assert same.seen == ["Basic c2VjcmV0", "Basic c2VjcmV0"]
    finally:
        for srv in (first, other, same):
            srv.close()
