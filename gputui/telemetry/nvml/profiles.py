"""The field sets a consumer asks for (by profile name), so that each pays only for what
it shows."""

from __future__ import annotations

# Fields a consumer may ask for beyond the always-read core. PCIe throughput is the
# expensive one (NVML samples the link for ~20 ms per call).
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
# ticks, every 10 s) and the memory clock (one call a tick).
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


def profile_fields(profile: str) -> frozenset[str]:
    try:
        return PROFILE_FIELDS[profile]
    except KeyError:
        raise ValueError(f"unknown field profile {profile!r}") from None
