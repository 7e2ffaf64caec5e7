"""Series from a metrics page or from Prometheus → one host's typed reading.

The one place where the fleet turns DCGM's units back into gputui's (through
`metric_names`), whichever exporter wrote them.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field

from gputui.fleet import metric_names as mn
from gputui.fleet.model import FleetGpu, FleetJob, HostReading
from gputui.fleet.page import Series

# What the fleet reads; everything else on a page is skipped unparsed.
GPU_FIELDS = (mn.GPU_UTIL, mn.FB_USED, mn.FB_FREE, mn.FB_TOTAL, mn.FB_RESERVED, mn.POWER_USAGE,
              mn.GPU_TEMP, mn.SLOWDOWN_TEMP, mn.SM_CLOCK, mn.CLOCK_THROTTLE_REASONS,
              mn.CLOCKS_EVENT_REASONS, mn.PROF_SM_ACTIVE, mn.PROF_PIPE_TENSOR_ACTIVE)
# AMD GPUs: gputui's and AMD's Device Metrics Exporter's names for the same readings.
AMD_FIELDS = (mn.AMD_GFX_ACTIVITY, mn.AMD_USED_VRAM, mn.AMD_TOTAL_VRAM, mn.AMD_PACKAGE_POWER,
              mn.AMD_POWER_USAGE, mn.AMD_JUNCTION_TEMP, mn.AMD_EDGE_TEMP)
GPU_SERIES = (*(f.name for f in GPU_FIELDS), *(f.name for f in AMD_FIELDS), mn.AMD_CLOCK,
              mn.AMD_THROTTLE_MASK, mn.GPU_LOST, mn.GPU_STALE)
HOST_SERIES = (mn.UP, mn.NVML_ERROR_INFO, mn.HOST_CPU_PERCENT, mn.HOST_MEMORY_USED_BYTES,
               mn.HOST_MEMORY_TOTAL_BYTES)
JOB_SERIES = (mn.JOB_SAMPLES_PER_SECOND, mn.JOB_TOKENS_PER_SECOND)
WANTED = frozenset(GPU_SERIES + HOST_SERIES + JOB_SERIES)
_MIG_SUMS = frozenset({mn.FB_USED.name, mn.FB_FREE.name, mn.FB_TOTAL.name})


# AMD's clocks are one family; its gfx clock is the sample with clock_type="system".
_SYSTEM_CLOCK = f"{mn.AMD_CLOCK}:system"


def num(v: float | None) -> float | None:
    """A usable reading, or None: NaN ("no value" in Prometheus) and ±Inf are not readings."""
    return None if v is None or not math.isfinite(v) else v


def _field(values: dict[str, float], f: mn.DcgmField) -> float | None:
    v = num(values.get(f.name))
    return None if v is None else f.unit.from_dcgm(v)


def _first(values: dict[str, float], *fields: mn.DcgmField) -> float | None:
    """The first of `fields` the page has (an NVIDIA GPU's DCGM name, an AMD GPU's)."""
    return next((v for f in fields if (v := _field(values, f)) is not None), None)


# NVML's clocks-event reasons use bits 0x1..0x100 today, plus 0x8000000000000000 for
# "unknown"; 32 low bits leave room for reasons a newer driver adds.
_MASK_ROOM = 0xFFFF_FFFF | 0x8000_0000_0000_0000


def throttle_mask(v: float | None) -> int | None:
    """A throttle bitmask, or None when the value cannot be one (negative, fractional,
    infinite, NaN, or bits no NVML reason could set): decoding it would invent reasons."""
    v = num(v)
    if v is None or v < 0 or v != int(v):
        return None
    m = int(v)
    return m if m & ~_MASK_ROOM == 0 else None


@dataclass(slots=True)
class _GpuSeries:
    """The series of one GPU while a page is read (first series wins; a MIG instance's
    series are kept apart, see `add_mig`)."""

    model: str
    values: dict[str, float] = field(default_factory=dict)
    mig_sums: dict[str, float] = field(default_factory=dict)

    def add(self, name: str, value: float) -> None:
        self.values.setdefault(name, value)

    def add_mig(self, name: str, value: float) -> None:
        """A MIG instance's series (GPU_I_ID label): its framebuffer adds up to the GPU's
        where the page has no GPU-wide figure; its other series are the instance's only."""
        if name in _MIG_SUMS:
            self.mig_sums[name] = self.mig_sums.get(name, 0.0) + value

    def reading(self, gpu: str, uuid: str) -> FleetGpu:
        v = {**self.mig_sums, **self.values}
        used = _first(v, mn.FB_USED, mn.AMD_USED_VRAM)
        free = _field(v, mn.FB_FREE)
        total = _first(v, mn.FB_TOTAL, mn.AMD_TOTAL_VRAM)
        if total is None and used is not None and free is not None:
            total = used + free + (_field(v, mn.FB_RESERVED) or 0)
        mask = v.get(mn.CLOCK_THROTTLE_REASONS.name, v.get(
            mn.CLOCKS_EVENT_REASONS.name, v.get(mn.AMD_THROTTLE_MASK)))
        clock = _field(v, mn.SM_CLOCK)
        return FleetGpu(
            gpu=gpu, uuid=uuid, model=self.model,
            util_pct=_first(v, mn.GPU_UTIL, mn.AMD_GFX_ACTIVITY),
            sm_active_pct=_field(v, mn.PROF_SM_ACTIVE),
            tensor_active_pct=_field(v, mn.PROF_PIPE_TENSOR_ACTIVE),
            mem_used_bytes=None if used is None else int(used),
            mem_total_bytes=None if total is None else int(total),
            power_w=_first(v, mn.POWER_USAGE, mn.AMD_PACKAGE_POWER, mn.AMD_POWER_USAGE),
            temp_c=_first(v, mn.GPU_TEMP, mn.AMD_JUNCTION_TEMP, mn.AMD_EDGE_TEMP),
            slowdown_temp_c=_field(v, mn.SLOWDOWN_TEMP),
            clock_sm_mhz=clock if clock is not None else num(v.get(_SYSTEM_CLOCK)),
            throttle_mask=throttle_mask(mask),
            lost=bool(num(v.get(mn.GPU_LOST))),
            stale=bool(num(v.get(mn.GPU_STALE))),
        )


@dataclass(slots=True)
class _JobSeries:
    name: str
    gpus: list[str] = field(default_factory=list)
    rates: dict[str, float] = field(default_factory=dict)

    def add(self, s: Series) -> None:
        gpu = s.labels.get("gpu", "")
        if gpu not in self.gpus:
            self.gpus.append(gpu)
        self.rates.setdefault(s.name, s.value)

    def job(self, pid: int) -> FleetJob:
        return FleetJob(pid=pid, name=self.name, gpus=tuple(self.gpus),
                        samples_per_s=num(self.rates.get(mn.JOB_SAMPLES_PER_SECOND)),
                        tokens_per_s=num(self.rates.get(mn.JOB_TOKENS_PER_SECOND)))


def _job_name(labels: dict[str, str]) -> str:
    # Prometheus keeps its own `job` (the scrape job) and renames the exporter's to
    # `exported_job`, unless the scrape config honours the exporter's labels.
    return labels.get("exported_job") or labels.get("job", "")


def reading_from_series(series: Iterable[Series]) -> HostReading:
    """Build one host's reading from its series, whichever the source."""
    per_gpu: dict[tuple[str, str], _GpuSeries] = {}
    jobs: dict[int, _JobSeries] = {}
    host: dict[str, float] = {}
    nvml_error: str | None = None
    hostname: str | None = None
    exporter: str | None = None
    for s in series:
        if s.name.startswith("gputui_"):
            exporter = "gputui"
        elif exporter is None:
            exporter = "dcgm-exporter" if s.name.startswith("DCGM_") else "amd-metrics-exporter"
        hostname = hostname or s.labels.get(mn.HOSTNAME_LABEL) or s.labels.get(
            mn.LEGACY_HOSTNAME_LABEL)
        if s.name == mn.NVML_ERROR_INFO:
            nvml_error = s.labels.get("reason") or "NVML unavailable"
        elif s.name in JOB_SERIES:
            try:
                pid = int(s.labels.get("pid", ""))
            except ValueError:
                continue
            jobs.setdefault(pid, _JobSeries(_job_name(s.labels))).add(s)
        elif s.name in HOST_SERIES:
            host[s.name] = s.value
        else:
            # gputui labels every GPU series with gpu and UUID; AMD's own exporter names
            # its GPUs by gpu_id and serial_number, and their model card_model.
            labels = s.labels
            key = (labels.get("gpu", labels.get("gpu_id", "")),
                   labels.get("UUID", labels.get("serial_number", "")))
            g = per_gpu.get(key)
            if g is None:
                g = per_gpu[key] = _GpuSeries(labels.get("modelName", labels.get(
                    "card_model", "")))
            name = s.name
            if name == mn.AMD_CLOCK:
                name = f"{name}:{labels.get('clock_type', '')}"
            if mn.MIG_INSTANCE_LABEL in labels:
                g.add_mig(name, s.value)
            else:
                g.add(name, s.value)
    gpus = sorted((g.reading(gpu, uuid) for (gpu, uuid), g in per_gpu.items()),
                  key=lambda x: x.sort_key)
    mem_used = num(host.get(mn.HOST_MEMORY_USED_BYTES))
    mem_total = num(host.get(mn.HOST_MEMORY_TOTAL_BYTES))
    return HostReading(
        gpus=tuple(gpus), jobs=tuple(j.job(pid) for pid, j in sorted(jobs.items())),
        hostname=hostname, exporter=exporter, nvml_error=nvml_error,
        cpu_pct=num(host.get(mn.HOST_CPU_PERCENT)),
        mem_used_bytes=None if mem_used is None else int(mem_used),
        mem_total_bytes=None if mem_total is None else int(mem_total),
    )
