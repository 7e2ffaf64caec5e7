"""`gputui export`'s AMD GPUs, under the names of AMD's Device Metrics Exporter.

Its Grafana dashboards select on these names and its labels (`gpu_id`, `serial_number`,
`card_model`, `hostname`); gputui adds its own `gpu` (the index every gputui view shows)
and `pci_bus_id`. NVIDIA GPUs keep dcgm-exporter's names (`exporter.DCGM_VALUES`); gputui's
own series (lost, stale, throttle time) cover both vendors. As there, a value a GPU does
not have is absent, never 0, and a GPU whose reading is not current serves none.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass

from prometheus_client.core import GaugeMetricFamily, Metric

from gputui.fleet import metric_names as mn
from gputui.telemetry.model import GpuSample


def _free(g: GpuSample) -> int | None:
    total = g.mem_total_bytes if g.mem_total_bytes is not None else g.info.mem_total_bytes
    return None if total is None or g.mem_used_bytes is None else max(0, total - g.mem_used_bytes)


@dataclass(frozen=True, slots=True)
class AmdValue:
    field: mn.DcgmField
    get: Callable[[GpuSample], float | None]


AMD_VALUES: tuple[AmdValue, ...] = (
    AmdValue(mn.AMD_GFX_ACTIVITY, lambda g: g.util_gpu_pct),
    AmdValue(mn.AMD_UMC_ACTIVITY, lambda g: g.util_mem_pct),
    AmdValue(mn.AMD_USED_VRAM, lambda g: g.mem_used_bytes),
    AmdValue(mn.AMD_TOTAL_VRAM,
             lambda g: g.mem_total_bytes if g.mem_total_bytes is not None
             else g.info.mem_total_bytes),
    AmdValue(mn.AMD_FREE_VRAM, _free),
    # One power reading (hwmon's average, else its input): the socket's, as both names mean.
    AmdValue(mn.AMD_PACKAGE_POWER, lambda g: g.power_w),
    AmdValue(mn.AMD_POWER_USAGE, lambda g: g.power_w),
    AmdValue(mn.AMD_ENERGY, lambda g: g.energy_j),
    AmdValue(mn.AMD_JUNCTION_TEMP, lambda g: g.temp_junction_c),
    AmdValue(mn.AMD_EDGE_TEMP, lambda g: g.temp_edge_c),
    AmdValue(mn.AMD_MEMORY_TEMP, lambda g: g.mem_temp_c),
    AmdValue(mn.AMD_ECC_UNCORRECT, lambda g: g.ecc_uncorrected),
)


def amd_labels(g: GpuSample, amd_index: int, host: str) -> list[str]:
    serial = g.info.uuid.removeprefix("AMD-")
    serial = "" if serial.startswith("PCI-") else serial  # no unique_id: no serial
    return [str(amd_index), serial, g.info.name, host, str(g.index), g.info.uuid,
            g.info.pci_bus_id]


def amd_metrics(gpus: Sequence[GpuSample], current: set[int], host: str,
                hostname_label: str = mn.HOSTNAME_LABEL,
                pods: Mapping[int, Mapping[str, str]] | None = None) -> Iterator[Metric]:
    """The AMD families for the AMD GPUs among `gpus`; values only for those whose index
    is in `current` (not lost, not stale). `pods`: by GPU index, the `pod`, `namespace`
    and `container` labels of a GPU one pod has to itself (AMD's exporter labels its
    series with them too, under Kubernetes)."""
    amd = [g for g in gpus if g.info.vendor == "amd"]
    if not amd:
        return
    names = [hostname_label if n == mn.HOSTNAME_LABEL else n for n in mn.AMD_LABELS]
    rows = [(g, {**dict(zip(names, amd_labels(g, i, host), strict=True)),
                 **(pods or {}).get(g.index, {})})
            for i, g in enumerate(amd) if g.index in current]
    nodes = GaugeMetricFamily(mn.AMD_NODES_TOTAL, "Number of GPU nodes on the machine.",
                              labels=[hostname_label])
    nodes.add_metric([host], float(len(amd)))
    yield nodes
    for spec in AMD_VALUES:
        fam = Metric(spec.field.name, spec.field.help, "gauge")
        for g, labels in rows:
            v = spec.get(g)
            if v is not None:
                fam.add_sample(spec.field.name, labels, float(spec.field.unit.to_dcgm(v)))
        if fam.samples:
            yield fam
    clock = Metric(mn.AMD_CLOCK, "Clock measure of the GPU in Mhz.", "gauge")
    for g, labels in rows:
        for clock_type, attr in mn.AMD_CLOCK_TYPES:
            v = getattr(g, attr)
            if v is not None:
                clock.add_sample(mn.AMD_CLOCK, {**labels, "clock_type": clock_type}, float(v))
    if clock.samples:
        yield clock
    mask = Metric(mn.AMD_THROTTLE_MASK, "Current throttle reasons (bitmask of gputui's "
                  "reasons; gputui_throttle_seconds_total names them).", "gauge")
    for g, labels in rows:
        if g.throttle_mask is not None:
            mask.add_sample(mn.AMD_THROTTLE_MASK, labels, float(g.throttle_mask))
    if mask.samples:
        yield mask
    for name, doc, gen in (
        (mn.AMD_PCIE_SPEED, "Current pcie speed capable in GT/s.", lambda g: g.pcie_gen),
        (mn.AMD_PCIE_MAX_SPEED, "Maximum capable pcie speed in GT/s.",
         lambda g: g.info.pcie_gen_max),
    ):
        fam = Metric(name, doc, "gauge")
        for g, labels in rows:
            speed = mn.PCIE_GT_PER_S.get(gen(g) or 0)
            if speed is not None:
                fam.add_sample(name, labels, speed)
        if fam.samples:
            yield fam
