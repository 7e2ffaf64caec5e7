"""config.toml under the command line: what a command's flags left unset, the file fills
in (the interval, the theme, [path], [energy], [notify]); for webhooks, flags win over
GPUTUI_NOTIFY_WEBHOOK, which wins over the file."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from gputui.config import load_config
from gputui.notify.cli import stderr_line
from gputui.notify.settings import (
    WEBHOOK_ENV,
    NotifySettings,
    carries_secret,
    read_webhooks_file,
    webhooks_from_env,
)

DEFAULT_INTERVAL_S = 1.0


def apply_config(args: argparse.Namespace, *, monitor: bool = False) -> NotifySettings:
    """Fill in what the command line left unset from config.toml (raises UsageError for a
    file that cannot be used); returns the notification settings. The terminal sink is
    the monitor's (`monitor`): `watch` and `export` leave it off."""
    cfg = load_config()
    if getattr(args, "interval", DEFAULT_INTERVAL_S) is None:
        args.interval = cfg.interval if cfg.interval is not None else DEFAULT_INTERVAL_S
    if getattr(args, "theme", "") is None and not os.environ.get("GPUTUI_THEME"):
        args.theme = cfg.theme
    if getattr(args, "path_sysfs", "") is None:
        args.path_sysfs = cfg.sysfs
    if getattr(args, "path_procfs", "") is None:
        args.path_procfs = cfg.procfs
    if getattr(args, "path_rootfs", "") is None:
        args.path_rootfs = cfg.rootfs
    args.idle_w = cfg.idle_w  # [energy] idle_w (no flag): the sampler's energy shares
    n = cfg.notify
    command = getattr(args, "notify_command", None)
    terminal = getattr(args, "notify_terminal", None)
    min_duration = getattr(args, "notify_min_duration", None)
    kinds = getattr(args, "notify_kinds", None)
    return NotifySettings(
        webhooks=_webhooks(args, n.webhooks),
        command=command if command is not None else n.command,
        # The terminal sink is the monitor's: a command without the flag ignores it.
        terminal=(terminal if terminal is not None else n.terminal) if monitor else False,
        min_duration_s=min_duration if min_duration is not None else n.min_duration_s,
        kinds=kinds if kinds is not None else n.kinds)


def _webhooks(args: argparse.Namespace, from_config: tuple[str, ...]) -> tuple[str, ...]:
    """The webhooks of the first source that names any: the command line (--notify-webhook
    and --notify-webhook-file together), then GPUTUI_NOTIFY_WEBHOOK, then config.toml."""
    given: list[str] = list(getattr(args, "notify_webhook", None) or ())
    exposed = [url for url in given if carries_secret(url)]
    if exposed:  # said once, by host: the URL itself is the secret being exposed
        from gputui.notify.sinks import url_host

        hosts = ", ".join(dict.fromkeys(url_host(url) for url in exposed))
        stderr_line(f"warning: --notify-webhook shows the URL for {hosts} to every local "
                    f"user (ps); give it in {WEBHOOK_ENV} or --notify-webhook-file instead")
    for path in getattr(args, "notify_webhook_file", None) or ():
        given += read_webhooks_file(Path(path).expanduser())
    if given:
        return tuple(given)
    env = os.environ.get(WEBHOOK_ENV, "")
    if env.strip():
        return webhooks_from_env(env)
    return from_config
