"""`gputui fleet`: one row per host, problems first, across many gputui or dcgm-exporter
endpoints or a Prometheus server that scrapes them; each host's GPUs one key away.

Exit codes with --once: 0 when at least one host could be read (the output says
which others are down or broken); 1 when no host could be read successfully (every
target down or serving something that is not a metrics page, the Prometheus server
unreachable, or Prometheus knowing no readable GPU host); 2 for a malformed target
or URL. The live view exits 0 (143 after SIGTERM, once it has restored the terminal).
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace
from typing import TYPE_CHECKING

from gputui.errors import UsageError
from gputui.safe_text import printable

if TYPE_CHECKING:
    from gputui.fleet.model import FleetSnapshot
    from gputui.fleet.poller import Poller
    from gputui.fleet.targets import Target


def add_parser(sub: argparse._SubParsersAction, summary: str) -> None:
    from gputui.commands.argtypes import interval_seconds, positive_float

    p = sub.add_parser(
        "fleet", help=summary,
        description="One row per host, problems first (down, lost GPUs, XIDs, throttling, "
        "hot, idle GPUs holding memory), read from their gputui export or dcgm-exporter "
        "/metrics pages, or from a Prometheus server that scrapes them (the way for more "
        "than a few dozen hosts); Enter opens a host's GPUs and jobs.")
    p.add_argument("targets", nargs="*", metavar="TARGET",
                   help="HOST:PORT of an exporter (/metrics implied) or a full http(s):// URL; "
                   "basic-auth passwords from ~/.netrc ($NETRC), as curl reads them")
    p.add_argument("--prometheus", metavar="URL",
                   help="read the metrics from this Prometheus server's query API instead")
    p.add_argument("--interval", type=interval_seconds, default=2.0, metavar="SECONDS",
                   help="seconds between refreshes (default 2)")
    p.add_argument("--timeout", type=positive_float, default=2.0, metavar="SECONDS",
                   help="per-request timeout (default 2)")
    p.add_argument("--hot", type=positive_float, default=85.0, metavar="CELSIUS",
                   help="alert when a GPU is at least this hot (default 85; a GPU at its "
                   "slowdown temperature always alerts)")
    p.add_argument("--once", action="store_true",
                   help="read once, print a table (or --json) and exit: status 0 if at "
                   "least one host could be read, 1 if none could (all down or broken)")
    p.add_argument("--json", action="store_true", help="with --once: print JSON")
    p.set_defaults(func=run)


def make_poller(args: argparse.Namespace) -> Poller:
    from gputui.fleet.errors import TargetError
    from gputui.fleet.poller import FleetPoller
    from gputui.fleet.prometheus import PrometheusPoller
    from gputui.fleet.targets import parse_prometheus_url, parse_target, with_netrc

    try:
        if args.prometheus:
            if args.targets:
                raise UsageError("give either TARGETs or --prometheus, not both")
            server = parse_prometheus_url(args.prometheus)
            warn_password_in_argv([server])
            server = with_netrc([server])[0]
            # --once lists every GPU (JSON's per-GPU shape); the view reads the open host's.
            return PrometheusPoller(server.url, interval=args.interval, timeout=args.timeout,
                                    hot_temp_c=args.hot, auth=server.auth,
                                    every_gpu=args.once)
        if not args.targets:
            raise UsageError("name at least one TARGET (HOST:PORT) or --prometheus URL")
        targets = [parse_target(t) for t in args.targets]
        warn_password_in_argv(targets)
        targets = with_netrc(targets)
    except TargetError as exc:
        raise UsageError(printable(str(exc))) from None
    return FleetPoller(targets, interval=args.interval, timeout=args.timeout,
                       hot_temp_c=args.hot)


def warn_password_in_argv(targets: list[Target]) -> None:
    """One line when a password was given on the command line, which `ps` shows to every
    local user (the host is named, never the password)."""
    hosts = sorted({t.host for t in targets if t.auth})
    if hosts:
        print(f"gputui: warning: the password for {', '.join(printable(h) for h in hosts)} "
              "is on the command line, where other local users can read it (ps); "
              "~/.netrc keeps it off", file=sys.stderr)


def run(args: argparse.Namespace) -> int:
    from gputui.fleet.poller import direct_mode_advice

    if args.json and not args.once:
        raise UsageError("--json needs --once (the live view is a TUI)")
    poller = make_poller(args)
    advice = None if args.prometheus else direct_mode_advice(len(args.targets))
    try:
        if args.once:
            if advice:
                print(f"gputui: {advice}", file=sys.stderr)
            # Nothing will be retried: drop the retry countdowns from the output.
            snap: FleetSnapshot = poller.poll(force=True)
            snap = replace(snap, hosts=tuple(replace(h, retry_in_s=None) for h in snap.hosts))
            if args.json:
                json.dump(snap.to_dict(), sys.stdout, indent=2)
                sys.stdout.write("\n")
            else:
                print_table(snap)
            problem = once_failure(snap)
            if problem:  # may quote the Prometheus server: shown escaped
                print(f"gputui: {printable(problem)}", file=sys.stderr)
            return 1 if problem else 0
        from gputui.fleet.prometheus import PrometheusPoller

        if isinstance(poller, PrometheusPoller):
            poller.prefetch()  # the first read travels while the view starts
        from gputui.ui.fleet_app import FleetApp
        from gputui.ui.terminal_watch import exit_on_sigterm

        app = FleetApp(poller, interval=args.interval, advice=advice)
        undo = exit_on_sigterm(app)  # SIGTERM: closed like `q` (terminal restored), 143
        try:
            app.run()
        finally:
            undo()
        return app.return_code or 0
    finally:
        poller.close()


def once_failure(snap: FleetSnapshot) -> str | None:
    """Why `fleet --once` exits 1 (no host could be read successfully), or None."""
    from gputui.fleet.model import HostState  # not at the top: `gputui` loads every parser

    if snap.error is not None:
        return snap.error
    if any(h.state is HostState.UP for h in snap.hosts):
        return None
    if not snap.hosts:
        return "no GPU hosts found"
    down = sum(1 for h in snap.hosts if h.state is HostState.DOWN)
    broken = len(snap.hosts) - down
    if not broken:
        return "no host answered"
    return f"no host could be read ({down} down, {broken} not serving a usable metrics page)"


def print_table(snap: FleetSnapshot) -> None:
    """The hosts (problems first), then every GPU, then the alerts."""
    from datetime import UTC, datetime

    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    from gputui.fleet.host_table import cells, columns_for, down_text, fleet_line, row_labels
    from gputui.fleet.model import FleetSummary
    from gputui.fleet.view import alert_text, host_rows

    console = Console(highlight=False, width=max(120, Console().width))
    columns = columns_for(snap.source != "targets")
    hosts = Table(box=None, pad_edge=False, header_style="bold")
    names = row_labels(snap.summaries)
    hosts.add_column("HOST", overflow="fold",
                     min_width=min(24, max(map(len, names.values()), default=4)))
    for c in columns:
        hosts.add_column(c.title.upper(), justify="right" if c.right else "left",
                         no_wrap=not c.wraps)
    now = datetime.now(UTC)
    for s in snap.summaries:
        down = down_text(s, now)
        row = (down, *[""] * (len(columns) - 1)) if down is not None else cells(s, columns)
        hosts.add_row(Text(names[s.target]), *(Text(c) for c in row))  # text: never markup
    console.print(Text(fleet_line(FleetSummary.of(snap.summaries))))
    console.print(hosts)
    console.print()
    table = Table(box=None, pad_edge=False, header_style="bold")
    for col in ("HOST", "GPU", "MODEL", "UTIL", "SM_ACTIVE", "MEMORY", "POWER", "TEMP",
                "STATE"):
        table.add_column(col, no_wrap=col != "STATE")
    for row in host_rows(snap, live=False):
        table.add_row(*(Text(c) for c in row.cells))  # text from the hosts: never markup
    console.print(table)
    alerts = snap.alerts()
    console.print(f"\n{len(alerts)} alert(s)" + (":" if alerts else ""))
    for a in alerts:
        console.print(f"  [{a.severity}] {alert_text(a)}", markup=False)
