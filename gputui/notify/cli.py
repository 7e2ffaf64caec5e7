"""The --notify-* flags of `gputui`, `gputui watch` and `gputui export`, and the Notifier
their settings make. Merging them over GPUTUI_NOTIFY_WEBHOOK and config.toml's [notify]
table is the commands' (gputui.commands.config_args): notify/ never reads config.toml."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from gputui.notify.settings import (
    KNOWN_KINDS,
    WEBHOOK_ENV,
    NotifySettings,
    check_webhook_url,
    min_duration_problem,
)

if TYPE_CHECKING:
    from gputui.notify.notifier import Notifier

def webhook_url(text: str) -> str:
    why = check_webhook_url(text)
    if why:  # never echo the value: a webhook URL carries its secret
        raise argparse.ArgumentTypeError(why)
    return text


def kinds_list(text: str) -> frozenset[str]:
    kinds = [k.strip() for k in text.split(",") if k.strip()]
    unknown = [k for k in kinds if k not in KNOWN_KINDS]
    if unknown or not kinds:
        what = f"unknown kind {unknown[0]!r}" if unknown else "no kind given"
        raise argparse.ArgumentTypeError(f"{what} (known: {', '.join(KNOWN_KINDS)})")
    return frozenset(kinds)


def seconds_or_zero(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    why = min_duration_problem(value)
    if why:
        raise argparse.ArgumentTypeError(f"{why}: {text!r}")
    return value


def add_notify_arguments(parser: argparse.ArgumentParser, *, terminal: bool = False) -> None:
    g = parser.add_argument_group(
        "notifications", "alerts sent as JSON events when they start and end (also set in "
        f"config.toml's [notify] table, webhooks in {WEBHOOK_ENV} too; flags win)")
    g.add_argument("--notify-webhook-file", action="append", metavar="PATH",
                   help="POST each event's JSON to the URLs in PATH, one per line (a file "
                   "only you can read: chmod 600); repeatable; Slack and Mattermost incoming "
                   f"webhooks show its text. Or set {WEBHOOK_ENV}='URL ...'")
    g.add_argument("--notify-webhook", action="append", type=webhook_url, metavar="URL",
                   help="the same for one URL given here (repeatable); every local user can "
                   "read a command line, so prefer the file or the environment for a URL "
                   "that holds a secret")
    g.add_argument("--notify-command", metavar="CMD",
                   help="run CMD through the shell for each event: JSON on standard input, "
                   "GPUTUI_EVENT, GPUTUI_KIND, GPUTUI_GPU, GPUTUI_HOST, GPUTUI_TEXT set")
    if terminal:
        g.add_argument("--notify-terminal", action=argparse.BooleanOptionalAction,
                       default=None, help="ring the terminal bell and show a desktop "
                       "notification (OSC 9 / OSC 777; through ssh and tmux)")
    g.add_argument("--notify-min-duration", type=seconds_or_zero, metavar="SECONDS",
                   help="send a condition only once it has lasted SECONDS (default 0)")
    g.add_argument("--notify-kinds", type=kinds_list, metavar="LIST",
                   help=f"comma-separated kinds to send (default all: {','.join(KNOWN_KINDS)})")


def stderr_line(line: str) -> None:
    print(f"gputui: {line}", file=sys.stderr, flush=True)


def make_notifier(settings: NotifySettings,
                  report: Callable[[str], None] = stderr_line) -> Notifier | None:
    """A Notifier with the webhook and command sinks (the TUI adds the terminal one), or
    None when nothing is to be notified."""
    if not settings.any_sink:
        return None
    from gputui.notify.command import CommandSink
    from gputui.notify.events import EventTracker
    from gputui.notify.notifier import Notifier
    from gputui.notify.sinks import Sink
    from gputui.notify.webhook import WebhookSink

    sinks: list[Sink] = [WebhookSink(url) for url in settings.webhooks]
    if settings.command:
        sinks.append(CommandSink(settings.command))
    tracker = EventTracker(min_duration_s=settings.min_duration_s, kinds=settings.kinds)
    return Notifier(tracker, sinks, report=report)


def finish(notifier: Notifier | None, drain_s: float | None = None) -> Sequence[str]:
    """Close the notifier (queued events get `drain_s` to go out); returns, and prints on
    stderr, one line per sink that did not deliver everything."""
    if notifier is None:
        return []
    from gputui.notify.notifier import DRAIN_S, summary_lines

    drain_s = DRAIN_S if drain_s is None else drain_s
    lines = summary_lines(notifier.close(drain_s), notifier.sent)
    for line in lines:
        stderr_line(line)
    return lines
