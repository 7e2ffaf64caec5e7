"""NVML, the one place gputui talks to the NVIDIA driver: this package is the only code
that imports pynvml (a test keeps it so).

- `common`: field sets and profiles, errors, per-device state
- `source`: NvmlSource (static facts, per-tick fields, processes, slow counters)
- `extras`: extra DCGM counters, sub-second samples, NVLink, GPM profiling metrics
- `health_reads`: configuration and health (doctor, benchmark results), P2P paths
- `events`: the XID/ECC event listener
"""

from gputui.telemetry.nvml.common import (
    ALL_FIELDS,
    FI_DEV_MEMORY_TEMP,
    MONITOR_FIELDS,
    PROFILE_FIELDS,
    NvmlUnavailable,
    describe_init_error,
    pending_info,
    profile_fields,
)
from gputui.telemetry.nvml.events import EVENT_KINDS, MONITOR_EVENTS, XidWatcher
from gputui.telemetry.nvml.health_reads import p2p_link, read_health
from gputui.telemetry.nvml.source import NvmlSource

__all__ = [
    "ALL_FIELDS",
    "EVENT_KINDS",
    "FI_DEV_MEMORY_TEMP",
    "MONITOR_EVENTS",
    "MONITOR_FIELDS",
    "PROFILE_FIELDS",
    "NvmlSource",
    "NvmlUnavailable",
    "XidWatcher",
    "describe_init_error",
    "p2p_link",
    "pending_info",
    "profile_fields",
    "read_health",
]
