"""`gputui export --web.config.file`: what a file turns on, and every way it can be wrong
(one `gputui: web config FILE: …` line, exit 2, before anything listens)."""

from __future__ import annotations

import ast
import os
import shutil
import ssl
from pathlib import Path

import bcrypt
import pytest

from gputui.fleet import web_config
from tests.cli import CliResult
from tests.conftest import CliRunner
from tests.fleet.conftest import LOOPBACK, listening_socket

TLS_DIR = Path(__file__).parent / "tls"
HASH = bcrypt.hashpw(b"s3cret", bcrypt.gensalt(4)).decode()  # cost 4: quick to check


@pytest.fixture
def certs(tmp_path: Path) -> Path:
    """The test certificates copied beside the config files the tests write."""
    for name in ("server.pem", "server-key.pem", "client.pem", "client-key.pem", "ca.pem",
                 "encrypted-key.pem"):
        shutil.copy(TLS_DIR / name, tmp_path / name)
    return tmp_path


def write(directory: Path, text: str, name: str = "web.yml") -> Path:
    path = directory / name
    path.write_text(text)
    return path


def test_tls_users_and_headers_are_read_with_paths_relative_to_the_file(
        certs: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    path = write(certs, f"""
tls_server_config:
  cert_file: server.pem
  key_file: {certs / 'server-key.pem'}
  min_version: TLS13
basic_auth_users:
  prometheus: {HASH}
http_server_config:
  headers:
    X-Content-Type-Options: nosniff
    Strict-Transport-Security: max-age=31536000
""")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)  # not where the certificates are
    cfg = web_config.load(path)
    assert cfg.tls is not None and cfg.tls.minimum_version == ssl.TLSVersion.TLSv1_3
    assert dict(cfg.users) == {"prometheus": HASH.encode()}
    assert cfg.headers == (("X-Content-Type-Options", "nosniff"),
                           ("Strict-Transport-Security", "max-age=31536000"))


@pytest.mark.parametrize("text", ["", "# nothing yet\n", "tls_server_config:\n"
                                  "basic_auth_users:\n"])
def test_a_file_that_asks_for_nothing_serves_plain_http(tmp_path: Path, text: str) -> None:
    cfg = web_config.load(write(tmp_path, text))
    assert cfg.tls is None and not cfg.users and cfg.headers == ()


BAD = {
    "unknown key": ("tls_server_confg:\n  cert_file: server.pem\n",
                    "unknown key 'tls_server_confg'"),
    "unknown tls key": ("tls_server_config:\n  cert_file: server.pem\n  key_file: "
                        "server-key.pem\n  certfile: x\n",
                        "unknown key 'tls_server_config.certfile'"),
    "missing cert": ("tls_server_config:\n  cert_file: nope.pem\n  key_file: server-key.pem\n",
                     "cannot read cert_file"),
    "no key_file": ("tls_server_config:\n  cert_file: server.pem\n",
                    "needs both cert_file and key_file"),
    "key of another cert": ("tls_server_config:\n  cert_file: server.pem\n  key_file: "
                            "client-key.pem\n", "not a matching PEM certificate and key"),
    "encrypted key": ("tls_server_config:\n  cert_file: server.pem\n  key_file: "
                      "encrypted-key.pem\n", "is encrypted"),
    "bad hash": ("basic_auth_users:\n  alice: secret\n", "the hash for 'alice' is not a bcrypt"),
    "cost too high": ("basic_auth_users:\n  alice: $2y$32$" + "a" * 53 + "\n", "has cost 32"),
    "user with colon": (f"basic_auth_users:\n  'a:b': {HASH}\n", "cannot be a user name"),
    "users as a string": ("basic_auth_users: alice\n", "basic_auth_users must be a mapping"),
    "inline cert": ("tls_server_config:\n  cert: |\n    -----BEGIN CERTIFICATE-----\n",
                    "line 2: multi-line values (|) are not supported"),
    "inline cert on one line": ("tls_server_config:\n  cert: x\n",
                                "inline certificates are not supported: use cert_file"),
    "old TLS": ("tls_server_config:\n  cert_file: server.pem\n  key_file: server-key.pem\n"
                "  min_version: TLS10\n", "TLS 1.0 and 1.1 are not offered"),
    "CA without a policy": ("tls_server_config:\n  cert_file: server.pem\n  key_file: "
                            "server-key.pem\n  client_ca_file: ca.pem\n",
                            "client_auth_type is NoClientCert"),
    "any client cert": ("tls_server_config:\n  cert_file: server.pem\n  key_file: "
                        "server-key.pem\n  client_ca_file: ca.pem\n  client_auth_type: "
                        "RequireAnyClientCert\n", "accepts any certificate"),
    "rate limit": ("rate_limit:\n  interval: 1s\n  burst: 20\n", "rate_limit is not supported"),
    "header not allowed": ("http_server_config:\n  headers:\n    Server: gputui\n",
                           "'Server' cannot be set"),
    "header value": ("http_server_config:\n  headers:\n    X-Frame-Options: allow\n",
                     "X-Frame-Options must be one of deny, sameorigin"),
    "not YAML we read": ("basic_auth_users:\n  - alice\n", "line 2: lists are not supported"),
}


def _refused(result: CliResult, name: str, words: str) -> None:
    assert result.returncode == 2, result
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith(f"gputui: web config {name}: "), lines[0]
    assert words in lines[0], lines[0]
    assert "Traceback" not in result.stderr and result.stdout == ""


@pytest.mark.parametrize("case", list(BAD))
def test_a_bad_file_is_one_line_and_exit_2_before_listening(
        case: str, certs: Path, cli: CliRunner) -> None:
    text, words = BAD[case]
    path = write(certs, text)
    # The port is taken: had the exporter tried to listen, it would say so and exit 1.
    with listening_socket() as port:
        result = cli("export", "--listen", f"{LOOPBACK}:{port}", "--web.config.file",
                     str(path))
    _refused(result, str(path), words)


def test_a_file_that_cannot_be_read_is_one_line_and_exit_2(tmp_path: Path,
                                                           cli: CliRunner) -> None:
    missing = tmp_path / "missing.yml"
    _refused(cli("export", "--web.config.file", str(missing)), str(missing),
             "cannot read it: No such file or directory")
    fifo = tmp_path / "fifo.yml"
    os.mkfifo(fifo)  # opening one for reading would wait for a writer forever
    _refused(cli("export", "--web.config.file", str(fifo)), str(fifo), "not a regular file")
    _refused(cli("export", "--web.config.file", str(tmp_path)), str(tmp_path),
             "not a regular file")
    big = write(tmp_path, "# x\n" * 300_000, "big.yml")
    _refused(cli("export", "--web.config.file", str(big)), str(big), "larger than 1024 KiB")
    binary = tmp_path / "binary.yml"
    binary.write_bytes(b"\xff\xfe\x00garbage")
    _refused(cli("export", "--web.config.file", str(binary)), str(binary), "not UTF-8")


def test_bcrypt_is_loaded_only_by_the_exporter_and_only_when_a_password_is_checked() -> None:
    """The monitor and the other commands never load it: it is imported inside the two
    functions that need it."""
    pkg = Path(web_config.__file__).parents[1]
    where = []
    for path in sorted(pkg.rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        if "bcrypt" not in text:
            continue
        tree = ast.parse(text)
        for node in ast.walk(tree):
            if isinstance(node, ast.Import) and any(a.name == "bcrypt" for a in node.names):
                where.append(path.relative_to(pkg).as_posix())
        top = [n for n in tree.body if isinstance(n, ast.Import | ast.ImportFrom)]
        assert not any(isinstance(n, ast.Import) and n.names[0].name == "bcrypt" for n in top)
    assert sorted(where) == ["fleet/basic_auth.py", "fleet/web_config.py"]
