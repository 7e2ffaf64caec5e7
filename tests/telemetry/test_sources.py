"""One list of GPUs from several vendors' sources (gputui.telemetry.source.Sources), read
by the sampler as one source."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

from gputui.telemetry.model import GpuEvent, GpuProcess, GpuSample, SystemInfo
from gputui.telemetry.sampler import Sampler
from gputui.telemetry.schema import snapshot_to_dict
from gputui.telemetry.source import Sources
from tests.factories import HandSource, device

T = datetime(2026, 11, 28, tzinfo=UTC)


class Nvidia(HandSource):
    def __init__(self) -> None:
        super().__init__((device(0), device(1)),
                         system=SystemInfo("580.65.06", "12.580.65.06", "13.0"))

    def processes(self, index: int) -> tuple[GpuProcess, ...]:
        return (GpuProcess(index, 1000 + index, 2**30),)

    def take_events(self) -> tuple[GpuEvent, ...]:
        return (GpuEvent(1, "xid", T, xid=79),)


class Amd(HandSource):
    def __init__(self) -> None:
        super().__init__((device(0, name="AMD Instinct MI300X", vendor="amd",
                                 uuid="AMD-0x1234", pci_bus_id="00000000:C1:00.0"),),
                         system=SystemInfo(amd_driver_version="6.12.0"))

    def sample(self, index: int) -> GpuSample:
        return replace(super().sample(index), util_gpu_pct=97)

    def processes(self, index: int) -> tuple[GpuProcess, ...]:
        return (GpuProcess(index, 2000, 3 * 2**30),)

    def take_events(self) -> tuple[GpuEvent, ...]:
        return (GpuEvent(0, "xid", T, xid=13),)


def test_devices_of_both_vendors_are_numbered_in_one_list() -> None:
    both = Sources([Nvidia(), Amd()])
    assert both.count == 3
    assert [(d.index, d.vendor) for d in both.devices] == [
        (0, "nvidia"), (1, "nvidia"), (2, "amd")]
    assert both.open_device(2).name == "AMD Instinct MI300X"
    sample, procs = both.read_device(2, slow=True, processes=True)
    assert (sample.index, sample.info.vendor, sample.util_gpu_pct) == (2, "amd", 97)
    assert procs == (GpuProcess(2, 2000, 3 * 2**30),)
    assert both.read_device(1, slow=False, processes=False)[1] is None
    # Events keep their GPU: the AMD one's local 0 is GPU 2.
    assert [(e.gpu_index, e.xid) for e in both.take_events()] == [(1, 79), (2, 13)]
    # NVIDIA's driver, NVML and CUDA beside amdgpu's version.
    assert both.system == SystemInfo("580.65.06", "12.580.65.06", "13.0", "6.12.0")


def test_the_sampler_reads_both_vendors_in_one_snapshot() -> None:
    nvidia, amd = Nvidia(), Amd()
    sampler = Sampler(interval=1.0, source=Sources([nvidia, amd]))
    try:
        snap = sampler.read()
    finally:
        sampler.close()
    assert [(g.index, g.info.vendor) for g in snap.gpus] == [
        (0, "nvidia"), (1, "nvidia"), (2, "amd")]
    assert sorted((p.gpu_index, p.pid) for p in snap.processes) == [
        (0, 1000), (1, 1001), (2, 2000)]
    doc = snapshot_to_dict(snap)
    assert [g["vendor"] for g in doc["gpus"]] == ["nvidia", "nvidia", "amd"]
    assert (doc["driver_version"], doc["amd_driver_version"]) == ("580.65.06", "6.12.0")
    assert nvidia.closed and amd.closed
