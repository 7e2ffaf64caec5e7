"""`host:port` and `[v6]:port`, split the same way for `export --listen` and fleet targets."""

from __future__ import annotations


class HostPortError(ValueError):
    """Not HOST:PORT; the message is one line meant for the user."""


def split_host_port(text: str) -> tuple[str, str]:
    """(host, port text) of `host:port` or `[v6]:port`; the host may be empty (`:9400`).

    Neither part is validated beyond its shape: the callers accept different hosts (an
    exporter binds only to IP literals, a target may be any host name).
    """
    raw = text.strip()
    if raw.startswith("["):
        close = raw.find("]")
        if close < 0 or raw[close + 1:close + 2] != ":":
            raise HostPortError(f"not HOST:PORT: {text!r} (IPv6 looks like [::1]:9400)")
        return raw[1:close], raw[close + 2:]
    host, sep, port = raw.rpartition(":")
    if not sep:
        raise HostPortError(f"not HOST:PORT: {text!r} (e.g. gpu-node-1:9400)")
    if ":" in host:
        raise HostPortError(f"not HOST:PORT: {text!r} (write IPv6 as [::1]:9400)")
    return host, port


def parse_port(text: str, where: str, *, allow_zero: bool = False) -> int:
    """A TCP port number; `allow_zero` for a listener (0 = pick a free port)."""
    low = 0 if allow_zero else 1
    if not text.isdigit() or not low <= int(text) <= 65535:
        raise HostPortError(f"not a port number ({low}-65535): {text!r} in {where!r}")
    return int(text)
