"""What to notify and where: the [notify] table of config.toml, the environment, or the
--notify-* flags; and the webhook sources that keep a URL's secret out of the command line.

A webhook URL carries its secret (Slack's and Mattermost's in the path), and a command
line is readable by every local user (`ps`). So webhooks can come from
GPUTUI_NOTIFY_WEBHOOK (URLs separated by spaces), from a file of one URL per line that
only its owner can read (--notify-webhook-file, [notify] webhooks_file), or from
config.toml; --notify-webhook still works but warns when its URL carries a secret.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from gputui.errors import UsageError

# What --notify-kinds and [notify] kinds accept: the event kinds of today's alerts
# (gputui.notify.events.EVENT_KIND), and the training-job one.
KNOWN_KINDS = ("throttle", "temperature", "memory_temperature", "memory_full", "remap", "lost",
               "stale", "xid", "ecc", "clock_change", "gpm_busy", "job_slowdown")
WEBHOOK_ENV = "GPUTUI_NOTIFY_WEBHOOK"
WEBHOOK_FILE_MAX_BYTES = 64 * 1024  # hundreds of URLs


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


def min_duration_problem(value: float) -> str | None:
    """Why `value` cannot be the seconds a condition must last, or None (the one bound
    --notify-min-duration and [notify] min_duration share)."""
    if not (value >= 0 and math.isfinite(value)):
        return "must be a number of seconds (0 or more)"
    return None


def carries_secret(url: str) -> bool:
    """Whether the URL holds more than a host: a path, a query or credentials (what a
    Slack, Mattermost or token-in-the-URL webhook keeps secret)."""
    parts = urlsplit(url)
    return (parts.path not in ("", "/") or bool(parts.query) or parts.username is not None
            or parts.password is not None)


def webhooks_from_env(value: str) -> tuple[str, ...]:
    """The URLs of GPUTUI_NOTIFY_WEBHOOK (separated by spaces); UsageError without the URL
    for one that cannot be a webhook."""
    urls = tuple(value.split())
    for n, url in enumerate(urls, 1):
        why = check_webhook_url(url)
        if why:
            where = f", URL {n}" if len(urls) > 1 else ""
            raise UsageError(f"{WEBHOOK_ENV}{where}: {why}")
    return urls


def read_webhooks_file(path: Path) -> tuple[str, ...]:
    """The URLs in a webhook file: one per line; blank lines and lines starting with `#`
    ignored. Refused (UsageError, one line naming the file, never a URL) when it is
    missing, not a regular file, over 64 KiB, holds no URL or a bad one, or when other
    users can read or change it: a file of secrets is kept as ssh keeps a private key."""
    from gputui.user_file import UserFileError, read_text

    try:
        text = read_text(path, WEBHOOK_FILE_MAX_BYTES, private=True)
    except FileNotFoundError:
        raise UsageError(f"webhook file {path}: no such file") from None
    except UserFileError as exc:
        raise UsageError(f"webhook file {path}: {exc}") from None
    urls = []
    for n, line in enumerate(text.splitlines(), 1):
        url = line.strip()
        if not url or url.startswith("#"):
            continue
        why = check_webhook_url(url)
        if why:
            raise UsageError(f"webhook file {path}, line {n}: {why}")
        urls.append(url)
    if not urls:
        raise UsageError(f"webhook file {path}: no URL in it")
    return tuple(urls)
