"""`gputui export --web.config.file`: TLS and basic auth in node_exporter's file format.

The format is Prometheus exporter-toolkit's web configuration (what node_exporter and most
Prometheus exporters read), so one file can serve them all:

    tls_server_config:
      cert_file: server.crt        # relative paths are relative to this file
      key_file: server.key
    basic_auth_users:
      prometheus: $2y$10$...       # bcrypt hash (htpasswd -nBC 10 "" | tr -d ':\\n')

Supported: `tls_server_config` with `cert_file`, `key_file`, `client_ca_file`,
`client_auth_type` (NoClientCert, VerifyClientCertIfGiven, RequireAndVerifyClientCert),
`min_version`/`max_version` (TLS12, TLS13) and `prefer_server_cipher_suites`;
`http_server_config` with `headers` (exporter-toolkit's five, checked as it checks them)
and `http2` (accepted; gputui answers HTTP/1.1); `basic_auth_users`. What the format has
and gputui does not do (inline certificates, cipher and curve lists, SAN checks, the
"accept any client certificate" policies, `rate_limit`) is refused with one line rather
than ignored: a file that asks for protection gputui cannot give must not start serving
without it. The file is read once, at start-up, and everything in it (certificate and key
included) is checked before the port is opened.
"""

from __future__ import annotations

import os
import re
import ssl
import stat
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from gputui.fleet.yaml_subset import YamlSubsetError, parse

MAX_FILE_BYTES = 1024 * 1024  # a web config is a few hundred bytes; /dev/zero is not one

# htpasswd -B and Go's bcrypt write $2y$/$2a$/$2b$; cost 04..31 as bcrypt allows.
_BCRYPT = re.compile(r"^\$2[abxy]\$(\d\d)\$[./A-Za-z0-9]{53}$")

_TLS_VERSIONS = {"TLS12": ssl.TLSVersion.TLSv1_2, "TLS13": ssl.TLSVersion.TLSv1_3}
_CLIENT_AUTH = {"NoClientCert": ssl.CERT_NONE, "VerifyClientCertIfGiven": ssl.CERT_OPTIONAL,
                "RequireAndVerifyClientCert": ssl.CERT_REQUIRED}
# exporter-toolkit's extra headers: the only ones it lets a file set, with the values it
# accepts where they are an enumeration (None: any value).
_HEADERS: dict[str, tuple[str, ...] | None] = {
    "Strict-Transport-Security": None, "X-Content-Type-Options": ("nosniff",),
    "X-Frame-Options": ("deny", "sameorigin"), "X-XSS-Protection": None,
    "Content-Security-Policy": None,
}
_NOT_SUPPORTED = {
    "cert": "inline certificates are not supported: use cert_file",
    "key": "inline keys are not supported: use key_file",
    "client_ca": "inline CA certificates are not supported: use client_ca_file",
    "cipher_suites": "cipher_suites is not supported (gputui uses OpenSSL's defaults)",
    "curve_preferences": "curve_preferences is not supported (gputui uses OpenSSL's "
                         "defaults)",
    "client_allowed_sans": "client_allowed_sans is not supported",
}


class WebConfigError(ValueError):
    """Why the file cannot be used, in one line (without the file's name)."""


class BcryptMissing(WebConfigError):
    """basic_auth_users is set and the bcrypt package cannot be imported."""


@dataclass(frozen=True)
class WebConfig:
    """What the file asks for. `tls` is a ready server context (None: plain HTTP); `users`
    maps each user name to its bcrypt hash (empty: no authentication)."""

    tls: ssl.SSLContext | None = None
    users: Mapping[str, bytes] = field(default_factory=dict)
    headers: tuple[tuple[str, str], ...] = ()


def read_file(path: Path) -> str:
    """The file's text; WebConfigError for anything but a small, readable, regular file.

    Opened without blocking and checked before reading, so a FIFO cannot hang start-up
    and /dev/zero cannot fill memory.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        raise WebConfigError(f"cannot read it: {exc.strerror or exc}") from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise WebConfigError("not a regular file")
        with os.fdopen(fd, "rb", closefd=False) as f:
            data = f.read(MAX_FILE_BYTES + 1)
    except OSError as exc:
        raise WebConfigError(f"cannot read it: {exc.strerror or exc}") from None
    finally:
        os.close(fd)
    if len(data) > MAX_FILE_BYTES:
        raise WebConfigError(f"larger than {MAX_FILE_BYTES // 1024} KiB: not a web config")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise WebConfigError("not UTF-8 text") from None


def load(path: Path) -> WebConfig:
    """Read and check `path` (certificate and key loaded, hashes checked), or
    WebConfigError saying what is wrong."""
    try:
        doc = parse(read_file(path))
    except YamlSubsetError as exc:
        raise WebConfigError(str(exc)) from None
    _known(doc, "", ("tls_server_config", "http_server_config", "basic_auth_users"),
           {"rate_limit": "rate_limit is not supported"})
    tls_section = _section(doc, "tls_server_config")
    # An empty tls_server_config is no TLS, as exporter-toolkit reads it.
    return WebConfig(tls=_tls(tls_section, path.parent) if tls_section else None,
                     users=_users(_section(doc, "basic_auth_users")),
                     headers=_headers(_section(doc, "http_server_config")))


def _known(mapping: Mapping[str, object], where: str, keys: tuple[str, ...],
           refused: Mapping[str, str]) -> None:
    for key in mapping:
        if key in refused:
            raise WebConfigError(f"{where}{refused[key]}")
        if key not in keys:
            raise WebConfigError(f"unknown key '{where}{key}' (known: {', '.join(keys)})")


def _section(mapping: Mapping[str, object], key: str) -> dict[str, object]:
    value = mapping.get(key)
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise WebConfigError(f"{key} must be a mapping (indented 'key: value' lines), "
                             f"not {value!r}")
    return value


def _string(mapping: Mapping[str, object], key: str, where: str) -> str | None:
    value = mapping.get(key)
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise WebConfigError(f"{where}{key} must be a string, not {value!r}")
    return value


def _readable(path: Path, what: str) -> None:
    try:
        with path.open("rb") as f:
            f.read(1)
    except OSError as exc:
        raise WebConfigError(f"cannot read {what} {path}: {exc.strerror or exc}") from None


def _tls(section: Mapping[str, object], base: Path) -> ssl.SSLContext:
    where = "tls_server_config."
    _known(section, where, ("cert_file", "key_file", "client_ca_file", "client_auth_type",
                            "min_version", "max_version", "prefer_server_cipher_suites"),
           _NOT_SUPPORTED)
    cert, key = _string(section, "cert_file", where), _string(section, "key_file", where)
    if cert is None or key is None:
        raise WebConfigError("tls_server_config needs both cert_file and key_file")
    cert_path, key_path = base / cert, base / key  # an absolute name stays as it is
    _readable(cert_path, "cert_file")
    _readable(key_path, "key_file")
    versions = []
    for name, default in (("min_version", "TLS12"), ("max_version", "TLS13")):
        text = _string(section, name, where) or default
        if text not in _TLS_VERSIONS:
            hint = " (TLS 1.0 and 1.1 are not offered)" if text in ("TLS10", "TLS11") else ""
            raise WebConfigError(f"{where}{name}: {text!r} is not one of "
                                 f"{', '.join(_TLS_VERSIONS)}{hint}")
        versions.append(_TLS_VERSIONS[text])
    if versions[0] > versions[1]:
        raise WebConfigError(f"{where}min_version is above max_version")
    client_auth = _string(section, "client_auth_type", where) or "NoClientCert"
    if client_auth not in _CLIENT_AUTH:
        if client_auth in ("RequestClientCert", "RequireAnyClientCert", "RequireClientCert"):
            raise WebConfigError(f"{where}client_auth_type {client_auth} accepts any "
                                 "certificate and is not supported: use "
                                 "RequireAndVerifyClientCert with client_ca_file")
        raise WebConfigError(f"{where}client_auth_type: unknown policy {client_auth!r} "
                             f"(known: {', '.join(_CLIENT_AUTH)})")
    ca = _string(section, "client_ca_file", where)
    if ca is not None and client_auth == "NoClientCert":
        raise WebConfigError(f"{where}client_ca_file is set but client_auth_type is "
                             "NoClientCert (use RequireAndVerifyClientCert)")
    if ca is None and client_auth != "NoClientCert":
        raise WebConfigError(f"{where}client_auth_type {client_auth} needs client_ca_file")
    prefer = section.get("prefer_server_cipher_suites", True)
    if not isinstance(prefer, bool):
        raise WebConfigError(f"{where}prefer_server_cipher_suites must be true or false")

    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version, ctx.maximum_version = versions
    if prefer:
        ctx.options |= ssl.OP_CIPHER_SERVER_PREFERENCE
    ctx.set_alpn_protocols(["http/1.1"])

    def no_passphrase() -> bytes:
        # Without this OpenSSL would ask for the passphrase on the terminal and wait.
        raise WebConfigError(f"key_file {key_path} is encrypted: gputui needs a key "
                             "without a passphrase")

    try:
        ctx.load_cert_chain(cert_path, key_path, password=no_passphrase)
    except ssl.SSLError as exc:
        raise WebConfigError(f"cert_file {cert_path} and key_file {key_path} are not a "
                             f"matching PEM certificate and key ({exc.reason or exc})") from None
    except OSError as exc:
        raise WebConfigError(f"cannot load cert_file {cert_path} / key_file {key_path}: "
                             f"{exc.strerror or exc}") from None
    if ca is not None:
        ca_path = base / ca
        _readable(ca_path, "client_ca_file")
        try:
            ctx.load_verify_locations(cafile=ca_path)
        except (ssl.SSLError, OSError) as exc:
            raise WebConfigError(f"client_ca_file {ca_path} holds no usable PEM certificate "
                                 f"({getattr(exc, 'reason', None) or exc})") from None
        ctx.verify_mode = _CLIENT_AUTH[client_auth]
    return ctx


def _users(section: Mapping[str, object]) -> dict[str, bytes]:
    users: dict[str, bytes] = {}
    for user, hashed in section.items():
        if not user or ":" in user:
            raise WebConfigError(f"basic_auth_users: {user!r} cannot be a user name "
                                 "(empty, or with ':', which basic auth cannot carry)")
        match = _BCRYPT.match(hashed) if isinstance(hashed, str) else None
        if match is None:
            raise WebConfigError(f"basic_auth_users: the hash for {user!r} is not a bcrypt "
                                 "hash ($2y$10$ and 53 more characters; make one with "
                                 "htpasswd -nBC 10 \"\" | tr -d ':\\n')")
        cost = int(match.group(1))
        if not 4 <= cost <= 31:
            raise WebConfigError(f"basic_auth_users: the hash for {user!r} has cost {cost}; "
                                 "bcrypt's is 04 to 31")
        users[user] = hashed.encode("ascii")  # type: ignore[union-attr]
    if users:
        try:
            import bcrypt  # noqa: F401 -- checked here so a missing package fails at start-up
        except ImportError:
            raise BcryptMissing("basic_auth_users needs the bcrypt package "
                                "(pip install bcrypt)") from None
    return users


def _headers(section: Mapping[str, object]) -> tuple[tuple[str, str], ...]:
    where = "http_server_config."
    _known(section, where, ("headers", "http2"), {})
    http2 = section.get("http2", True)
    if not isinstance(http2, bool):
        raise WebConfigError(f"{where}http2 must be true or false")
    out: list[tuple[str, str]] = []
    for name, value in _section(section, "headers").items():
        if name not in _HEADERS:
            raise WebConfigError(f"{where}headers: {name!r} cannot be set (these can: "
                                 f"{', '.join(_HEADERS)})")
        if value is None or value == "":
            continue  # blank: not sent, as exporter-toolkit reads it
        if not isinstance(value, str) or not (value.isascii() and value.isprintable()):
            raise WebConfigError(f"{where}headers: {name} must be a one-line ASCII string")
        allowed = _HEADERS[name]
        if allowed is not None and value not in allowed:
            raise WebConfigError(f"{where}headers: {name} must be one of "
                                 f"{', '.join(allowed)}, not {value!r}")
        out.append((name, value))
    return tuple(out)
