"""Immutable records that flow from the sources to every consumer.

Everything here is plain data: the sampler builds these on its thread and hands
them to the UI, the CLI, the recorder and the exporter, which never mutate them.
`None` always means "not available on this device" (shown as N/A), never 0.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import UTC, datetime

from gputui.telemetry.gpm import GpmActivity
from gputui.telemetry.mig import MigDevice


@dataclass(frozen=True, slots=True)
class SystemInfo:
    """The drivers' versions: read once when the sources open. driver, NVML and CUDA are
    NVIDIA's; amdgpu's is its own (a box may have both)."""

    driver_version: str | None = None
    nvml_version: str | None = None
    cuda_driver_version: str | None = None  # "12.4", from NVML's integer 12040
    amd_driver_version: str | None = None  # the amdgpu module's version, else the kernel's


@dataclass(frozen=True, slots=True)
class DeviceInfo:
    """What does not change while the driver is loaded; read once per device."""

    index: int
    name: str
    uuid: str
    pci_bus_id: str
    mem_total_bytes: int | None = None
    temp_slowdown_c: int | None = None
    temp_shutdown_c: int | None = None
    clock_sm_max_mhz: int | None = None
    clock_mem_max_mhz: int | None = None
    pcie_gen_max: int | None = None
    pcie_width_max: int | None = None
    temp_mem_max_c: int | None = None  # memory temperature limit, where NVML gives one
    vendor: str = "nvidia"  # whose GPU: "nvidia" or "amd" (gputui.telemetry.source.VENDORS)


@dataclass(frozen=True, slots=True)
class NvLink:
    """One NVLink link of a GPU: up or down, and its rates over the last tick (from the
    GPM counters, Hopper and newer; None elsewhere)."""

    link: int
    active: bool
    tx_bps: float | None = None
    rx_bps: float | None = None


@dataclass(frozen=True, slots=True)
class GpuSample(GpmActivity):
    """One device at one tick. Static facts are in `info`; the GPM activity ratios (SM
    active, tensor active, ...) are GpmActivity's fields."""

    info: DeviceInfo
    lost: bool = False
    error: str | None = None  # a one-line reason when the whole device failed this tick
    # True when this device's reader did not answer in time this tick (a hung or slow
    # driver call): the values are the last good reading, `stale_s` seconds old. Shown
    # marked as stale, never exported as current.
    stale: bool = False
    stale_s: float | None = None
    util_gpu_pct: int | None = None
    util_mem_pct: int | None = None
    mem_used_bytes: int | None = None
    mem_total_bytes: int | None = None
    power_w: float | None = None
    power_limit_w: float | None = None
    temp_c: int | None = None
    fan_pct: int | None = None
    clock_sm_mhz: int | None = None
    clock_mem_mhz: int | None = None
    pstate: int | None = None
    energy_j: float | None = None
    pcie_gen: int | None = None
    pcie_width: int | None = None
    pcie_rx_bps: float | None = None
    pcie_tx_bps: float | None = None
    ecc_uncorrected: int | None = None
    throttle_mask: int | None = None
    # Fraction (0..1) of the last tick's wall time that NVML counted as a violation.
    violation_power_frac: float | None = None
    violation_thermal_frac: float | None = None
    # GPM byte rates of the whole GPU over the last tick (the activity ratios are
    # GpmActivity's fields).
    gpm_pcie_tx_bps: float | None = None
    gpm_pcie_rx_bps: float | None = None
    nvlink_tx_bps: float | None = None
    nvlink_rx_bps: float | None = None
    # Why GPM values are missing although the device has GPM (another profiler holds the
    # counters); None when they flow or the device has no GPM.
    gpm_note: str | None = None
    # HBM/GDDR temperature (NVML_FI_DEV_MEMORY_TEMP); its limit is DeviceInfo.temp_mem_max_c.
    mem_temp_c: int | None = None
    # AMD's two die sensors (hwmon temp2 "junction", the hotspot, and temp1 "edge"); temp_c
    # is the junction's, else the edge's. None on NVIDIA GPUs, which report one.
    temp_junction_c: int | None = None
    temp_edge_c: int | None = None
    enc_util_pct: int | None = None  # video encoder, %
    dec_util_pct: int | None = None  # video decoder, %
    mem_reserved_bytes: int | None = None  # held by the driver (memory info v2)
    pcie_replay_count: int | None = None  # PCIe retries since boot (a bad riser/slot grows it)
    # Row remapping (nvmlDeviceGetRemappedRows; HBM GPUs), read every few ticks.
    remap_correctable_rows: int | None = None
    remap_uncorrectable_rows: int | None = None
    remap_pending: bool | None = None  # a remap waits for the next GPU reset
    remap_failure: bool | None = None  # a row could not be remapped: the GPU needs service
    # Page retirement (pre-Ampere memory; row remapping replaced it), every few ticks.
    retired_pages_sbe: int | None = None  # pages retired for repeated single-bit errors
    retired_pages_dbe: int | None = None  # pages retired for double-bit errors
    retired_pages_pending: bool | None = None  # retirement waits for the next reset
    # Every NVLink link of the GPU (None: no NVLink), read every few ticks.
    nvlink_links: tuple[NvLink, ...] | None = None
    # NVLink payload sent plus received over all links since boot, bytes (a counter:
    # dcgm-exporter's DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL), read every few ticks.
    nvlink_bytes_total: int | None = None
    # Lowest and highest of the driver's own samples (every ~100 ms) since the last tick
    # (nvmlDeviceGetSamples): a power spike between 1 s ticks, the kind that trips a power
    # brake, shows here though power_w missed it.
    power_w_min: float | None = None
    power_w_max: float | None = None
    util_gpu_pct_min: int | None = None
    util_gpu_pct_max: int | None = None
    clock_sm_mhz_min: int | None = None
    clock_sm_mhz_max: int | None = None
    # MIG devices of this GPU (gputui.telemetry.mig), in MIG device index order; () when MIG
    # mode is off, the GPU or driver has no MIG, or the MIG reads failed.
    mig_devices: tuple[MigDevice, ...] = ()

    @property
    def index(self) -> int:
        return self.info.index

    @property
    def mem_pct(self) -> float | None:
        if self.mem_used_bytes is None or not self.mem_total_bytes:
            return None
        return 100.0 * self.mem_used_bytes / self.mem_total_bytes

    @property
    def power_pct(self) -> float | None:
        if self.power_w is None or not self.power_limit_w:
            return None
        return 100.0 * self.power_w / self.power_limit_w



@dataclass(frozen=True, slots=True)
class GpuEnergy:
    """A GPU's energy since gputui first read it, as gputui.telemetry.energy shares it out
    (its energy counter, else its power integrated): all of it; the part below the idle
    figure; the part no process was given (idle while shared, everything while no compute
    process ran). Each process's energy_j on it plus energy_unattributed_j add up to
    energy_seen_j (those that ended included). idle_power_w is the idle figure in use: the
    configured one, else the lowest draw seen while no compute process ran (None until
    then). A record of its own beside the GpuSample: built every tick, it is small."""

    gpu_index: int
    energy_seen_j: float
    energy_idle_j: float
    energy_unattributed_j: float
    idle_power_w: float | None = None


@dataclass(frozen=True, slots=True)
class GpuProcess:
    """One process using a GPU, with what psutil knows of it."""

    gpu_index: int
    pid: int
    gpu_mem_bytes: int | None
    kind: str = "compute"  # "compute" or "graphics"
    user: str | None = None
    command: str | None = None
    cpu_pct: float | None = None
    rss_bytes: int | None = None
    started: float | None = None  # epoch seconds (psutil create_time)
    # This process's share of the GPU since the previous process reading, in %
    # (nvmlDeviceGetProcessesUtilizationInfo); None where the driver gave no sample.
    sm_util_pct: int | None = None
    mem_util_pct: int | None = None  # memory controller
    enc_util_pct: int | None = None
    dec_util_pct: int | None = None
    # Where it runs, from /proc/PID/cgroup and the container runtimes' and kubelet's files
    # (gputui.telemetry.container, gputui.telemetry.pods); None where not known (a host
    # process has none). `container` is the container's name, else its short id.
    container: str | None = None
    container_id: str | None = None  # the runtime's full id (64 hex digits)
    pod: str | None = None  # Kubernetes pod name
    namespace: str | None = None  # its namespace
    pod_uid: str | None = None
    qos: str | None = None  # the pod's QoS class: guaranteed, burstable, besteffort
    # Its share of its GPU's energy (gputui.telemetry.energy, computed on the sampler's
    # side): W over the last tick, J since gputui first saw it on this GPU, how it was
    # shared out ("exclusive", "sm_share", "equal_split") and whether any of it is an
    # estimate (anything but a GPU to itself). None where the GPU gives no power reading
    # or the process is not a compute process.
    power_w: float | None = None
    energy_j: float | None = None
    energy_method: str | None = None
    energy_estimate: bool | None = None

    @property
    def pod_name(self) -> str | None:
        """"namespace/pod", else the pod's uid where only that is known; None outside a
        pod."""
        if self.pod is not None:
            return f"{self.namespace}/{self.pod}" if self.namespace else self.pod
        return f"pod {self.pod_uid}" if self.pod_uid else None

    def with_workload(self, w: Workload | None) -> GpuProcess:
        if w is None:
            return self
        return replace(self, container=w.container, container_id=w.container_id, pod=w.pod,
                       namespace=w.namespace, pod_uid=w.pod_uid, qos=w.qos)


@dataclass(frozen=True, slots=True)
class Workload:
    """Where a process runs: its container and Kubernetes pod, each None where not known."""

    container: str | None = None  # the container's name, else its short id
    container_id: str | None = None
    pod: str | None = None
    namespace: str | None = None
    pod_uid: str | None = None
    qos: str | None = None



@dataclass(frozen=True, slots=True)
class GpuEvent:
    """Something NVML reported as it happened (nvmlEventSetWait): an XID error, an ECC error."""

    gpu_index: int
    kind: str  # "xid", "ecc_single_bit", "ecc_double_bit", "clock_change"
    time: datetime  # wall clock, UTC
    xid: int | None = None  # the XID number (kind "xid")
    meaning: str = ""  # in words, e.g. "GPU has fallen off the bus"


@dataclass(frozen=True, slots=True)
class JobReading:
    """A training job that reports with gputui.track, as read at one tick
    (gputui.telemetry.jobs). Rates are over the last few seconds of its steps; None
    where the job reports no such figure (tokens) or has too few steps yet."""

    pid: int
    name: str
    gpus: tuple[int, ...]  # NVML indices: its NVML processes, else its CUDA_VISIBLE_DEVICES
    step: int
    samples: int  # so far
    tokens: int
    samples_per_s: float | None
    tokens_per_s: float | None
    step_time_s: float | None  # median over the window
    updated: datetime | None  # wall clock (UTC) of its last step
    cuda_visible_devices: str | None = None  # as the job saw it; None when unset
    # Its energy (gputui.telemetry.energy: the shares of its process on each GPU): J since
    # gputui first saw it, W over the last WINDOW_S, and per step / sample / token at that
    # W (W × the median step time, W ÷ the rates). None where no GPU energy reached it (its
    # process is in no GPU's process list) or the job reports no such count.
    energy_j: float | None = None
    power_w: float | None = None
    energy_per_step_j: float | None = None
    energy_per_sample_j: float | None = None
    energy_per_token_j: float | None = None
    # False only while every joule came from GPUs the job had to itself.
    energy_estimate: bool | None = None
    energy_by_gpu: tuple[tuple[int, float], ...] = ()  # (GPU index, J) of energy_j

    @property
    def throughput(self) -> float | None:
        """What its slowdown is judged on: samples/s, else tokens/s, else steps/s."""
        if self.samples_per_s is not None:
            return self.samples_per_s
        if self.tokens_per_s is not None:
            return self.tokens_per_s
        return 1.0 / self.step_time_s if self.step_time_s else None

    @property
    def throughput_total(self) -> float:
        """The count `throughput` is a rate of (steps when it reports neither)."""
        if self.samples_per_s is not None:
            return float(self.samples)
        if self.tokens_per_s is not None:
            return float(self.tokens)
        return float(self.step)


@dataclass(frozen=True, slots=True)
class HostSample:
    """The host's CPU, memory, swap and load at one tick (psutil)."""

    hostname: str
    cpu_pct: float | None = None
    cpu_per_core_pct: tuple[float, ...] = ()
    mem_used_bytes: int | None = None
    mem_total_bytes: int | None = None
    swap_used_bytes: int | None = None
    swap_total_bytes: int | None = None
    load_avg: tuple[float, float, float] | None = None


@dataclass(frozen=True, slots=True)
class Snapshot:
    """Everything known at one tick."""

    time: datetime  # wall clock, UTC
    mono: float  # time.monotonic() when taken; for intervals only
    system: SystemInfo
    host: HostSample
    gpus: tuple[GpuSample, ...] = ()
    processes: tuple[GpuProcess, ...] = ()
    nvml_error: str | None = None
    seq: int = 0
    skipped_ticks: int = 0
    events: tuple[GpuEvent, ...] = ()  # what NVML reported since the previous snapshot
    jobs: tuple[JobReading, ...] = ()  # training jobs reporting with gputui.track
    # Jobs that ended since the previous snapshot: each one's last reading, its energy
    # totals included (the end-of-run line).
    jobs_ended: tuple[JobReading, ...] = ()
    # Each GPU's energy as shared out (gputui.telemetry.energy); none for a GPU never read.
    gpu_energy: tuple[GpuEnergy, ...] = ()

    @property
    def time_iso(self) -> str:
        return iso_utc(self.time)

    def energy_of(self, gpu_index: int) -> GpuEnergy | None:
        return next((e for e in self.gpu_energy if e.gpu_index == gpu_index), None)


def iso_utc(t: datetime) -> str:
    return t.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def parse_iso(s: str) -> datetime:
    return datetime.fromisoformat(s.replace("Z", "+00:00")).astimezone(UTC)
