"""The --notify-* flags of `gputui`, `gputui watch` and `gputui export`, merged over
config.toml's [notify] table (flags win), and the Notifier they make."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from gputui.notify.settings import KNOWN_KINDS, NotifySettings, check_webhook_url

if TYPE_CHECKING:
    from gputui.notify.notifier import Notifier

DEFAULT_INTERVAL_S = 1.0


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
    if not value >= 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"must be 0 or more seconds: {text!r}")
    return value


def add_notify_arguments(parser: argparse.ArgumentParser, *, terminal: bool = False) -> None:
    g = parser.add_argument_group(
        "notifications", "alerts sent as JSON events when they start and end (also set in "
        "config.toml's [notify] table; flags win)")
    g.add_argument("--notify-webhook", action="append", type=webhook_url, metavar="URL",
                   help="POST each event's JSON to URL (repeatable; Slack and Mattermost "
                   "incoming webhooks show its text)")
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


def apply_config(args: argparse.Namespace, *, monitor: bool = False) -> NotifySettings:
    """Fill in what the command line left unset from config.toml (raises UsageError for a
    file that cannot be used); returns the notification settings. The terminal sink is
    the monitor's (`monitor`): `watch` and `export` leave it off."""
    import os

    from gputui.config import load_config

    cfg = load_config()
    if getattr(args, "interval", DEFAULT_INTERVAL_S) is None:
        args.interval = cfg.interval if cfg.interval is not None else DEFAULT_INTERVAL_S
    if getattr(args, "theme", "") is None and not os.environ.get("GPUTUI_THEME"):
        args.theme = cfg.theme
    n = cfg.notify
    webhooks = getattr(args, "notify_webhook", None)
    command = getattr(args, "notify_command", None)
    terminal = getattr(args, "notify_terminal", None)
    min_duration = getattr(args, "notify_min_duration", None)
    kinds = getattr(args, "notify_kinds", None)
    return NotifySettings(
        webhooks=tuple(webhooks) if webhooks is not None else n.webhooks,
        command=command if command is not None else n.command,
        # The terminal sink is the monitor's: a command without the flag ignores it.
        terminal=(terminal if terminal is not None else n.terminal) if monitor else False,
        min_duration_s=min_duration if min_duration is not None else n.min_duration_s,
        kinds=kinds if kinds is not None else n.kinds)


def stderr_line(line: str) -> None:
    print(f"gputui: {line}", file=sys.stderr, flush=True)


def make_notifier(settings: NotifySettings,
                  report: Callable[[str], None] = stderr_line) -> Notifier | None:
    """A Notifier with the webhook and command sinks (the TUI adds the terminal one), or
    None when nothing is to be notified."""
    if not settings.any_sink:
        return None
    from gputui.notify.events import EventTracker
    from gputui.notify.notifier import Notifier
    from gputui.notify.sinks import CommandSink, Sink, WebhookSink

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
