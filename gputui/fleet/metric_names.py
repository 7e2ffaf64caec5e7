"""Every metric name on a /metrics page, its unit, and the conversion to and from gputui's units.

Defined once for both sides: the exporter writes these names and converts gputui's
readings into DCGM's units (`to_dcgm`), the fleet reads them back (`from_dcgm`) — from
gputui and dcgm-exporter pages alike, and from Prometheus. The DCGM names, types and
units are those of dcgm-exporter's counters CSV (`etc/default-counters.csv`).

To add a DCGM field: one `DcgmField` below (with its unit; `RATIO` for the 0..1
`DCGM_FI_PROF_*` activity fields, `BYTES_PER_S` for their byte rates), one getter in
`exporter.DCGM_VALUES`, and, if the fleet shows it, one line in `readings`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

MIB = 1024 * 1024


@dataclass(frozen=True, slots=True)
class Unit:
    """A DCGM unit and how a gputui value (bytes, J, B/s, %, W, °C, MHz) maps onto it."""

    name: str
    to_dcgm: Callable[[float], float]
    from_dcgm: Callable[[float], float]


def _same(v: float) -> float:
    return v


PERCENT = Unit("%", _same, _same)
RATIO = Unit("ratio 0..1", lambda pct: pct / 100, lambda r: r * 100)
# DCGM reports framebuffer sizes as whole MiB (rounded down, as NVML's bytes // MiB).
MIB_UNIT = Unit("MiB", lambda b: b // MIB, lambda mib: mib * MIB)
# NVLink data counters: NVML's KiB, as DCGM passes them on.
KIB_UNIT = Unit("KiB", lambda b: b // 1024, lambda kib: kib * 1024)
WATT = Unit("W", _same, _same)
MILLIJOULE = Unit("mJ", lambda j: round(j * 1000), lambda mj: mj / 1000)
CELSIUS = Unit("C", _same, _same)
MHZ = Unit("MHz", _same, _same)
KB_PER_S = Unit("KB/s", lambda bps: bps / 1024, lambda kbps: kbps * 1024)
BYTES_PER_S = Unit("B/s", _same, _same)
COUNT = Unit("", _same, _same)  # counts, bitmasks, P-states, link generations


@dataclass(frozen=True, slots=True)
class DcgmField:
    name: str
    type: str  # "gauge" or "counter", as in dcgm-exporter's counters CSV
    help: str
    unit: Unit


GPU_UTIL = DcgmField("DCGM_FI_DEV_GPU_UTIL", "gauge", "GPU utilization (in %).", PERCENT)
MEM_COPY_UTIL = DcgmField("DCGM_FI_DEV_MEM_COPY_UTIL", "gauge", "Memory utilization (in %).",
                          PERCENT)
FB_USED = DcgmField("DCGM_FI_DEV_FB_USED", "gauge", "Framebuffer memory used (in MiB).",
                    MIB_UNIT)
FB_FREE = DcgmField("DCGM_FI_DEV_FB_FREE", "gauge", "Framebuffer memory free (in MiB).",
                    MIB_UNIT)
FB_TOTAL = DcgmField("DCGM_FI_DEV_FB_TOTAL", "gauge", "Framebuffer memory total (in MiB).",
                     MIB_UNIT)
FB_RESERVED = DcgmField("DCGM_FI_DEV_FB_RESERVED", "gauge",
                        "Framebuffer memory reserved (in MiB).", MIB_UNIT)
POWER_USAGE = DcgmField("DCGM_FI_DEV_POWER_USAGE", "gauge", "Power draw (in W).", WATT)
ENFORCED_POWER_LIMIT = DcgmField("DCGM_FI_DEV_ENFORCED_POWER_LIMIT", "gauge",
                                 "Enforced power limit (in W).", WATT)
TOTAL_ENERGY_CONSUMPTION = DcgmField("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "counter",
                                     "Total energy consumption since boot (in mJ).",
                                     MILLIJOULE)
GPU_TEMP = DcgmField("DCGM_FI_DEV_GPU_TEMP", "gauge", "GPU temperature (in C).", CELSIUS)
SLOWDOWN_TEMP = DcgmField("DCGM_FI_DEV_SLOWDOWN_TEMP", "gauge",
                          "Slowdown temperature threshold (in C).", CELSIUS)
SM_CLOCK = DcgmField("DCGM_FI_DEV_SM_CLOCK", "gauge", "SM clock frequency (in MHz).", MHZ)
MEM_CLOCK = DcgmField("DCGM_FI_DEV_MEM_CLOCK", "gauge", "Memory clock frequency (in MHz).", MHZ)
CLOCK_THROTTLE_REASONS = DcgmField(
    "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS", "gauge",
    "Current clock throttle reasons (bitmask of nvmlClocksEventReasons).", COUNT)
# Newer DCGM's name for the same bitmask; read, never written.
CLOCKS_EVENT_REASONS = DcgmField("DCGM_FI_DEV_CLOCKS_EVENT_REASONS", "gauge",
                                 "Current clock event reasons (bitmask).", COUNT)
FAN_SPEED = DcgmField("DCGM_FI_DEV_FAN_SPEED", "gauge", "Fan speed (in %).", PERCENT)
PSTATE = DcgmField("DCGM_FI_DEV_PSTATE", "gauge", "Performance state (0 fastest).", COUNT)
# dcgm-exporter's CSV declares these two "counter", but NVML (and DCGM) give a rate in
# KB/s sampled over ~20 ms; a counter type would make rate() nonsense, so: gauge.
PCIE_TX_THROUGHPUT = DcgmField("DCGM_FI_DEV_PCIE_TX_THROUGHPUT", "gauge",
                               "PCIe TX throughput (in KB/s) via NVML.", KB_PER_S)
PCIE_RX_THROUGHPUT = DcgmField("DCGM_FI_DEV_PCIE_RX_THROUGHPUT", "gauge",
                               "PCIe RX throughput (in KB/s) via NVML.", KB_PER_S)
PCIE_LINK_GEN = DcgmField("DCGM_FI_DEV_PCIE_LINK_GEN", "gauge", "Current PCIe link generation.",
                          COUNT)
PCIE_LINK_WIDTH = DcgmField("DCGM_FI_DEV_PCIE_LINK_WIDTH", "gauge",
                            "Current PCIe link width (lanes).", COUNT)
ECC_DBE_VOL_TOTAL = DcgmField("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "counter",
                              "Total number of double-bit volatile ECC errors.", COUNT)
MEMORY_TEMP = DcgmField("DCGM_FI_DEV_MEMORY_TEMP", "gauge", "Memory temperature (in C).",
                        CELSIUS)
ENC_UTIL = DcgmField("DCGM_FI_DEV_ENC_UTIL", "gauge", "Encoder utilization (in %).", PERCENT)
DEC_UTIL = DcgmField("DCGM_FI_DEV_DEC_UTIL", "gauge", "Decoder utilization (in %).", PERCENT)
NVLINK_BANDWIDTH_TOTAL = DcgmField(
    "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL", "counter",
    "Total number of NVLink bandwidth counters for all lanes (data sent + received, KiB).",
    KIB_UNIT)
PCIE_REPLAY_COUNTER = DcgmField("DCGM_FI_DEV_PCIE_REPLAY_COUNTER", "counter",
                                "Total number of PCIe retries.", COUNT)
UNCORRECTABLE_REMAPPED_ROWS = DcgmField("DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", "counter",
                                        "Number of remapped rows for uncorrectable errors",
                                        COUNT)
CORRECTABLE_REMAPPED_ROWS = DcgmField("DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS", "counter",
                                      "Number of remapped rows for correctable errors", COUNT)
ROW_REMAP_FAILURE = DcgmField("DCGM_FI_DEV_ROW_REMAP_FAILURE", "gauge",
                              "Whether remapping of rows has failed", COUNT)
RETIRED_SBE = DcgmField("DCGM_FI_DEV_RETIRED_SBE", "counter",
                        "Total number of retired pages due to single-bit errors.", COUNT)
RETIRED_DBE = DcgmField("DCGM_FI_DEV_RETIRED_DBE", "counter",
                        "Total number of retired pages due to double-bit errors.", COUNT)
RETIRED_PENDING = DcgmField("DCGM_FI_DEV_RETIRED_PENDING", "counter",
                            "Total number of pages pending retirement.", COUNT)
XID_ERRORS = DcgmField("DCGM_FI_DEV_XID_ERRORS", "gauge",
                       "Value of the last XID error encountered.", COUNT)
XID_EVENTS = "gputui_xid_events"  # a counter per XID number: served as ..._total
# gputui's own: a remap that waits for the next GPU reset (DCGM has no default field).
ROW_REMAP_PENDING = "gputui_row_remap_pending"

# Datacenter profiling (DCP) fields, from NVML's GPM counters (Hopper and newer).
PROF_GR_ENGINE_ACTIVE = DcgmField("DCGM_FI_PROF_GR_ENGINE_ACTIVE", "gauge",
                                  "Ratio of time the graphics engine is active.", RATIO)
PROF_SM_ACTIVE = DcgmField("DCGM_FI_PROF_SM_ACTIVE", "gauge",
                           "The ratio of cycles an SM has at least 1 warp assigned.", RATIO)
PROF_SM_OCCUPANCY = DcgmField("DCGM_FI_PROF_SM_OCCUPANCY", "gauge",
                              "The ratio of number of warps resident on an SM.", RATIO)
PROF_PIPE_TENSOR_ACTIVE = DcgmField("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "gauge",
                                    "Ratio of cycles the tensor (HMMA) pipe is active.", RATIO)
PROF_DRAM_ACTIVE = DcgmField(
    "DCGM_FI_PROF_DRAM_ACTIVE", "gauge",
    "Ratio of cycles the device memory interface is active sending or receiving data.", RATIO)
PROF_PIPE_FP64_ACTIVE = DcgmField("DCGM_FI_PROF_PIPE_FP64_ACTIVE", "gauge",
                                  "Ratio of cycles the fp64 pipes are active.", RATIO)
PROF_PIPE_FP32_ACTIVE = DcgmField("DCGM_FI_PROF_PIPE_FP32_ACTIVE", "gauge",
                                  "Ratio of cycles the fp32 pipes are active.", RATIO)
PROF_PIPE_FP16_ACTIVE = DcgmField("DCGM_FI_PROF_PIPE_FP16_ACTIVE", "gauge",
                                  "Ratio of cycles the fp16 pipes are active.", RATIO)
PROF_PCIE_TX_BYTES = DcgmField(
    "DCGM_FI_PROF_PCIE_TX_BYTES", "gauge",
    "The rate of data transmitted over the PCIe bus - including both protocol headers and "
    "data payloads - in bytes per second.", BYTES_PER_S)
PROF_PCIE_RX_BYTES = DcgmField(
    "DCGM_FI_PROF_PCIE_RX_BYTES", "gauge",
    "The rate of data received over the PCIe bus - including both protocol headers and "
    "data payloads - in bytes per second.", BYTES_PER_S)
PROF_NVLINK_TX_BYTES = DcgmField(
    "DCGM_FI_PROF_NVLINK_TX_BYTES", "gauge",
    "The rate of data transmitted over NVLink, not including protocol headers, in bytes "
    "per second.", BYTES_PER_S)
PROF_NVLINK_RX_BYTES = DcgmField(
    "DCGM_FI_PROF_NVLINK_RX_BYTES", "gauge",
    "The rate of data received over NVLink, not including protocol headers, in bytes per "
    "second.", BYTES_PER_S)

# The labels dcgm-exporter puts on every GPU series, in its order; the last is the driver
# version, which its default counters CSV adds to every series ("DCGM_FI_DRIVER_VERSION,
# label"). The host's label is `hostname` since dcgm-exporter renamed it in May 2026 (to
# join cleanly with Slurm's `hostname`); `gputui export --legacy-hostname-label` serves the
# old `Hostname` for dashboards built on it, and the fleet reads either.
DRIVER_VERSION_LABEL = "DCGM_FI_DRIVER_VERSION"
HOSTNAME_LABEL = "hostname"
LEGACY_HOSTNAME_LABEL = "Hostname"
HOSTNAME_LABELS = (HOSTNAME_LABEL, LEGACY_HOSTNAME_LABEL)
GPU_LABELS = ("gpu", "UUID", "device", "modelName", HOSTNAME_LABEL, "pci_bus_id",
              DRIVER_VERSION_LABEL)


def gpu_label_names(hostname_label: str = HOSTNAME_LABEL) -> tuple[str, ...]:
    return tuple(hostname_label if n == HOSTNAME_LABEL else n for n in GPU_LABELS)
# dcgm-exporter's extra labels on the series of a MIG GPU instance: its profile
# ("1g.10gb") and GPU instance id. A series with them is an instance's, not its GPU's.
MIG_PROFILE_LABEL = "GPU_I_PROFILE"
MIG_INSTANCE_LABEL = "GPU_I_ID"

# gputui's own series (not in DCGM).
UP = "gputui_up"
NVML_ERROR_INFO = "gputui_nvml_error_info"
GPU_LOST = "gputui_gpu_lost"
GPU_STALE = "gputui_gpu_stale"

# AMD GPUs, under the names and units of AMD's Device Metrics Exporter (docs/configuration/
# metricslist.md of ROCm/device-metrics-exporter), so its Grafana dashboards work: lower
# case, VRAM in MB (amd-smi's MiB), energy in µJ, PCIe speed in GT/s, clocks in one
# `gpu_clock` family with a `clock_type` label. Its labels (gpu_id: the GPU's place among
# the AMD GPUs; serial_number; card_model; hostname) and gputui's `gpu` and `pci_bus_id`.
MB_UNIT = Unit("MB", lambda b: b // MIB, lambda mb: mb * MIB)
MICROJOULE = Unit("uJ", lambda j: round(j * 1e6), lambda uj: uj / 1e6)
AMD_GFX_ACTIVITY = DcgmField("gpu_gfx_activity", "gauge",
                             "Graphics engine usage percentage (0 - 100).", PERCENT)
AMD_UMC_ACTIVITY = DcgmField("gpu_umc_activity", "gauge",
                             "Memory engine usage percentage (0 - 100).", PERCENT)
AMD_USED_VRAM = DcgmField("gpu_used_vram", "gauge", "Total VRAM memory used in MB.", MB_UNIT)
AMD_TOTAL_VRAM = DcgmField("gpu_total_vram", "gauge", "Total VRAM available in MB.", MB_UNIT)
AMD_FREE_VRAM = DcgmField("gpu_free_vram", "gauge", "Total VRAM memory free in MB.", MB_UNIT)
AMD_PACKAGE_POWER = DcgmField("gpu_package_power", "gauge", "Current socket power in Watts.",
                              WATT)
AMD_POWER_USAGE = DcgmField("gpu_power_usage", "gauge", "GPU power usage in Watts.", WATT)
AMD_ENERGY = DcgmField("gpu_energy_consumed", "gauge",
                       "Accumulated energy consumed by the GPU in Micro Jules (uJ).",
                       MICROJOULE)
AMD_JUNCTION_TEMP = DcgmField("gpu_junction_temperature", "gauge",
                              "Hotspot (aka junction) temperature value in Celsius.", CELSIUS)
AMD_EDGE_TEMP = DcgmField("gpu_edge_temperature", "gauge", "Edge temperature value in Celsius.",
                          CELSIUS)
AMD_MEMORY_TEMP = DcgmField("gpu_memory_temperature", "gauge",
                            "Memory temperature value in Celsius.", CELSIUS)
AMD_ECC_UNCORRECT = DcgmField("gpu_ecc_uncorrect_total", "gauge",
                              "Total Uncorrectable ECC error count.", COUNT)
AMD_CLOCK = "gpu_clock"  # MHz; clock_type "system" (gfx) or "memory"
AMD_CLOCK_TYPES = (("system", "clock_sm_mhz"), ("memory", "clock_mem_mhz"))
AMD_PCIE_SPEED = "pcie_speed"  # GT/s
AMD_PCIE_MAX_SPEED = "pcie_max_speed"
AMD_NODES_TOTAL = "gpu_nodes_total"
AMD_LABELS = ("gpu_id", "serial_number", "card_model", HOSTNAME_LABEL, "gpu", "UUID",
              "pci_bus_id")
# An AMD GPU's throttle reasons as gputui's bitmask (gputui.telemetry.throttle): what
# DCGM_FI_DEV_CLOCK_THROTTLE_REASONS is for an NVIDIA GPU, which AMD's exporter has no
# name for.
AMD_THROTTLE_MASK = "gputui_clock_event_reasons"
# GT/s per lane of each PCIe generation (AMD's exporter reports the speed, not the gen).
PCIE_GT_PER_S = {1: 2.5, 2: 5.0, 3: 8.0, 4: 16.0, 5: 32.0, 6: 64.0}

HOST_CPU_PERCENT = "gputui_host_cpu_percent"
HOST_MEMORY_USED_BYTES = "gputui_host_memory_used_bytes"
HOST_MEMORY_TOTAL_BYTES = "gputui_host_memory_total_bytes"
THROTTLE_EPISODES = "gputui_throttle_episodes"  # a counter: served as ..._total
THROTTLE_SECONDS = "gputui_throttle_seconds"  # a counter: served as ..._total
# Training jobs reporting with gputui.track: one series per job and GPU it runs on.
JOB_SAMPLES_PER_SECOND = "gputui_job_samples_per_second"
JOB_TOKENS_PER_SECOND = "gputui_job_tokens_per_second"
JOB_LABELS = ("pid", "job", "gpu")
# A job's energy on each GPU it ran on (gputui.telemetry.energy): a counter, served as
# ..._total.
JOB_ENERGY_JOULES = "gputui_job_energy_joules"
# Each GPU process's share of its GPU's power and energy, and its GPU memory.
PROCESS_POWER_WATTS = "gputui_process_power_watts"
PROCESS_ENERGY_JOULES = "gputui_process_energy_joules"  # a counter: served as ..._total
PROCESS_GPU_MEMORY_BYTES = "gputui_process_gpu_memory_bytes"
# dcgm-exporter's Kubernetes labels: on a GPU's series where every process on it is in
# one pod, and on each process's series (empty where it is in none).
POD_LABELS = ("pod", "namespace", "container")
PROCESS_LABELS = ("gpu", "UUID", "pid", "user")
