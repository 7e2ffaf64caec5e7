"""Where the kernel's file trees and the node's own files are: sysfs (AMD GPUs are read
under it), procfs (processes, and psutil) and the root file system (kubelet's and the
container runtimes' files, for pod and container names). Another root than /sys, /proc
and / is a container with the host's mounted elsewhere (`--path.sysfs`, `--path.procfs`,
`--path.rootfs`, config.toml's [path]). Plain data, for the sampler's openers; the flags
that fill it in are gputui.commands.paths."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

SYSFS = Path("/sys")
PROCFS = Path("/proc")
ROOTFS = Path("/")


@dataclass(frozen=True, slots=True)
class KernelPaths:
    sysfs: Path = SYSFS
    procfs: Path = PROCFS
    rootfs: Path = ROOTFS
