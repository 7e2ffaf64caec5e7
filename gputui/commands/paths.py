"""--path.sysfs, --path.procfs and --path.rootfs: the kernel file trees the GPUs and
processes are read from, and the node's root file system (node_exporter's flags, by name).
A container that mounts the host's /sys, /proc and / elsewhere (`-v /sys:/host/sys:ro
-v /proc:/host/proc:ro -v /:/host/root:ro`) points gputui at them; AMD GPUs are read under
sysfs, processes (and psutil) under procfs, and the names of pods and containers from
kubelet's and the runtimes' files under rootfs. NVML reads the driver itself."""

from __future__ import annotations

import argparse
from pathlib import Path

from gputui.errors import UsageError
from gputui.telemetry.kernel_paths import PROCFS, ROOTFS, SYSFS, KernelPaths


def add_path_arguments(parser: argparse.ArgumentParser) -> None:
    g = parser.add_argument_group("host files", "where /sys, /proc and the node's / are (a "
                                  "container with the host's mounted elsewhere; also [path] "
                                  "in config.toml)")
    g.add_argument("--path.sysfs", dest="path_sysfs", type=Path, metavar="DIR",
                   help="sysfs mount point (default /sys): AMD GPUs are read under it")
    g.add_argument("--path.procfs", dest="path_procfs", type=Path, metavar="DIR",
                   help="procfs mount point (default /proc): processes are read under it")
    g.add_argument("--path.rootfs", dest="path_rootfs", type=Path, metavar="DIR",
                   help="the node's root file system (default /): pod and container names "
                   "are read from kubelet's and the runtimes' files under it")


def kernel_paths(args: argparse.Namespace) -> KernelPaths:
    """The flags (config.toml's [path] table filled in where they are unset), else /sys,
    /proc and /; a directory that is not there is a UsageError (one line). A procfs
    elsewhere is psutil's too."""
    chosen = KernelPaths(sysfs=getattr(args, "path_sysfs", None) or SYSFS,
                         procfs=getattr(args, "path_procfs", None) or PROCFS,
                         rootfs=getattr(args, "path_rootfs", None) or ROOTFS)
    for flag, path in (("--path.sysfs", chosen.sysfs), ("--path.procfs", chosen.procfs),
                       ("--path.rootfs", chosen.rootfs)):
        if not path.is_dir():
            raise UsageError(f"{flag} {path}: no such directory")
    if not (chosen.procfs / "stat").is_file():  # the host's CPU figures come from it
        raise UsageError(f"--path.procfs {chosen.procfs}: not a procfs mount "
                         f"(no {chosen.procfs / 'stat'})")
    if chosen.procfs != PROCFS:
        import psutil

        psutil.PROCFS_PATH = str(chosen.procfs)
    return chosen
