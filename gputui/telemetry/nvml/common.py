"""What every part of the NVML package shares: the field sets a consumer asks for, the
errors, and the per-device state the source keeps (the only package that imports pynvml)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import pynvml

from gputui.telemetry import gpm
from gputui.telemetry.model import (
    DeviceInfo,
    NvLink,
)

T = TypeVar("T")

# Fields a consumer may ask for beyond the always-read core, so that a consumer
# pays only for what it shows. PCIe throughput is the expensive one (NVML samples
# the link for ~20 ms per call).
ALL_FIELDS = frozenset({"pcie_throughput", "violation", "ecc", "pcie_link", "energy",
                        "clock_mem", "gpm", "mem_temp", "codec", "pcie_replay", "remap",
                        "power_samples", "util_samples", "process_util", "nvlink", "mig",
                        "link_rates"})
# What the live monitor draws: ECC, memory temperature, row remapping and XID/ECC events
# feed its alerts. GPM gives the "SM active" figure beside GPU util in every panel and
# row.
# Per-process utilization feeds the process table's SM% / MEM% / ENC% / DEC% columns
# (two calls per GPU with the process list, every few ticks). The GPU detail screen (`i`)
# shows the PCIe link, PCIe replays, NVLink link states and violation counters (slow
# ticks, every 10 s) and the memory clock (one call a tick): ~3 µs per GPU and tick.
# The driver's sub-second power samples give each tick's min and max draw: the PWR
# sparkline and the history view draw the max, so spikes between ticks show.
# Per-link NVLink rates ("link_rates": 36 more GPM metrics a tick on an 18-link GPU) only
# while the detail screen shows them (NvmlSource.want_link_rates); the all-links totals
# are always read.
MONITOR_FIELDS = frozenset({"ecc", "mem_temp", "remap", "events", "mig", "process_util",
                            "gpm", "pcie_link", "pcie_replay", "nvlink", "violation",
                            "clock_mem", "power_samples"})
# What the GPU detail screen adds while it is open (NvmlSource.want_detail_fields): the
# energy counter, the tick's min/max from the driver's utilization and SM clock samples,
# PCIe throughput (~20 ms a call, so never in the monitor's own profile) and per-link
# NVLink rates.
DETAIL_FIELDS = frozenset({"energy", "util_samples", "pcie_throughput", "link_rates"})
# Named profiles, so that a consumer (the TUI) chooses by name without importing this
# module: a recording keeps everything but PCIe throughput.
PROFILE_FIELDS = {
    "monitor": MONITOR_FIELDS,
    # "events": a listener thread for XID/ECC events (the doctor runs its own).
    "record": ALL_FIELDS - {"pcie_throughput"} | {"events"},
    "full": ALL_FIELDS | {"events"},
    # The benchmark runner's throttle watcher: reasons, clocks, temperature and power
    # (the core) plus the memory clock; never PCIe throughput, which costs ~20 ms a call.
    "throttle": frozenset({"clock_mem"}),
}


# How long a process's last utilization sample stands when the driver has no newer one.
PROCESS_UTIL_KEEP_S = 5.0

# nvmlDeviceGetFieldValues ids (nvml.h) and how each value type is read from the union.
FI_DEV_MEMORY_TEMP = 82
FI_DEV_NVLINK_THROUGHPUT_DATA_TX = 138  # KiB of payload sent, since boot (per link, or
FI_DEV_NVLINK_THROUGHPUT_DATA_RX = 139  # all links with scopeId ALL_LINKS); received
ALL_LINKS = 0xFFFFFFFF  # scopeId UINT_MAX: the sum over the device's links
_FIELD_VALUE_GETTERS: dict[int, Callable[[Any], float]] = {
    pynvml.NVML_VALUE_TYPE_DOUBLE: lambda v: v.dVal,
    pynvml.NVML_VALUE_TYPE_UNSIGNED_INT: lambda v: v.uiVal,
    pynvml.NVML_VALUE_TYPE_UNSIGNED_LONG: lambda v: v.ulVal,
    pynvml.NVML_VALUE_TYPE_UNSIGNED_LONG_LONG: lambda v: v.ullVal,
    pynvml.NVML_VALUE_TYPE_SIGNED_LONG_LONG: lambda v: v.sllVal,
    pynvml.NVML_VALUE_TYPE_SIGNED_INT: lambda v: v.siVal,
    pynvml.NVML_VALUE_TYPE_UNSIGNED_SHORT: lambda v: v.usVal,
}


def profile_fields(profile: str) -> frozenset[str]:
    try:
        return PROFILE_FIELDS[profile]
    except KeyError:
        raise ValueError(f"unknown field profile {profile!r}") from None


def pending_info(index: int) -> DeviceInfo:
    """What is known of a device before its static facts could be read."""
    return DeviceInfo(index=index, name="(not answering)", uuid="", pci_bus_id="")


class NvmlUnavailable(Exception):
    """NVML cannot be used at all; str() is the one line shown to the user."""


def describe_init_error(exc: BaseException) -> str:
    if isinstance(exc, pynvml.NVMLError_LibraryNotFound):
        return "NVML library not found — is the NVIDIA driver installed?"
    if isinstance(exc, pynvml.NVMLError_DriverNotLoaded):
        return "NVIDIA driver not loaded — is the nvidia kernel module loaded?"
    if isinstance(exc, pynvml.NVMLError_LibRmVersionMismatch):
        return ("NVML/driver version mismatch — the driver was updated; reload the nvidia "
                "kernel module or reboot")
    if isinstance(exc, pynvml.NVMLError_NoPermission):
        return "no permission to access the GPUs (NVML: Insufficient Permissions)"
    return f"NVML failed to initialise: {_err_text(exc)}"


def _err_text(exc: BaseException) -> str:
    try:
        return str(exc)
    except Exception:  # pynvml's __str__ itself calls into the library
        return type(exc).__name__


def _text(value: bytes | str) -> str:
    return value.decode(errors="replace") if isinstance(value, bytes) else value


@dataclass
class _Device:
    index: int
    handle: Any
    info: DeviceInfo
    unsupported: set[str] = field(default_factory=set)
    lost: bool = False
    error: str | None = None  # handle could not be obtained
    pending: bool = False  # not opened yet (its reader thread is still opening it)
    # Slow fields carried between slow ticks.
    power_limit_w: float | None = None
    ecc_uncorrected: int | None = None
    pcie_gen: int | None = None
    pcie_width: int | None = None
    violation_power_frac: float | None = None
    violation_thermal_frac: float | None = None
    last_violation: dict[int, tuple[int, int]] = field(default_factory=dict)
    gpm: _GpmSession | None = None  # opened on the first GPM read
    mem_reserved_bytes: int | None = None  # from the last memory info v2 read
    pcie_replay_count: int | None = None
    remap: tuple[int, int, bool, bool] | None = None
    retired: tuple[int, int, bool] | None = None
    nvlink_states: tuple[bool, ...] | None = None  # per link: active
    # Last tick's links and what they were made from: reused when nothing changed.
    nvlink_shown: tuple[tuple[bool, ...], gpm.LinkMiBps | None, tuple[NvLink, ...]] | None = None
    nvlink_bytes_total: int | None = None  # NVLink data sent + received since boot
    sample_seen: dict[int, int] = field(default_factory=dict)  # sampling type → last µs
    # pid → (monotonic time read, (SM, memory, encoder, decoder %)): the latest sample
    process_util: dict[int, tuple[float, tuple[int, int, int, int]]] = field(
        default_factory=dict)
    mig: Any = None  # mig_reads.MigState once MIG mode was asked (once per open)
    calls: Any = None  # prepared.TickCalls: the every-tick reads, once the handle is known
    plain: bool = False  # every core read answered last tick: read them in one run
    core_skip: frozenset[str] = frozenset()  # core fields the device lacks (NOT_SUPPORTED)


@dataclass
class _GpmSession:
    """One device's two GPM sample buffers (alternating: the metrics of a tick come from
    the previous sample and this one) and the request struct, allocated once."""

    samples: tuple[Any, Any]
    # pynvml.c_nvmlGpmMetricsGet_t, metric ids filled in: requests[i] takes its second
    # sample from samples[i] and its first from the other buffer.
    requests: tuple[Any, Any]
    # Per request: its numMetrics as last set, its byref and its metrics array's address
    # (made once: pynvml's struct accessors cost ~1 µs per read).
    asked: list[int] = field(default_factory=lambda: [0, 0])
    request_refs: tuple[Any, ...] = ()
    metrics_at: tuple[int, ...] = ()
    current: int = 0  # the buffer the next sample goes into
    primed: bool = False  # the other buffer holds a good sample
    links: int = 0  # NVLink links whose per-link rates the request asks for
    link_rates: gpm.LinkMiBps | None = None  # the last metrics' per-link rates
    backoff: gpm.GpmBackoff = field(default_factory=gpm.GpmBackoff)
    sampled_at: float | None = None  # gpm_clock() of the sample in the other buffer
    last: dict[str, Any] = field(default_factory=dict)  # the figures of the last pair
