"""What to notify and where: the [notify] table of config.toml, or the --notify-* flags."""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlsplit

# What --notify-kinds and [notify] kinds accept: the event kinds of today's alerts
# (gputui.notify.events.EVENT_KIND), and the training-job one.
KNOWN_KINDS = ("throttle", "temperature", "memory_temperature", "memory_full", "remap", "lost",
               "stale", "xid", "ecc", "clock_change", "gpm_busy", "job_slowdown")


@dataclass(frozen=True, slots=True)
class NotifySettings:
    """Where notifications go and which are sent."""

    webhooks: tuple[str, ...] = ()  # secrets: never printed (gputui.notify.sinks.url_host)
    command: str | None = None
    terminal: bool = False  # bell + desktop notification through the terminal (the TUI)
    min_duration_s: float = 0.0
    kinds: frozenset[str] | None = None  # None: every kind

    @property
    def any_sink(self) -> bool:
        return bool(self.webhooks or self.command or self.terminal)


def check_webhook_url(url: str) -> str | None:
    """Why `url` cannot be a webhook (a reason without the URL in it), or None."""
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises ValueError for a malformed port
    except ValueError:
        return "not a valid URL"
    if any(ord(c) <= 0x20 or ord(c) == 0x7F for c in url):
        return "the URL contains spaces or control characters"
    if parts.scheme not in ("http", "https"):
        return "not an http:// or https:// URL"
    if not parts.hostname:
        return "no host in the URL"
    return None
