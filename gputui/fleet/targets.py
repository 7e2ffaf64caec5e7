"""What the user names on the command line: exporter targets and a Prometheus server's URL,
and the basic-auth credentials to read them with.

Credentials come from the URL (`https://USER:PASSWORD@host:9400`) or, keeping the password
off the command line where `ps` shows it to every local user, from a netrc file
(`machine host login USER password PASSWORD`, as curl reads it: $NETRC or ~/.netrc). They
are kept apart from the URL and the name, so no output ever shows them.
"""

from __future__ import annotations

import base64
import ipaddress
import netrc
import os
import re
import urllib.parse
from dataclasses import dataclass, field, replace
from pathlib import Path

from gputui.fleet.errors import TargetError
from gputui.fleet.hostport import HostPortError, parse_port, split_host_port


@dataclass(frozen=True, slots=True)
class Target:
    name: str  # what the user typed, tidied (host:port or the URL), without credentials
    url: str
    # The Authorization header's value for basic auth; None: none sent. Never shown.
    auth: str | None = field(default=None, repr=False)

    @property
    def host(self) -> str:
        return urllib.parse.urlsplit(self.url).hostname or ""


def basic_auth(user: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode("ascii")


def _without_userinfo(raw: str) -> tuple[str, str | None]:
    """(the URL without `user:password@`, the Authorization value it carried or None)."""
    parts = urllib.parse.urlsplit(raw)
    if "@" not in parts.netloc:
        return raw, None
    userinfo, _, hostport = parts.netloc.rpartition("@")
    user, _, password = userinfo.partition(":")
    auth = basic_auth(urllib.parse.unquote(user), urllib.parse.unquote(password))
    return urllib.parse.urlunsplit(parts._replace(netloc=hostport)), auth


_HOSTNAME = re.compile(r"^(?=.{1,253}$)[A-Za-z0-9]([A-Za-z0-9-]{0,62})"
                       r"(\.[A-Za-z0-9]([A-Za-z0-9-]{0,62}))*\.?$")


def check_host(host: str, text: str) -> None:
    """TargetError unless `host` is an IP address or a well-formed host name."""
    try:
        ipaddress.ip_address(host)
        return
    except ValueError:
        pass
    if not _HOSTNAME.match(host):
        raise TargetError(f"not a host name or IP address: {host!r} in {text!r}")


def parse_target(text: str) -> Target:
    """`host:port` (→ http://host:port/metrics), `[v6]:port`, or a full http(s) URL."""
    raw = text.strip()
    if "://" in raw:
        raw, auth = _without_userinfo(raw)
        return Target(raw, _metrics_url(raw, raw), auth)  # errors quote it without password
    if "@" in raw:
        raise TargetError("a user and password go in a URL (https://USER:PASSWORD@HOST:PORT) "
                          "or in ~/.netrc")
    try:
        host, port_text = split_host_port(raw)
        if not host:
            raise HostPortError(f"not HOST:PORT: {text!r} (e.g. gpu-node-1:9400)")
        port = parse_port(port_text, text)
    except HostPortError as exc:
        raise TargetError(str(exc)) from None
    if raw.startswith("["):
        try:
            ipaddress.IPv6Address(host)
        except ValueError:
            raise TargetError(f"not an IPv6 address: {host!r} in {text!r}") from None
        return Target(raw, f"http://[{host}]:{port}/metrics")
    check_host(host, text)
    return Target(raw, f"http://{host}:{port}/metrics")


def _metrics_url(raw: str, text: str) -> str:
    parts = urllib.parse.urlsplit(raw)
    if parts.scheme not in ("http", "https"):
        raise TargetError(f"only http:// and https:// URLs are supported: {text!r}")
    try:
        host, port = parts.hostname, parts.port
    except ValueError:
        raise TargetError(f"bad port in {text!r}") from None
    if not host:
        raise TargetError(f"no host in {text!r}")
    check_host(host, text)
    if port is not None and port == 0:
        raise TargetError(f"not a port number (1-65535): 0 in {text!r}")
    path = parts.path if parts.path not in ("", "/") else "/metrics"
    return urllib.parse.urlunsplit((parts.scheme, parts.netloc, path, parts.query, ""))


def parse_prometheus_url(text: str) -> Target:
    """A Prometheus server: its base URL (`http://` implied), without a trailing slash."""
    raw = text.strip()
    if "://" not in raw:
        raw = "http://" + raw
    raw, auth = _without_userinfo(raw)
    text = raw  # quoted in errors: without the password
    parts = urllib.parse.urlsplit(raw)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise TargetError(f"not a Prometheus URL: {text!r} (e.g. http://prometheus:9090)")
    try:
        parts.port  # noqa: B018 -- raises on a bad port
    except ValueError:
        raise TargetError(f"bad port in {text!r}") from None
    check_host(parts.hostname, text)
    base = urllib.parse.urlunsplit((parts.scheme, parts.netloc, parts.path.rstrip("/"), "", ""))
    return Target(base, base, auth)


def netrc_path() -> Path:
    return Path(os.environ.get("NETRC") or Path.home() / ".netrc")


def with_netrc(targets: list[Target], path: Path | None = None) -> list[Target]:
    """`targets`, those without credentials given theirs from the netrc file (by host
    name, or its `default` entry) when there is one; TargetError if it cannot be read."""
    path = netrc_path() if path is None else path
    if all(t.auth for t in targets) or not path.is_file():
        return targets
    try:
        entries = netrc.netrc(str(path))  # a path given: no prompt, no ownership check
    except netrc.NetrcParseError as exc:
        raise TargetError(f"{path}: {exc.msg} (line {exc.lineno})") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise TargetError(f"cannot read {path}: {getattr(exc, 'strerror', None) or exc}") \
            from None
    out = []
    for t in targets:
        found = None if t.auth else entries.authenticators(t.host)
        out.append(replace(t, auth=basic_auth(found[0], found[2] or "")) if found else t)
    return out
