"""Where events go: an HTTP webhook, or a command run through the shell.

A sink's `send` runs on its own worker thread (gputui.notify.notifier) and raises
DeliveryError with a one-line reason when the event could not be delivered. Nothing
here ever puts a webhook URL's path, query or password into a message: a URL is named
by its host (and port) only, because Slack and Mattermost webhooks carry their secret
in the path.
"""

from __future__ import annotations

import base64
import contextlib
import os
import signal
import ssl
import subprocess
import threading
from dataclasses import dataclass
from typing import Protocol
from urllib.parse import unquote, urlsplit, urlunsplit

from gputui import __version__
from gputui.notify.events import Event

WEBHOOK_TIMEOUT_S = 5.0
WEBHOOK_ATTEMPTS = 3  # the first try and two retries
WEBHOOK_BACKOFF_S = 1.0  # before the first retry; doubled for each further one
COMMAND_TIMEOUT_S = 30.0


class DeliveryError(Exception):
    """One line saying why an event was not delivered (never a secret)."""


class Sink(Protocol):
    name: str  # what a report calls this sink: "webhook hooks.slack.com", "command"

    def send(self, event: Event, stop: threading.Event) -> None:
        """Deliver one event or raise DeliveryError; give up early once `stop` is set."""


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


def split_userinfo(url: str) -> tuple[str, str | None]:
    """(the URL without `user:password@`, a Basic Authorization header for them or None):
    urllib does not take credentials from the URL itself."""
    parts = urlsplit(url)
    if parts.username is None:
        return url, None
    netloc = parts.netloc.rpartition("@")[2]
    creds = f"{unquote(parts.username)}:{unquote(parts.password or '')}"
    header = "Basic " + base64.b64encode(creds.encode("utf-8")).decode("ascii")
    return urlunsplit(parts._replace(netloc=netloc)), header


@dataclass
class WebhookSink:
    """POST the event's JSON. Retries (with doubling back-off) what may pass on a second
    try: no answer, a refused connection, HTTP 5xx, 408 and 429."""

    url: str
    timeout_s: float = WEBHOOK_TIMEOUT_S
    attempts: int = WEBHOOK_ATTEMPTS
    backoff_s: float = WEBHOOK_BACKOFF_S

    @property
    def name(self) -> str:
        return f"webhook {url_host(self.url)}"

    def send(self, event: Event, stop: threading.Event) -> None:
        body = event.to_json().encode("utf-8")
        reason = "not sent"
        for attempt in range(self.attempts):
            if attempt:
                if stop.wait(self.backoff_s * 2 ** (attempt - 1)):
                    break
            try:
                self._post(body)
                return
            except _Permanent as exc:
                raise DeliveryError(str(exc)) from None
            except DeliveryError as exc:
                reason = str(exc)
        raise DeliveryError(reason)

    def _post(self, body: bytes) -> None:
        # Imported on the first delivery (~6 ms): the monitor's start reads this module.
        import urllib.error
        import urllib.request

        url, auth = split_userinfo(self.url)
        headers = {"Content-Type": "application/json", "User-Agent": f"gputui/{__version__}"}
        if auth:
            headers["Authorization"] = auth
        req = urllib.request.Request(url, data=body, method="POST", headers=headers)
        try:
            with urllib.request.urlopen(req, timeout=self.timeout_s) as resp:
                resp.read(65536)
        except urllib.error.HTTPError as exc:
            reason = f"HTTP {exc.code}"
            if 400 <= exc.code < 500 and exc.code not in (408, 429):
                raise _Permanent(reason) from None
            raise DeliveryError(reason) from None
        except TimeoutError:
            raise DeliveryError(f"no answer within {self.timeout_s:g} s") from None
        except urllib.error.URLError as exc:
            if isinstance(exc.reason, TimeoutError):
                raise DeliveryError(f"no answer within {self.timeout_s:g} s") from None
            raise DeliveryError(_oserror_words(exc.reason)) from None
        except Exception as exc:  # http.client's own errors too: one line, never the URL
            raise DeliveryError(_oserror_words(exc)) from None


class _Permanent(DeliveryError):
    """A refusal a retry would only repeat (HTTP 4xx)."""


def _oserror_words(exc: object) -> str:
    """An error in words that cannot quote the URL: an OS error's own words, a TLS error's
    message, else only the error's type (a ValueError from http.client quotes the path)."""
    if isinstance(exc, ssl.SSLError):
        return f"TLS: {exc.reason or type(exc).__name__}"
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror.lower()
    return type(exc).__name__


@dataclass
class CommandSink:
    """Run `command` through the shell with the event's JSON on standard input and its
    essentials in GPUTUI_EVENT, GPUTUI_KIND, GPUTUI_GPU, GPUTUI_HOST, GPUTUI_TEXT. Killed
    (with whatever it started) after `timeout_s`."""

    command: str
    timeout_s: float = COMMAND_TIMEOUT_S
    name: str = "command"

    def send(self, event: Event, stop: threading.Event) -> None:
        env = dict(os.environ)
        env.update(GPUTUI_EVENT=event.event, GPUTUI_KIND=event.kind,
                   GPUTUI_GPU="" if event.gpu is None else str(event.gpu),
                   GPUTUI_HOST=event.host, GPUTUI_TEXT=event.text)
        try:
            # Its own session: a timeout kills the whole process group, not just the shell.
            proc = subprocess.Popen(self.command, shell=True, env=env, stdin=subprocess.PIPE,
                                    stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                    start_new_session=True)
        except OSError as exc:
            raise DeliveryError(f"cannot start: {_oserror_words(exc)}") from None
        try:
            _out, err = proc.communicate((event.to_json() + "\n").encode("utf-8"),
                                         timeout=self.timeout_s)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(OSError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
            raise DeliveryError(f"still running after {self.timeout_s:g} s, killed") from None
        if proc.returncode != 0:
            last = (err or b"").decode("utf-8", "replace").strip().splitlines()
            detail = f": {last[-1][:200]}" if last else ""
            how = (f"killed by signal {-proc.returncode}" if proc.returncode < 0
                   else f"exit status {proc.returncode}")
            raise DeliveryError(f"{how}{detail}")
