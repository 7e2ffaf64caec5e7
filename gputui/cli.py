"""Command-line entry point.

Nothing heavy is imported here: `gputui --help` must be instant and the monitor
must never pay for torch. Each subcommand module registers its own parser and
imports what it needs inside its `run` function; only the modules of the commands
named on the command line are imported (the others were ~1.3 % of the monitor's start).
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Callable, Sequence
from typing import NoReturn

from gputui import __version__
from gputui.errors import GputuiError


class ArgumentParser(argparse.ArgumentParser):
    """argparse that reports bad usage as one `gputui: ...` line, exit 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"gputui: {message} (see '{self.prog} --help')\n")


# Each subcommand, with the line `gputui --help` shows for it; its module
# (gputui.commands.<name>) adds its arguments.
COMMANDS: dict[str, str] = {
    "snapshot": "print one reading of every GPU, the host and processes",
    "watch": "stream one row per GPU per tick (table, CSV or JSON lines)",
    "replay": "replay a recording made with 'gputui --record FILE'",
    "bench": "run built-in benchmarks; list, compare and export results",
    "export": "serve Prometheus metrics (dcgm-exporter names) on /metrics",
    "fleet": "watch many hosts' GPUs (gputui or dcgm-exporter endpoints)",
    "doctor": "check every GPU's configuration and health (admission test)",
}


def build_parser(argv: Sequence[str] | None = None) -> ArgumentParser:
    """The whole command line; given `argv`, only the commands named in it get their
    arguments (and have their modules imported): the others are listed by name."""
    from gputui.commands import tui

    parser = ArgumentParser(
        prog="gputui",
        description="GPU monitor that explains throttling, with built-in benchmarks. "
        "Without a subcommand, opens the live monitor.",
    )
    parser.add_argument("--version", action="version", version=f"gputui {__version__}")
    tui.add_arguments(parser)
    parser.set_defaults(func=tui.run)
    sub = parser.add_subparsers(title="commands", metavar="COMMAND", parser_class=ArgumentParser)
    named = None if argv is None else set(argv)
    for name, summary in COMMANDS.items():
        if named is None or name in named:
            importlib.import_module(f"gputui.commands.{name}").add_parser(sub, summary)
        else:
            sub.add_parser(name, help=summary)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    parser = build_parser(argv)
    args = parser.parse_args(argv)
    func: Callable[[argparse.Namespace], int] = args.func
    try:
        return func(args)
    except KeyboardInterrupt:
        return 130
    except GputuiError as exc:
        print(f"gputui: {exc}", file=sys.stderr)
        return exc.exit_code
    except BrokenPipeError:
        # `gputui watch | head` closes our stdout; that is a normal way to stop.
        _silence_stdout()
        return 0
    except OSError as exc:
        # A full disk or a vanished file while writing output: one line, not a traceback.
        _silence_stdout()
        where = f" {exc.filename}" if exc.filename else ""
        print(f"gputui: cannot write{where}: {exc.strerror or exc}", file=sys.stderr)
        return 1


def _silence_stdout() -> None:
    """Point stdout at /dev/null so the interpreter's final flush cannot fail again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass
