"""NVML, the one place gputui talks to the NVIDIA driver: this package is the only code
that imports pynvml (a test keeps it so).

- `query`: NvmlQuery, the funnel every call goes through (NOT_SUPPORTED remembered, lost
  GPUs, functions older drivers lack)
- `source`: NvmlSource (initialise, count, one DeviceReader per GPU, events, shut down)
- `device`: DeviceReader (one GPU's handle, static facts and per-tick reads)
- `counters`, `gpm_session`, `processes`, `mig_reader`: what a DeviceReader reads beside
  its core fields
- `profiles`: the field sets consumers ask for; `errors`: why NVML is unavailable
- `health_reads`: configuration and health (doctor, benchmark results), P2P paths;
  imported by those who read them (not here: the monitor never does)
- `gpu_links`: how the GPUs reach each other (a DDP benchmark's topology)
- `events`: the XID/ECC event listener
"""

from gputui.telemetry.nvml.counters import FI_DEV_MEMORY_TEMP
from gputui.telemetry.nvml.device import pending_info
from gputui.telemetry.nvml.errors import NvmlUnavailable, describe_init_error
from gputui.telemetry.nvml.events import EVENT_KINDS, MONITOR_EVENTS, XidWatcher
from gputui.telemetry.nvml.profiles import (
    ALL_FIELDS,
    MONITOR_FIELDS,
    PROFILE_FIELDS,
    profile_fields,
)
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
    "pending_info",
    "profile_fields",
]
