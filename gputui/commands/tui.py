"""`gputui` with no subcommand: the live monitor (Textual, imported only here)."""

from __future__ import annotations

import argparse
import gc


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from gputui.commands.argtypes import interval_seconds
    from gputui.telemetry.limits import MIN_INTERVAL_S

    parser.add_argument("--interval", type=interval_seconds, default=None, metavar="SECONDS",
                        help="seconds between readings (default 1 or config.toml's, "
                        f"minimum {MIN_INTERVAL_S:g})")
    parser.add_argument("--theme", metavar="NAME", help="colour theme (or set GPUTUI_THEME)")
    parser.add_argument("--record", metavar="FILE",
                        help="append every snapshot to FILE as JSON lines")
    from gputui.commands.paths import add_path_arguments
    from gputui.notify.cli import add_notify_arguments

    add_notify_arguments(parser, terminal=True)
    add_path_arguments(parser)


def run(args: argparse.Namespace) -> int:
    # No garbage collection while the monitor starts: importing Textual and building the
    # first screen make ~70,000 objects that live as long as the app, and collecting
    # them over and over took ~10 % of the time to the first frame (docs/performance.md).
    # The app turns it back on once the first reading is on screen (GputuiApp).
    gc.disable()
    try:
        return _run(args)
    finally:
        gc.enable()


def _run(args: argparse.Namespace) -> int:
    from gputui.commands.config_args import apply_config
    from gputui.commands.paths import kernel_paths
    from gputui.notify import cli as notify_cli
    from gputui.telemetry.sampler_opener import SamplerOpener

    settings = apply_config(args, monitor=True)  # config.toml under the flags
    paths = kernel_paths(args)
    # NVML opens on its own thread from here, while Textual is imported and starts (on a
    # big machine its init takes longer than all of that); a recording keeps more fields
    # than the screen shows. Textual's first import is the theme check just below.
    opener = SamplerOpener(interval=args.interval,
                           profile="record" if args.record else "monitor", paths=paths,
                           idle_w=getattr(args, "idle_w", None)).start()
    try:
        from gputui.ui.options import AppOptions
        from gputui.ui.themes import require_theme

        require_theme(args.theme)  # a typo is one line and exit 2, not a silent default
        # The app adds the terminal sink (it writes through the app's terminal) and shows
        # delivery failures as toasts; the summary is printed once the terminal is back.
        notifier = notify_cli.make_notifier(settings, report=lambda line: None)
    except BaseException:
        opener.cancel()
        raise
    options = AppOptions(interval=args.interval, theme=args.theme, record_path=args.record,
                         notifier=notifier, notify_terminal=settings.terminal)
    # Imported here, not at the top: `gputui --help` and the subcommands never load textual.
    from gputui.ui.app import run_app

    try:
        # A bad --record path raises UsageError in run_app before the terminal is taken over.
        return run_app(options, opener=opener)
    finally:
        notify_cli.finish(notifier)
