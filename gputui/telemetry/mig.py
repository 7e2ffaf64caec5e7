"""MIG (Multi-Instance GPU): the instances a GPU is split into, as plain data.

With MIG mode on, an A100/H100 is split into up to seven MIG devices, each with its own
SMs and memory; a process runs on one of them. NVML's whole-GPU utilisation says little
then (it is not even supported in MIG mode): what matters is each instance's memory,
its processes and, on Hopper and newer, its GPM activity (`nvmlGpmMigSampleGet`, per
GPU instance).

This module is the pure part: the record the sampler builds (`MigDevice`), the profile
name read from NVML's device name, and the lines every consumer shows. The NVML calls
are in `gputui.telemetry.nvml.mig_reader`; the JSON form in `gputui.telemetry.schema`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from gputui.telemetry.gpm import ACTIVITY_FIELDS, GpmActivity

# The GPM fields a MIG device carries: the activity ratios (in %) of its GPU instance.
# Byte rates (PCIe, NVLink) belong to the whole GPU, not to an instance.
GPM_FIELDS: tuple[str, ...] = ACTIVITY_FIELDS

# nvmlDeviceGetName on a MIG handle: "NVIDIA A100-SXM4-80GB MIG 1g.10gb"; newer drivers
# add a media suffix ("1g.10gb+me"). The profile is what nvidia-smi and DCGM show.
_PROFILE_RE = re.compile(r"\bMIG\s+(\S+)\s*$")


def profile_from_name(name: str) -> str | None:
    """"1g.10gb" from "NVIDIA A100-SXM4-80GB MIG 1g.10gb"; None when the name has none."""
    m = _PROFILE_RE.search(name)
    return m.group(1) if m else None


@dataclass(frozen=True, slots=True)
class MigProcess:
    """A process running on a MIG device, and the device memory it holds there."""

    pid: int
    gpu_mem_bytes: int | None  # None: the driver did not say (no permission, WDDM)


@dataclass(frozen=True, slots=True)
class MigDevice(GpmActivity):
    """One MIG device (a compute instance inside a GPU instance) of a GPU, at one tick.

    `None` is "not available" (shown as N/A), as everywhere in gputui. The GPM fields
    (GpmActivity's) are those of the device's GPU instance, None where the GPU has no
    GPM (pre-Hopper) or a read failed."""

    index: int  # the MIG device index under its GPU (nvmlDeviceGetMigDeviceHandleByIndex)
    uuid: str  # "MIG-…"
    name: str  # NVML's name, "NVIDIA A100-SXM4-80GB MIG 1g.10gb"
    profile: str | None  # "1g.10gb"
    gpu_instance_id: int | None
    compute_instance_id: int | None
    sm_count: int | None = None
    mem_used_bytes: int | None = None
    mem_total_bytes: int | None = None
    # None: the processes were not read yet or could not be (a failed read, no
    # permission); () is "none running".
    processes: tuple[MigProcess, ...] | None = None

    @property
    def label(self) -> str:
        """How a MIG device is named on screen and in the exporter: its profile, or the
        GPU instance id when the name did not say."""
        if self.profile:
            return self.profile
        return f"GI {self.gpu_instance_id}" if self.gpu_instance_id is not None else "MIG"

    @property
    def mem_pct(self) -> float | None:
        if self.mem_used_bytes is None or not self.mem_total_bytes:
            return None
        return 100.0 * self.mem_used_bytes / self.mem_total_bytes


def instance_count_text(devices: Iterable[MigDevice]) -> str:
    n = sum(1 for _ in devices)
    return f"{n} instance" if n == 1 else f"{n} instances"


def find_process(pid: int, devices: Iterable[MigDevice]) -> MigDevice | None:
    """The MIG device a process runs on (the process table's MIG column), or None."""
    for dev in devices:
        if dev.processes and any(p.pid == pid for p in dev.processes):
            return dev
    return None
