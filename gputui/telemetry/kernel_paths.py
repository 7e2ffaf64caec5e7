"""Where the kernel's file trees are: sysfs (AMD GPUs are read under it) and procfs
(processes, and psutil). Another root than /sys and /proc is a container with the host's
mounted elsewhere (`--path.sysfs`, `--path.procfs`, config.toml's [path]). Plain data, for
the sampler's openers; the flags that fill it in are gputui.commands.paths."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

SYSFS = Path("/sys")
PROCFS = Path("/proc")


@dataclass(frozen=True, slots=True)
class KernelPaths:
    sysfs: Path = SYSFS
    procfs: Path = PROCFS
