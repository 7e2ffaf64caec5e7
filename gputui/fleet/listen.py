"""`gputui export --listen`: the address to serve on, checked before anything binds."""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Iterable
from dataclasses import dataclass

from gputui.fleet.hostport import HostPortError, parse_port, split_host_port

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 9400  # dcgm-exporter's port: dashboards and scrape configs expect it


class ListenAddressError(ValueError):
    """A --listen value that is not HOST:PORT (a usage error, exit 2)."""


@dataclass(frozen=True, slots=True)
class ListenAddress:
    host: str  # an IP literal; "" never appears (all interfaces is "0.0.0.0")
    port: int

    @property
    def family(self) -> socket.AddressFamily:
        return socket.AF_INET6 if ":" in self.host else socket.AF_INET

    def url(self, port: int | None = None, *, tls: bool = False) -> str:
        return f"{'https' if tls else 'http'}://{self._hostport(port)}/metrics"

    def _hostport(self, port: int | None = None) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port if port is None else port}"

    @property
    def where(self) -> str:
        """host:port as the user would write it ([v6]:port)."""
        return self._hostport()


def parse_listen(text: str) -> ListenAddress:
    """`127.0.0.1:9400`, `[::1]:9400`, `localhost:9400`, `:9400` (all interfaces) or `9400`.

    Only IP literals and `localhost` are accepted as hosts: an exporter binds to an
    address of this machine, and resolving other names could block on DNS.
    """
    raw = text.strip()
    if not raw:
        raise ListenAddressError("empty --listen address (expected HOST:PORT)")
    try:
        if raw.isdigit():
            host, port_text = DEFAULT_HOST, raw
        else:
            host, port_text = split_host_port(raw)
            if not raw.startswith("[") and host in ("", "*"):
                host = "0.0.0.0"
        port = parse_port(port_text, text, allow_zero=True)
    except HostPortError as exc:
        raise ListenAddressError(str(exc)) from None
    if host == "localhost":
        host = DEFAULT_HOST
    try:
        host = str(ipaddress.ip_address(host))
    except ValueError:
        raise ListenAddressError(
            f"not an IP address: {host!r} in {text!r} (use e.g. 127.0.0.1:9400)") from None
    return ListenAddress(host, port)


def machine_addresses() -> set[str] | None:
    """This machine's interface addresses (zones stripped), or None if they cannot be read."""
    try:
        import psutil

        found = psutil.net_if_addrs()
    except Exception:  # no psutil support here: leave the verdict to bind()
        return None
    out: set[str] = set()
    for addrs in found.values():
        for a in addrs:
            if a.family in (socket.AF_INET, socket.AF_INET6):
                try:
                    out.add(str(ipaddress.ip_address(a.address.split("%", 1)[0])))
                except ValueError:
                    continue
    return out


def check_local(addr: ListenAddress, local: Iterable[str] | None = None) -> None:
    """ListenAddressError unless `addr` can be served from this machine.

    Checked before binding: a foreign address is bad usage, and the kernel's answer for
    some (EINVAL for a link-local IPv6 without a zone) would otherwise read as a runtime
    failure. `local`: this machine's addresses (default: read from the interfaces).
    """
    ip = ipaddress.ip_address(addr.host)
    if ip.is_unspecified or ip.is_loopback:
        return
    if isinstance(ip, ipaddress.IPv6Address) and ip.is_link_local and not ip.scope_id:
        raise ListenAddressError(
            f"cannot listen on {addr.where}: a link-local IPv6 address needs a zone "
            f"(e.g. [{ip}%eth0]:{addr.port}) and must be one of this machine's")
    known = machine_addresses() if local is None else set(local)
    if known is None:
        return
    plain = str(ip).split("%", 1)[0]
    if plain not in {str(ipaddress.ip_address(a.split("%", 1)[0])) for a in known}:
        raise ListenAddressError(f"cannot listen on {addr.where}: not an address of this "
                                 "machine")
