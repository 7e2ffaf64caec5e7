"""config.toml: defaults a user sets once (the interval, the theme, notifications).

Read from platformdirs' user config dir (`~/.config/gputui/config.toml` on Linux), or
from the file GPUTUI_CONFIG names. Command-line flags win over the file; GPUTUI_THEME
wins over its theme, GPUTUI_NOTIFY_WEBHOOK over its webhooks. A file that cannot be used
is one line naming the file (and the line) with exit 2, never a setting silently ignored,
never a traceback: a path that is not a regular file (/dev/zero, a FIFO), a file over
1 MiB, nesting too deep for the parser, a value out of the flags' range.

    interval = 2            # seconds between readings (gputui, watch, export)
    theme = "nord"

    [notify]
    webhooks_file = "~/.config/gputui/webhooks"   # one URL per line, chmod 600
    webhooks = ["https://hooks.slack.com/services/..."]
    command = "notify-send gputui \\"$GPUTUI_TEXT\\""
    terminal = true         # the monitor: bell + desktop notification
    min_duration = 30       # seconds a condition must last before it is sent
    kinds = ["throttle", "xid", "lost"]

    [path]                  # where /sys, /proc and / are (--path.sysfs, .procfs, .rootfs)
    sysfs = "/host/sys"
    procfs = "/host/proc"
    rootfs = "/host/root"

    [energy]
    idle_w = 60             # a GPU's idle draw, W (else the lowest seen with no process)
"""

from __future__ import annotations

import math
import os
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from gputui.errors import UsageError
from gputui.notify.settings import (
    KNOWN_KINDS,
    NotifySettings,
    check_webhook_url,
    min_duration_problem,
    read_webhooks_file,
)
from gputui.telemetry.limits import interval_problem
from gputui.user_file import UserFileError, read_text

CONFIG_ENV = "GPUTUI_CONFIG"
TOP_KEYS = ("interval", "theme", "notify", "path", "energy")
PATH_KEYS = ("sysfs", "procfs", "rootfs")
ENERGY_KEYS = ("idle_w",)
MAX_IDLE_W = 10_000.0  # far above any GPU's idle draw: a larger figure is a mistake
NOTIFY_KEYS = ("webhooks", "webhooks_file", "command", "terminal", "min_duration", "kinds")
MAX_BYTES = 1 << 20  # a config file is a few hundred bytes; this is a mistake, not a config


@dataclass(frozen=True, slots=True)
class Config:
    """config.toml as read (every value None or empty when not set)."""

    path: Path | None = None  # the file read; None when there is none
    interval: float | None = None
    theme: str | None = None
    notify: NotifySettings = field(default_factory=NotifySettings)
    sysfs: Path | None = None
    procfs: Path | None = None
    rootfs: Path | None = None
    idle_w: float | None = None  # [energy] idle_w: every GPU's idle draw


def config_path() -> Path:
    env = os.environ.get(CONFIG_ENV)
    if env:
        return Path(env).expanduser()
    from platformdirs import user_config_path

    return user_config_path("gputui") / "config.toml"


def load_config(path: Path | None = None) -> Config:
    """The settings in `path` (default: config_path()); an empty Config when the default
    file does not exist. Raises UsageError for a file that cannot be used."""
    named = path is not None or bool(os.environ.get(CONFIG_ENV))
    path = path or config_path()
    try:
        text = read_text(path, MAX_BYTES)
    except FileNotFoundError:
        if named:  # pointed at on purpose: a missing file is a mistake worth saying
            raise UsageError(f"config file {path}: no such file") from None
        return Config()
    except UserFileError as exc:
        raise UsageError(f"config file {path}: {exc}") from None
    return _parse(path, text)


def _parse(path: Path, text: str) -> Config:
    try:
        doc = tomllib.loads(text)
    except RecursionError:  # tomllib recurses once per level of nested arrays and tables
        raise UsageError(f"config file {path}: nested too deeply") from None
    except tomllib.TOMLDecodeError as exc:
        msg = str(exc)
        m = re.search(r"\(at line (\d+), column \d+\)$", msg)
        if m is None:
            m = re.search(r"\(at end of document\)$", msg)
            line = text.count("\n") + 1
        else:
            line = int(m.group(1))
        reason = msg[: m.start()].strip() if m else msg
        raise UsageError(f"config file {path}, line {line}: {reason}") from None

    def bad(key: str, table: str | None, reason: str) -> UsageError:
        return UsageError(f"config file {path}, line {_line_of(text, table, key)}: "
                          f"{key}: {reason}")

    for key in doc:
        if key not in TOP_KEYS:
            raise bad(key, None, f"unknown setting (known: {', '.join(TOP_KEYS)})")
    interval = doc.get("interval")
    if interval is not None:
        why = interval_problem(_seconds(interval))
        if why:
            raise bad("interval", None, why)
    theme = doc.get("theme")
    if theme is not None and (not isinstance(theme, str) or not theme):
        raise bad("theme", None, "must be a theme's name in quotes")
    table = doc.get("notify", {})
    if not isinstance(table, dict):
        raise bad("notify", None, "must be a table: [notify]")
    for key in table:
        if key not in NOTIFY_KEYS:
            raise bad(key, "notify", f"unknown setting (known: {', '.join(NOTIFY_KEYS)})")
    webhooks = table.get("webhooks", [])
    if isinstance(webhooks, str):
        webhooks = [webhooks]
    if not isinstance(webhooks, list) or not all(isinstance(u, str) for u in webhooks):
        raise bad("webhooks", "notify", "must be a list of URLs in quotes")
    for url in webhooks:
        why = check_webhook_url(url)
        if why:  # the reason only: a webhook URL is a secret
            raise bad("webhooks", "notify", why)
    webhooks_file = table.get("webhooks_file")
    if webhooks_file is not None:
        if not isinstance(webhooks_file, str) or not webhooks_file:
            raise bad("webhooks_file", "notify", "must be a file's path in quotes")
        # Relative to the config file's directory, as a user reading the file expects.
        webhooks = [*webhooks, *read_webhooks_file(
            path.parent / Path(webhooks_file).expanduser())]
    command = table.get("command")
    if command is not None and (not isinstance(command, str) or not command.strip()):
        raise bad("command", "notify", "must be a command line in quotes")
    terminal = table.get("terminal", False)
    if not isinstance(terminal, bool):
        raise bad("terminal", "notify", "must be true or false")
    min_duration = table.get("min_duration", 0)
    why = min_duration_problem(_seconds(min_duration))
    if why:
        raise bad("min_duration", "notify", why)
    kinds = table.get("kinds")
    if kinds is not None:
        if not isinstance(kinds, list) or not all(isinstance(k, str) for k in kinds):
            raise bad("kinds", "notify", "must be a list of kinds in quotes")
        unknown = [k for k in kinds if k not in KNOWN_KINDS]
        if unknown:
            raise bad("kinds", "notify", f"unknown kind {unknown[0]!r} "
                      f"(known: {', '.join(KNOWN_KINDS)})")
    notify = NotifySettings(webhooks=tuple(webhooks), command=command, terminal=terminal,
                            min_duration_s=_seconds(min_duration),
                            kinds=None if kinds is None else frozenset(kinds))
    paths = doc.get("path", {})
    if not isinstance(paths, dict):
        raise bad("path", None, "must be a table: [path]")
    for key, value in paths.items():
        if key not in PATH_KEYS:
            raise bad(key, "path", f"unknown setting (known: {', '.join(PATH_KEYS)})")
        if not isinstance(value, str) or not value:
            raise bad(key, "path", "must be a directory's path in quotes")
    energy = doc.get("energy", {})
    if not isinstance(energy, dict):
        raise bad("energy", None, "must be a table: [energy]")
    for key in energy:
        if key not in ENERGY_KEYS:
            raise bad(key, "energy", f"unknown setting (known: {', '.join(ENERGY_KEYS)})")
    idle_w = energy.get("idle_w")
    if idle_w is not None and (isinstance(idle_w, bool) or not isinstance(idle_w, int | float)
                               or not 0 <= idle_w <= MAX_IDLE_W):
        raise bad("idle_w", "energy", f"must be watts from 0 to {MAX_IDLE_W:g}")
    return Config(path=path, interval=None if interval is None else _seconds(interval),
                  theme=theme, notify=notify,
                  sysfs=Path(paths["sysfs"]) if "sysfs" in paths else None,
                  procfs=Path(paths["procfs"]) if "procfs" in paths else None,
                  rootfs=Path(paths["rootfs"]) if "rootfs" in paths else None,
                  idle_w=None if idle_w is None else float(idle_w))


def _seconds(v: object) -> float:
    """A TOML value as seconds for the shared bounds: NaN (outside every bound) for what
    is not a number, infinity for an integer too large for a float."""
    if not isinstance(v, int | float) or isinstance(v, bool):
        return math.nan
    try:
        return float(v)
    except OverflowError:
        return math.inf


def _line_of(text: str, table: str | None, key: str) -> int:
    """The line where `key` is set in `table` (None: before any table), for messages."""
    current: str | None = None
    header = re.compile(r"^\s*\[\s*([^\]]+?)\s*\]")
    for n, line in enumerate(text.splitlines(), 1):
        m = header.match(line)
        if m:
            current = m.group(1).strip().strip('"')
            if current == key and table is None:
                return n
            continue
        if current == table and re.match(rf"^\s*\"?{re.escape(key)}\"?\s*=", line):
            return n
    return 1
