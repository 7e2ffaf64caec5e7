"""`gputui watch`: one row per GPU per tick, like `nvidia-smi dmon`, for logging a run.

A row carries the GPU's energy as gputui.telemetry.energy shares it out and, where every
process on the GPU is in one pod, that pod (dcgm-exporter's labels); a jsonl row also
lists the GPU's processes as `snapshot --json` does (pod, container, energy). A training
job that ends prints its end-of-run line in the table format."""

from __future__ import annotations

import argparse
import csv
import io
import json
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from types import FrameType
from typing import IO

from gputui.errors import UsageError
from gputui.safe_text import printable
from gputui.telemetry.energy import ended_line
from gputui.telemetry.model import GpuSample, Snapshot
from gputui.telemetry.process_groups import GpuOwner, gpu_owners
from gputui.telemetry.schema import gpu_to_dict, process_to_dict
from gputui.telemetry.throttle import reason_keys

# Stable CSV columns (a public contract: append new ones at the end only).
CSV_COLUMNS = [
    "time", "gpu", "name", "util_gpu_pct", "util_mem_pct", "mem_used_bytes", "mem_total_bytes",
    "power_w", "power_limit_w", "temp_c", "fan_pct", "clock_sm_mhz", "clock_mem_mhz", "pstate",
    "pcie_rx_bps", "pcie_tx_bps", "energy_j", "throttling", "throttle_reasons", "lost",
    "host_cpu_pct", "host_mem_used_bytes", "stale", "stale_s",
    # GPM profiling metrics (gputui.telemetry.gpm); empty where the GPU has none.
    "sm_active_pct", "sm_occupancy_pct", "tensor_active_pct", "dram_active_pct",
    "fp64_active_pct", "fp32_active_pct", "fp16_active_pct", "gpm_pcie_tx_bps",
    "gpm_pcie_rx_bps", "nvlink_tx_bps", "nvlink_rx_bps",
    # Energy since gputui first read the GPU, as shared out (gputui.telemetry.energy), and
    # the pod every process on the GPU belongs to, where there is one.
    "energy_seen_j", "energy_idle_j", "energy_unattributed_j", "idle_power_w",
    "pod", "namespace", "container",
]


def add_parser(sub: argparse._SubParsersAction, summary: str) -> None:
    from gputui.commands.argtypes import interval_seconds, positive_int
    from gputui.telemetry.limits import MIN_INTERVAL_S

    p = sub.add_parser("watch", help=summary,
                       description="Stream one row per GPU per tick, flushed every tick, "
                       "until Ctrl-C or --count ticks.")
    p.add_argument("--interval", type=interval_seconds, default=None, metavar="SECONDS",
                   help="seconds between ticks (default 1 or config.toml's, "
                   f"minimum {MIN_INTERVAL_S:g})")
    p.add_argument("--count", type=positive_int, default=None, metavar="N",
                   help="stop after N ticks")
    p.add_argument("--format", choices=("table", "csv", "jsonl"), default="table")
    p.add_argument("--output", metavar="FILE",
                   help="append rows to FILE instead of standard output")
    from gputui.commands.paths import add_path_arguments
    from gputui.notify.cli import add_notify_arguments

    add_notify_arguments(p)
    add_path_arguments(p)
    p.set_defaults(func=run)


def _row(snap: Snapshot, g: GpuSample | None,
         owners: dict[int, GpuOwner] | None = None) -> dict[str, object]:
    h = snap.host
    base: dict[str, object] = {c: None for c in CSV_COLUMNS}
    base.update(time=snap.time_iso, host_cpu_pct=h.cpu_pct, host_mem_used_bytes=h.mem_used_bytes)
    if g is None:
        return base
    base.update({k: v for k, v in gpu_to_dict(g, snap.energy_of(g.index)).items()
                 if k in base})
    base.update(gpu=g.index, name=g.info.name, lost=g.lost, stale=g.stale, stale_s=g.stale_s,
                throttle_reasons=reason_keys(g.throttle_mask) if g.throttle_mask is not None
                else None)
    owner = (owners or {}).get(g.index)
    if owner is not None:
        base.update(pod=owner.pod, namespace=owner.namespace, container=owner.container)
    return base


def _jsonl_line(snap: Snapshot, row: dict[str, object]) -> str:
    """A row, with the GPU's processes as `snapshot --json` lists them."""
    procs = [process_to_dict(p) for p in snap.processes if p.gpu_index == row["gpu"]]
    return json.dumps({**row, "processes": procs}) + "\n"


def _rows(snap: Snapshot) -> list[dict[str, object]]:
    owners = gpu_owners(snap.processes)
    return [_row(snap, g, owners) for g in snap.gpus] or [_row(snap, None)]


def _ended_lines(snap: Snapshot) -> str:
    """The end-of-run line of each job that ended this tick (the job's name escaped)."""
    return "".join(f"{str(snap.time_iso)[11:19]:<8} {printable(ended_line(j))}\n"
                   for j in snap.jobs_ended)


def _num(v: object, fmt: str = "{:.0f}") -> str:
    if v is None:
        return "-"
    if isinstance(v, float | int) and not isinstance(v, bool):
        return fmt.format(v)
    return str(v)


TABLE_HEADER = (f"{'time':<8} {'gpu':>3} {'sm%':>4} {'mem%':>4} {'fb_MiB':>8} {'pwr_W':>6} "
                f"{'temp':>4} {'fan':>4} {'smMHz':>6} {'memMHz':>6} {'rx_MB/s':>8} {'tx_MB/s':>8} "
                "throttle")


def _table_line(row: dict[str, object]) -> str:
    t = str(row["time"])[11:19]
    if row["gpu"] is None:
        return f"{t:<8} {'-':>3}  (no GPU data) host cpu {_num(row['host_cpu_pct'])}%"
    if row["lost"]:
        return f"{t:<8} {row['gpu']:>3}  GPU is lost"
    if row["stale"] and row["util_gpu_pct"] is None and row["temp_c"] is None:
        return f"{t:<8} {row['gpu']:>3}  not answering for {_num(row['stale_s'])}s"
    mib = None if row["mem_used_bytes"] is None else row["mem_used_bytes"] / 2**20  # type: ignore[operator]
    rx = None if row["pcie_rx_bps"] is None else row["pcie_rx_bps"] / 1e6  # type: ignore[operator]
    tx = None if row["pcie_tx_bps"] is None else row["pcie_tx_bps"] / 1e6  # type: ignore[operator]
    reasons = row["throttle_reasons"]
    thr = "-" if reasons is None else ",".join(reasons) or "none"  # type: ignore[arg-type]
    # Old values of a GPU that did not answer this tick: said so on the row.
    stale = f"  STALE {_num(row['stale_s'])}s" if row["stale"] else ""
    return (f"{t:<8} {row['gpu']:>3} {_num(row['util_gpu_pct']):>4} {_num(row['util_mem_pct']):>4} "
            f"{_num(mib):>8} {_num(row['power_w'], '{:.1f}'):>6} {_num(row['temp_c']):>4} "
            f"{_num(row['fan_pct']):>4} {_num(row['clock_sm_mhz']):>6} "
            f"{_num(row['clock_mem_mhz']):>6} {_num(rx, '{:.1f}'):>8} {_num(tx, '{:.1f}'):>8} "
            f"{thr}{stale}")


def _csv_line(row: dict[str, object]) -> str:
    buf = io.StringIO()
    out = dict(row)
    reasons = out["throttle_reasons"]
    out["throttle_reasons"] = "|".join(reasons) if isinstance(reasons, list) else reasons
    csv.writer(buf, lineterminator="\n").writerow(
        ["" if out[c] is None else out[c] for c in CSV_COLUMNS])
    return buf.getvalue()


def _open_output(path: str | None, fmt: str) -> tuple[IO[str], bool]:
    """Returns (stream, needs_header). Files are appended to: a log is never clobbered."""
    if path is None:
        return sys.stdout, True
    try:
        fh = open(path, "a", encoding="utf-8", newline="")
    except OSError as exc:
        raise UsageError(f"cannot write {path}: {exc.strerror or exc}") from None
    empty = os.fstat(fh.fileno()).st_size == 0
    return fh, empty


def _interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


def run(args: argparse.Namespace) -> int:
    from gputui.commands.config_args import apply_config
    from gputui.commands.paths import kernel_paths
    from gputui.notify import cli as notify_cli
    from gputui.telemetry.sampler import Sampler

    settings = apply_config(args)  # config.toml under the flags
    paths = kernel_paths(args)
    out, header = _open_output(args.output, args.format)
    formatter: Callable[[Snapshot, dict[str, object]], str]
    if args.format == "csv":
        formatter = lambda _snap, row: _csv_line(row)  # noqa: E731
        if header:
            out.write(",".join(CSV_COLUMNS) + "\n")
    elif args.format == "jsonl":
        formatter = _jsonl_line
    else:
        formatter = lambda _snap, row: _table_line(row) + "\n"  # noqa: E731
        if header:
            out.write(TABLE_HEADER + "\n")
    out.flush()
    # The sampler keeps no history (nothing here draws one); each GPU is read on its own
    # thread with a deadline, so a hung GPU is printed as stale and the others go on.
    sampler = Sampler.open(interval=args.interval, sysfs=paths.sysfs, procfs=paths.procfs,
                           rootfs=paths.rootfs, idle_w=getattr(args, "idle_w", None))
    if sampler.source is None and sampler.nvml_error:
        print(f"gputui: no GPU data: {sampler.nvml_error}", file=sys.stderr)
    # Events are made on this thread with each tick; delivery runs on the notifier's own.
    notifier = notify_cli.make_notifier(settings)
    if notifier is not None:
        sampler.enable_alerts()
        sampler.subscribe_frames(notifier)
    # The host's CPU % is a delta since the sampler opened: give the first row a window
    # long enough to be a reading (HostSource reports none rather than a made-up 0 %).
    from gputui.telemetry.host import MIN_CPU_WINDOW_S

    time.sleep(MIN_CPU_WINDOW_S)
    ticks = 0
    next_at = time.monotonic()
    # SIGTERM (kill, timeout, systemd) ends a watch as Ctrl-C does, through the cleanup
    # below: a notification command's process group must not outlive it.
    on_main = threading.current_thread() is threading.main_thread()  # only it can
    old_term = signal.signal(signal.SIGTERM, _interrupt) if on_main else None
    try:
        while args.count is None or ticks < args.count:
            snap = sampler.tick()
            out.write("".join(formatter(snap, r) for r in _rows(snap)))
            if args.format == "table":
                out.write(_ended_lines(snap))
            out.flush()
            ticks += 1
            if args.count is not None and ticks >= args.count:
                break
            next_at += args.interval
            delay = next_at - time.monotonic()
            if delay < 0:  # late: skip missed ticks rather than burst
                next_at = time.monotonic()
                delay = 0
            time.sleep(delay)
    except KeyboardInterrupt:
        pass  # Ctrl-C is how a user ends a watch: that is success
    finally:
        if on_main:
            signal.signal(signal.SIGTERM, signal.SIG_DFL if old_term is None else old_term)
        sampler.close()
        if out is not sys.stdout:
            out.close()
        notify_cli.finish(notifier)
    return 0
