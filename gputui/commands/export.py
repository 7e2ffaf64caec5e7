"""`gputui export`: serve dcgm-exporter-compatible Prometheus metrics on /metrics.

Exit codes: 0 after Ctrl-C or SIGTERM; 2 for a malformed --listen address (or one
that is not an address of this machine) or a --web.config.file that cannot be used; 1 when
the port is already in use or the socket cannot be opened for another reason.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING

from gputui.errors import GputuiError, UsageError

if TYPE_CHECKING:
    from gputui.fleet.web_config import WebConfig


def add_parser(sub: argparse._SubParsersAction, summary: str) -> None:
    from gputui.commands.argtypes import interval_seconds
    from gputui.telemetry.limits import MIN_INTERVAL_S

    p = sub.add_parser(
        "export", help=summary,
        description="Serve the GPUs' telemetry as Prometheus metrics under the names NVIDIA's "
        "dcgm-exporter uses (DCGM_FI_DEV_*), plus gputui's throttle counters and host metrics. "
        "Binds to loopback unless told otherwise. Exit 2: malformed address; exit 1: port in use.")
    p.add_argument("--listen", default="127.0.0.1:9400", metavar="HOST:PORT",
                   help="address to serve on (default 127.0.0.1:9400; ':9400' for every "
                   "interface; port 0 picks a free port)")
    p.add_argument("--interval", type=interval_seconds, default=None, metavar="SECONDS",
                   help="seconds between GPU readings (default 1 or config.toml's, "
                   f"minimum {MIN_INTERVAL_S:g})")
    p.add_argument("--hostname", metavar="NAME",
                   help="value of the hostname label (default: this machine's host name)")
    p.add_argument("--web.config.file", dest="web_config_file", default="", metavar="FILE",
                   help="TLS and basic auth, in the web configuration format of node_exporter "
                   "(YAML: tls_server_config with cert_file and key_file, basic_auth_users "
                   "with bcrypt hashes); see docs/exporter-and-fleet.md")
    p.add_argument("--legacy-hostname-label", action="store_true",
                   help="name the host label 'Hostname', as dcgm-exporter did before May "
                   "2026 (for dashboards built on it); default 'hostname'")
    from gputui.commands.paths import add_path_arguments
    from gputui.notify.cli import add_notify_arguments

    add_notify_arguments(p)
    add_path_arguments(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from prometheus_client.registry import CollectorRegistry

    from gputui.commands.config_args import apply_config
    from gputui.commands.paths import kernel_paths
    from gputui.fleet import metric_names as mn
    from gputui.fleet.exporter import SnapshotCollector, ThrottleAccounting
    from gputui.fleet.listen import ListenAddressError, check_local, parse_listen
    from gputui.fleet.metrics_server import BindError, MetricsServer
    from gputui.notify import cli as notify_cli
    from gputui.telemetry.sampler import Sampler

    settings = apply_config(args)  # config.toml under the flags
    paths = kernel_paths(args)
    try:
        addr = parse_listen(args.listen)
        check_local(addr)
    except ListenAddressError as exc:
        raise UsageError(str(exc)) from None
    web = load_web_config(args.web_config_file)
    registry = CollectorRegistry(auto_describe=False)
    # Bind before opening NVML so a busy port fails at once, without touching the driver.
    try:
        server = MetricsServer(addr, registry, web=web)
    except BindError as exc:
        raise (UsageError(str(exc)) if exc.usage else GputuiError(str(exc))) from None

    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    old_int = signal.signal(signal.SIGINT, on_signal)
    old_term = signal.signal(signal.SIGTERM, on_signal)
    sampler = None
    notifier = None
    serve: threading.Thread | None = None
    try:
        # Devices are opened and read on their own threads with a deadline: a GPU hung
        # at start or mid-run is served as stale while the others (and /metrics, and
        # the signal handlers) go on. A driver hung in init gives up on SIGTERM/SIGINT.
        sampler = Sampler.open(interval=args.interval, cancel=stop, sysfs=paths.sysfs,
                               procfs=paths.procfs, rootfs=paths.rootfs,
                               idle_w=getattr(args, "idle_w", None))
        if stop.is_set():
            return 0
        # No GPU source at all: host metrics only (an AMD box without NVML has GPUs).
        no_gpus = sampler.nvml_error if sampler.source is None else None
        if no_gpus:
            print(f"gputui: no GPU data, serving host metrics only: {no_gpus}",
                  file=sys.stderr)
        collector: SnapshotCollector
        accounting = ThrottleAccounting(lambda snap: collector.hostname(snap))
        collector = SnapshotCollector(lambda: sampler.latest if sampler else None, accounting,
                                      nvml_error=no_gpus, interval=args.interval,
                                      hostname=args.hostname,
                                      hostname_label=mn.LEGACY_HOSTNAME_LABEL
                                      if args.legacy_hostname_label else mn.HOSTNAME_LABEL)
        registry.register(collector)
        sampler.subscribe(accounting)
        notifier = notify_cli.make_notifier(settings)
        if notifier is not None:
            sampler.enable_alerts()
            sampler.subscribe_frames(notifier)
        sampler.start()
        serve = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.2},
                                 name="gputui-export-http", daemon=True)
        serve.start()
        auth = " (basic auth)" if web is not None and web.users else ""
        print(f"gputui: serving metrics on "
              f"{addr.url(server.port, tls=web is not None and web.tls is not None)}{auth}",
              flush=True)
        # A timed wait keeps the main thread responsive to signals on every platform.
        while not stop.wait(0.5):
            pass
    finally:
        signal.signal(signal.SIGINT, old_int)
        signal.signal(signal.SIGTERM, old_term)
        if serve is not None:
            server.shutdown()
        server.server_close()
        if sampler is not None:
            sampler.close()
        notify_cli.finish(notifier)
    return 0


def load_web_config(name: str) -> WebConfig | None:
    """--web.config.file's settings, checked whole before anything listens; None when
    not given ("" too, as node_exporter reads an empty value)."""
    if not name:
        return None
    from gputui.fleet import web_config
    from gputui.safe_text import printable

    try:
        return web_config.load(Path(name))
    except web_config.BcryptMissing as exc:  # an installation problem, not bad usage
        raise GputuiError(printable(f"web config {name}: {exc}")) from None
    except web_config.WebConfigError as exc:
        raise UsageError(printable(f"web config {name}: {exc}")) from None
