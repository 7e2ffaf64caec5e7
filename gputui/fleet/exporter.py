"""`gputui export`'s metrics: the latest Snapshot under the names dcgm-exporter uses.

A scrape never calls NVML: a running Sampler reads the GPUs on its own thread at a
fixed interval, and the collector only formats the latest immutable Snapshot plus
counters accumulated from the ticks. Existing Grafana dashboards written for NVIDIA's
dcgm-exporter work unchanged because the names, units and labels (`gpu`, `UUID`,
`device`, `modelName`, `hostname`, `pci_bus_id`) match (`metric_names`); a GPU whose
processes all run in one Kubernetes pod gets dcgm-exporter's `pod`, `namespace` and
`container` labels too. Each GPU process has its own series (power and energy as
gputui.telemetry.energy shares them out, GPU memory) with those labels, and each
training job its energy per GPU. A GPU whose reader did not answer in time (stale) or a
sampler that stopped ticking is never served as current: its DCGM values are left out
and `gputui_gpu_stale` says so.
Serving is `metrics_server`; the --listen address is `listen`.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from gputui.fleet import metric_names as mn
from gputui.fleet.amd_metrics import amd_metrics
from gputui.telemetry.mig import MigDevice
from gputui.telemetry.model import GpuSample, Snapshot
from gputui.telemetry.process_groups import GpuOwner, gpu_owners
from gputui.telemetry.throttle import AMD_MASK, AMD_ONLY_MASK, REASONS, THROTTLE_MASK, is_throttling

GPU_LABELS = mn.GPU_LABELS
THROTTLING_REASONS = tuple(r for r in REASONS if r.throttling)


def vendor_reasons(vendor: str) -> tuple[str, ...]:
    """The throttle reasons a GPU of `vendor` can give: a time series for each (at 0
    until it happens), none for a reason it never can."""
    if vendor == "amd":
        return tuple(r.key for r in THROTTLING_REASONS if r.bit & AMD_MASK)
    return tuple(r.key for r in THROTTLING_REASONS if not r.bit & AMD_ONLY_MASK)


# --- the collector ---------------------------------------------------------------------


def _fb_total(g: GpuSample) -> int | None:
    return g.mem_total_bytes if g.mem_total_bytes is not None else g.info.mem_total_bytes


def _fb_free(g: GpuSample) -> int | None:
    total = _fb_total(g)
    if total is None or g.mem_used_bytes is None:
        return None
    # As NVML's memory info v2: what is neither used nor held by the driver.
    return max(0, total - g.mem_used_bytes - (g.mem_reserved_bytes or 0))


@dataclass(frozen=True, slots=True)
class DcgmValue:
    """Which GpuSample reading (in gputui's units) a DCGM field is served from."""

    field: mn.DcgmField
    get: Callable[[GpuSample], float | None]

    def value(self, g: GpuSample) -> float | None:
        v = self.get(g)
        return None if v is None else float(self.field.unit.to_dcgm(v))


DCGM_VALUES: tuple[DcgmValue, ...] = (
    DcgmValue(mn.GPU_UTIL, lambda g: g.util_gpu_pct),
    DcgmValue(mn.MEM_COPY_UTIL, lambda g: g.util_mem_pct),
    DcgmValue(mn.FB_USED, lambda g: g.mem_used_bytes),
    DcgmValue(mn.FB_FREE, _fb_free),
    DcgmValue(mn.FB_TOTAL, _fb_total),
    DcgmValue(mn.FB_RESERVED, lambda g: g.mem_reserved_bytes),
    DcgmValue(mn.POWER_USAGE, lambda g: g.power_w),
    DcgmValue(mn.ENFORCED_POWER_LIMIT, lambda g: g.power_limit_w),
    DcgmValue(mn.TOTAL_ENERGY_CONSUMPTION, lambda g: g.energy_j),
    DcgmValue(mn.GPU_TEMP, lambda g: g.temp_c),
    DcgmValue(mn.MEMORY_TEMP, lambda g: g.mem_temp_c),
    DcgmValue(mn.SLOWDOWN_TEMP, lambda g: g.info.temp_slowdown_c),
    DcgmValue(mn.SM_CLOCK, lambda g: g.clock_sm_mhz),
    DcgmValue(mn.MEM_CLOCK, lambda g: g.clock_mem_mhz),
    DcgmValue(mn.CLOCK_THROTTLE_REASONS, lambda g: g.throttle_mask),
    DcgmValue(mn.FAN_SPEED, lambda g: g.fan_pct),
    DcgmValue(mn.PSTATE, lambda g: g.pstate),
    DcgmValue(mn.PCIE_TX_THROUGHPUT, lambda g: g.pcie_tx_bps),
    DcgmValue(mn.PCIE_RX_THROUGHPUT, lambda g: g.pcie_rx_bps),
    DcgmValue(mn.PCIE_LINK_GEN, lambda g: g.pcie_gen),
    DcgmValue(mn.PCIE_LINK_WIDTH, lambda g: g.pcie_width),
    DcgmValue(mn.ECC_DBE_VOL_TOTAL, lambda g: g.ecc_uncorrected),
    DcgmValue(mn.ENC_UTIL, lambda g: g.enc_util_pct),
    DcgmValue(mn.DEC_UTIL, lambda g: g.dec_util_pct),
    DcgmValue(mn.PCIE_REPLAY_COUNTER, lambda g: g.pcie_replay_count),
    DcgmValue(mn.NVLINK_BANDWIDTH_TOTAL, lambda g: g.nvlink_bytes_total),
    DcgmValue(mn.CORRECTABLE_REMAPPED_ROWS, lambda g: g.remap_correctable_rows),
    DcgmValue(mn.UNCORRECTABLE_REMAPPED_ROWS, lambda g: g.remap_uncorrectable_rows),
    DcgmValue(mn.ROW_REMAP_FAILURE, lambda g: g.remap_failure),
    DcgmValue(mn.RETIRED_SBE, lambda g: g.retired_pages_sbe),
    DcgmValue(mn.RETIRED_DBE, lambda g: g.retired_pages_dbe),
    DcgmValue(mn.RETIRED_PENDING, lambda g: g.retired_pages_pending),
    DcgmValue(mn.PROF_GR_ENGINE_ACTIVE, lambda g: g.gr_engine_active_pct),
    DcgmValue(mn.PROF_SM_ACTIVE, lambda g: g.sm_active_pct),
    DcgmValue(mn.PROF_SM_OCCUPANCY, lambda g: g.sm_occupancy_pct),
    DcgmValue(mn.PROF_PIPE_TENSOR_ACTIVE, lambda g: g.tensor_active_pct),
    DcgmValue(mn.PROF_DRAM_ACTIVE, lambda g: g.dram_active_pct),
    DcgmValue(mn.PROF_PIPE_FP64_ACTIVE, lambda g: g.fp64_active_pct),
    DcgmValue(mn.PROF_PIPE_FP32_ACTIVE, lambda g: g.fp32_active_pct),
    DcgmValue(mn.PROF_PIPE_FP16_ACTIVE, lambda g: g.fp16_active_pct),
    DcgmValue(mn.PROF_PCIE_TX_BYTES, lambda g: g.gpm_pcie_tx_bps),
    DcgmValue(mn.PROF_PCIE_RX_BYTES, lambda g: g.gpm_pcie_rx_bps),
    DcgmValue(mn.PROF_NVLINK_TX_BYTES, lambda g: g.nvlink_tx_bps),
    DcgmValue(mn.PROF_NVLINK_RX_BYTES, lambda g: g.nvlink_rx_bps),
)


def _mig_fb_free(m: MigDevice) -> int | None:
    if m.mem_total_bytes is None or m.mem_used_bytes is None:
        return None
    return max(0, m.mem_total_bytes - m.mem_used_bytes)


# What dcgm-exporter serves per MIG GPU instance: framebuffer and the profiling ratios
# (the GPU-wide fields - power, temperature, clocks - stay on the GPU's own series).
MIG_VALUES: dict[str, Callable[[MigDevice], float | None]] = {
    mn.FB_USED.name: lambda m: m.mem_used_bytes,
    mn.FB_FREE.name: _mig_fb_free,
    mn.FB_TOTAL.name: lambda m: m.mem_total_bytes,
    mn.PROF_GR_ENGINE_ACTIVE.name: lambda m: m.gr_engine_active_pct,
    mn.PROF_SM_ACTIVE.name: lambda m: m.sm_active_pct,
    mn.PROF_SM_OCCUPANCY.name: lambda m: m.sm_occupancy_pct,
    mn.PROF_PIPE_TENSOR_ACTIVE.name: lambda m: m.tensor_active_pct,
    mn.PROF_DRAM_ACTIVE.name: lambda m: m.dram_active_pct,
    mn.PROF_PIPE_FP64_ACTIVE.name: lambda m: m.fp64_active_pct,
    mn.PROF_PIPE_FP32_ACTIVE.name: lambda m: m.fp32_active_pct,
    mn.PROF_PIPE_FP16_ACTIVE.name: lambda m: m.fp16_active_pct,
}


def mig_labels(g: GpuSample, m: MigDevice, hostname: str,
               driver_version: str | None = None,
               names: tuple[str, ...] = GPU_LABELS) -> dict[str, str]:
    """dcgm-exporter's labels on a MIG instance's series: its GPU's, plus GPU_I_PROFILE
    and GPU_I_ID (the GPU instance id)."""
    labels = dict(zip(names, gpu_labels(g, hostname, driver_version), strict=True))
    labels[mn.MIG_PROFILE_LABEL] = m.label
    labels[mn.MIG_INSTANCE_LABEL] = "" if m.gpu_instance_id is None else str(m.gpu_instance_id)
    return labels


def gpu_labels(g: GpuSample, hostname: str, driver_version: str | None = None) -> list[str]:
    amd = g.info.vendor == "amd"
    return [str(g.index), g.info.uuid, f"{g.info.vendor}{g.index}", g.info.name, hostname,
            g.info.pci_bus_id, "" if amd else driver_version or ""]


@dataclass
class _GpuCounters:
    labels: list[str]
    episodes: int = 0
    throttling: bool = False
    seconds: dict[str, float] | None = None
    nvidia: bool = True
    last_xid: int = 0  # DCGM's "value of the last XID error", 0 before any
    xids: dict[int, int] = field(default_factory=dict)  # XID number → events


class ThrottleAccounting:
    """Per-GPU throttle counters accumulated from ticks (a Sampler listener).

    Counters must never go down, so they live here for the exporter's lifetime
    rather than being derived from the tracker's bounded episode list. The rule for
    an episode matches ThrottleTracker: it starts on the first tick with a
    throttling reason and ends on the first tick without one, or when the GPU is lost.
    Each tick's elapsed time is charged to the reasons set on that tick. A stale GPU's
    tick (its reader did not answer) carries an old reading: it changes nothing.
    """

    def __init__(self, hostname: Callable[[Snapshot], str]) -> None:
        self._hostname = hostname
        self._lock = threading.Lock()
        self._gpus: dict[tuple[int, str], _GpuCounters] = {}
        self._last_mono: float | None = None

    def __call__(self, snap: Snapshot) -> None:
        host = self._hostname(snap)
        with self._lock:
            dt = 0.0 if self._last_mono is None else max(0.0, snap.mono - self._last_mono)
            self._last_mono = snap.mono
            for g in snap.gpus:
                key = (g.index, g.info.uuid)
                c = self._gpus.get(key)
                if c is None:
                    c = self._gpus[key] = _GpuCounters(
                        gpu_labels(g, host, snap.system.driver_version),
                        seconds=dict.fromkeys(vendor_reasons(g.info.vendor), 0.0),
                        nvidia=g.info.vendor == "nvidia")
                if g.stale:
                    continue
                throttling = not g.lost and is_throttling(g.throttle_mask)
                if throttling and not c.throttling:
                    c.episodes += 1
                c.throttling = throttling
                if throttling:
                    assert c.seconds is not None
                    for r in THROTTLING_REASONS:
                        if (g.throttle_mask or 0) & THROTTLE_MASK & r.bit and r.key in c.seconds:
                            c.seconds[r.key] += dt
            by_index = {g.index: (g.index, g.info.uuid) for g in snap.gpus}
            for e in snap.events:
                c = self._gpus.get(by_index.get(e.gpu_index, (-1, "")))
                if c is not None and e.kind == "xid" and e.xid is not None:
                    c.last_xid = e.xid
                    c.xids[e.xid] = c.xids.get(e.xid, 0) + 1

    def xid_rows(self) -> list[tuple[list[str], int, dict[int, int]]]:
        """NVIDIA GPUs' XIDs (an AMD GPU has none)."""
        with self._lock:
            return [(list(c.labels), c.last_xid, dict(c.xids)) for c in self._gpus.values()
                    if c.nvidia]

    def rows(self) -> list[tuple[list[str], int, dict[str, float]]]:
        with self._lock:
            return [(list(c.labels), c.episodes, dict(c.seconds or {}))
                    for c in self._gpus.values()]


class SnapshotCollector(Collector):
    """Formats whatever the sampler read last; never touches NVML itself."""

    def __init__(self, latest: Callable[[], Snapshot | None], accounting: ThrottleAccounting,
                 *, nvml_error: str | None, interval: float,
                 hostname: str | None = None,
                 hostname_label: str = mn.HOSTNAME_LABEL) -> None:
        self._latest = latest
        self._host_label = hostname_label
        self._labels = list(mn.gpu_label_names(hostname_label))
        self._accounting = accounting
        self._nvml_error = nvml_error
        self._interval = interval
        self._hostname = hostname

    def hostname(self, snap: Snapshot) -> str:
        return self._hostname or snap.host.hostname

    def collect(self) -> Iterator[Metric]:
        snap = self._latest()
        up = GaugeMetricFamily(
            mn.UP, "1 while GPU telemetry is flowing (NVML initialised and the sampler "
            "ticking); 0 otherwise, see gputui_nvml_error_info.")
        fresh = snap is not None and time.monotonic() - snap.mono < 3 * self._interval + 2.0
        up.add_metric([], 1.0 if fresh and self._nvml_error is None else 0.0)
        yield up
        if self._nvml_error is not None:
            err = GaugeMetricFamily(mn.NVML_ERROR_INFO,
                                    "Why NVML is unavailable (GPU metrics are absent).",
                                    labels=["reason"])
            err.add_metric([self._nvml_error], 1.0)
            yield err
        if snap is None:
            return
        host = self.hostname(snap)
        yield from self._host_metrics(snap, host)
        # A sampler that stopped ticking (a hung driver) serves no GPU value as current.
        yield from self._gpu_metrics(snap, host, fresh)
        yield from self._throttle_metrics()
        if fresh:
            yield from job_metrics(snap)
            yield from process_metrics(snap, host, self._host_label)

    def _host_metrics(self, snap: Snapshot, host: str) -> Iterator[Metric]:
        h = snap.host
        for name, doc, value in (
            (mn.HOST_CPU_PERCENT, "Host CPU utilisation (in %).", h.cpu_pct),
            (mn.HOST_MEMORY_USED_BYTES, "Host memory in use (total - available).",
             h.mem_used_bytes),
            (mn.HOST_MEMORY_TOTAL_BYTES, "Host memory total.", h.mem_total_bytes),
        ):
            if value is None:
                continue
            fam = GaugeMetricFamily(name, doc, labels=[self._host_label])
            fam.add_metric([host], float(value))
            yield fam

    def _gpu_metrics(self, snap: Snapshot, host: str, fresh: bool) -> Iterator[Metric]:
        lost = GaugeMetricFamily(mn.GPU_LOST, "1 when the GPU fell off the bus.",
                                 labels=self._labels)
        stale = GaugeMetricFamily(
            mn.GPU_STALE, "1 when the GPU's last reading is not current (its driver did not "
            "answer in time): its DCGM_* values are left out until it answers again.",
            labels=self._labels)
        current: list[GpuSample] = []
        driver = snap.system.driver_version
        for g in snap.gpus:
            labels = gpu_labels(g, host, driver)
            lost.add_metric(labels, 1.0 if g.lost else 0.0)
            is_stale = not g.lost and (g.stale or not fresh)
            stale.add_metric(labels, 1.0 if is_stale else 0.0)
            # A lost GPU has no readings (gputui_gpu_lost says why); a stale one has only
            # old ones (gputui_gpu_stale says so). AMD GPUs are served under AMD's names.
            if not g.lost and not is_stale:
                current.append(g)
        owners = gpu_owners(snap.processes)
        yield from amd_metrics(snap.gpus, {g.index for g in current}, host, self._host_label,
                               {i: pod_labels(o) for i, o in owners.items()})
        current = [g for g in current if g.info.vendor == "nvidia"]
        for spec in DCGM_VALUES:
            f = spec.field
            fam = Metric(f.name, f.help, f.type)
            for g in current:
                value = spec.value(g)
                if value is None:
                    continue  # not available on this device: absent, never 0
                labels = dict(zip(self._labels, gpu_labels(g, host, driver), strict=True))
                labels.update(pod_labels(owners.get(g.index)))
                fam.add_sample(f.name, labels, value)
            mig_get = MIG_VALUES.get(f.name)
            if mig_get is not None:
                for g in current:
                    for m in g.mig_devices:
                        v = mig_get(m)
                        if v is not None:
                            fam.add_sample(f.name,
                                           mig_labels(g, m, host, driver, tuple(self._labels)),
                                           float(f.unit.to_dcgm(v)))
            if fam.samples:
                yield fam
        pending = GaugeMetricFamily(
            mn.ROW_REMAP_PENDING, "1 when a memory row remap waits for the next GPU reset.",
            labels=self._labels)
        for g in current:
            if g.remap_pending is not None:
                pending.add_metric(gpu_labels(g, host, driver), 1.0 if g.remap_pending else 0.0)
        if pending.samples:
            yield pending
        yield lost
        yield stale

    def _throttle_metrics(self) -> Iterator[Metric]:
        rows = self._accounting.rows()
        episodes = CounterMetricFamily(
            mn.THROTTLE_EPISODES, "Throttle episodes started since the exporter started.",
            labels=self._labels)
        seconds = CounterMetricFamily(
            mn.THROTTLE_SECONDS, "Seconds spent throttled, per reason.",
            labels=[*self._labels, "reason"])
        for labels, n, per_reason in rows:
            episodes.add_metric(labels, float(n))
            for reason, s in per_reason.items():
                seconds.add_metric([*labels, reason], s)
        yield episodes
        yield seconds
        last = GaugeMetricFamily(mn.XID_ERRORS.name, mn.XID_ERRORS.help, labels=self._labels)
        events = CounterMetricFamily(mn.XID_EVENTS, "XID errors NVML reported, per XID number.",
                                     labels=[*self._labels, "xid"])
        for labels, xid, counts in self._accounting.xid_rows():
            last.add_metric(labels, float(xid))
            for n, count in sorted(counts.items()):
                events.add_metric([*labels, str(n)], float(count))
        yield last
        yield events


def pod_labels(owner: GpuOwner | None) -> dict[str, str]:
    """dcgm-exporter's pod, namespace and container labels of a GPU one pod has to
    itself (none otherwise, as dcgm-exporter leaves them off)."""
    if owner is None:
        return {}
    return {"pod": owner.pod, "namespace": owner.namespace,
            **({"container": owner.container} if owner.container else {})}


def process_metrics(snap: Snapshot, host: str,
                    host_label: str = mn.HOSTNAME_LABEL) -> Iterator[Metric]:
    """Each GPU process's power, energy and GPU memory: labelled with its GPU, pid and
    user, and its pod, namespace and container ("" where it runs in none). How its energy
    was shared out is not a label: it changes as processes come and go, and a counter's
    labels must not."""
    uuids = {g.index: g.info.uuid for g in snap.gpus}
    names = [*mn.PROCESS_LABELS, *mn.POD_LABELS, host_label]
    power = GaugeMetricFamily(
        mn.PROCESS_POWER_WATTS, "A GPU process's share of its GPU's power over the last "
        "tick (W; an estimate where it shares the GPU).", labels=names)
    energy = CounterMetricFamily(
        mn.PROCESS_ENERGY_JOULES, "A GPU process's share of its GPU's energy since gputui "
        "first saw it (J).", labels=names)
    memory = GaugeMetricFamily(mn.PROCESS_GPU_MEMORY_BYTES,
                               "GPU memory a process holds (bytes).", labels=names)
    for p in snap.processes:
        labels = [str(p.gpu_index), uuids.get(p.gpu_index, ""), str(p.pid), p.user or "",
                  p.pod or "", p.namespace or "", p.container or "", host]
        if p.power_w is not None:
            power.add_metric(labels, p.power_w)
        if p.energy_j is not None:
            energy.add_metric(labels, p.energy_j)
        if p.gpu_mem_bytes is not None:
            memory.add_metric(labels, float(p.gpu_mem_bytes))
    for fam in (power, energy, memory):
        if fam.samples:
            yield fam


def job_metrics(snap: Snapshot) -> Iterator[Metric]:
    """Each training job's rates (gputui.track), one series per GPU it runs on (gpu=""
    when none is known): a dashboard sums a job's series per GPU or picks one."""
    for name, doc, get in (
        (mn.JOB_SAMPLES_PER_SECOND, "A training job's samples per second over its last "
         "few seconds of steps (reported with gputui.track).", lambda j: j.samples_per_s),
        (mn.JOB_TOKENS_PER_SECOND, "A training job's tokens per second over its last few "
         "seconds of steps (reported with gputui.track).", lambda j: j.tokens_per_s),
    ):
        fam = GaugeMetricFamily(name, doc, labels=list(mn.JOB_LABELS))
        for j in snap.jobs:
            value = get(j)
            if value is None:
                continue  # the job reports no such figure: absent, never 0
            for gpu in j.gpus or (None,):
                fam.add_metric([str(j.pid), j.name, "" if gpu is None else str(gpu)],
                               float(value))
        if fam.samples:
            yield fam
    energy = CounterMetricFamily(
        mn.JOB_ENERGY_JOULES, "A training job's energy on each GPU it runs on since gputui "
        "first saw it (J; gputui.track jobs; an estimate where a GPU was shared).",
        labels=list(mn.JOB_LABELS))
    for j in snap.jobs:
        for gpu, joules in j.energy_by_gpu:
            energy.add_metric([str(j.pid), j.name, str(gpu)], joules)
    if energy.samples:
        yield energy
