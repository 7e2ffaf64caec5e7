"""Where events go: what every sink is (a `send` that delivers one event or raises
DeliveryError), and how a webhook URL is named.

A sink's `send` runs on its own worker thread (gputui.notify.notifier) and raises
DeliveryError with a one-line reason when the event could not be delivered. The sinks:
`webhook.WebhookSink` (an HTTP POST), `command.CommandSink` (a shell command), and the
monitor's terminal sink (gputui.ui.terminal_notify). Nothing ever puts a webhook URL's
path, query or password into a message: a URL is named by its host (and port) only,
because Slack and Mattermost webhooks carry their secret in the path.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Protocol
from urllib.parse import urlsplit

if TYPE_CHECKING:
    from gputui.notify.events import Event


class DeliveryError(Exception):
    """One line saying why an event was not delivered (never a secret)."""


class Sink(Protocol):
    name: str  # what a report calls this sink: "webhook hooks.slack.com", "command"

    def send(self, event: Event, stop: threading.Event) -> None:
        """Deliver one event or raise DeliveryError; give up early once `stop` is set
        (gputui is ending: whatever the sink started must end with it)."""


def url_host(url: str) -> str:
    """The host (and port) of a URL, the only part of it ever shown."""
    try:
        parts = urlsplit(url)
        host = parts.hostname or "?"
        port = parts.port
    except ValueError:
        return "?"
    if ":" in host:
        host = f"[{host}]"
    return f"{host}:{port}" if port else host

