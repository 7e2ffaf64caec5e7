"""What the user names on the command line: exporter targets and a Prometheus server's URL."""

from __future__ import annotations

import ipaddress
import re
import urllib.parse
from dataclasses import dataclass

from gputui.fleet.errors import TargetError
from gputui.fleet.hostport import HostPortError, parse_port, split_host_port


@dataclass(frozen=True, slots=True)
class Target:
    name: str  # what the user typed, tidied (host:port or the URL)
    url: str


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
        return Target(raw, _metrics_url(raw, text))
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


def parse_prometheus_url(text: str) -> str:
    """A Prometheus server's base URL (`http://` implied), without a trailing slash."""
    raw = text.strip()
    if "://" not in raw:
        raw = "http://" + raw
    parts = urllib.parse.urlsplit(raw)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise TargetError(f"not a Prometheus URL: {text!r} (e.g. http://prometheus:9090)")
    try:
        parts.port  # noqa: B018 -- raises on a bad port
    except ValueError:
        raise TargetError(f"bad port in {text!r}") from None
    check_host(parts.hostname, text)
    return urllib.parse.urlunsplit((parts.scheme, parts.netloc, parts.path.rstrip("/"), "", ""))
