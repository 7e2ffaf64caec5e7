"""AmdSource over fake sysfs/procfs trees: what each card's files say, field by field."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from gputui.telemetry.amd import AmdSource
from gputui.telemetry.model import DeviceInfo, GpuSample
from gputui.telemetry.source import GpuSource, Sources, SourceUnavailable
from tests.telemetry.amd.fake_tree import V1_4, V1_6, FakeHost, GiB, mi250x, mi300x, rx7900xtx


def opened(host: FakeHost, **kw: object) -> AmdSource:
    src = AmdSource(host.sys, host.proc, **kw)  # type: ignore[arg-type]
    src.open()
    return src


def fields(sample: GpuSample, expected: dict[str, object]) -> dict[str, object]:
    return {k: getattr(sample, k) for k in expected}


# Every field of the table, as each card's files give them.
MI300X_SAMPLE: dict[str, object] = dict(
    util_gpu_pct=98, util_mem_pct=40, mem_used_bytes=150 * GiB, mem_total_bytes=192 * GiB,
    power_w=612.0, power_limit_w=750.0, temp_c=71, mem_temp_c=64, clock_sm_mhz=2093,
    clock_mem_mhz=1300, fan_pct=None, pcie_gen=5, pcie_width=16, energy_j=50000.0,
    ecc_uncorrected=2, lost=False, error=None)
MI250X_SAMPLE: dict[str, object] = dict(
    util_gpu_pct=64, util_mem_pct=21, mem_used_bytes=12 * GiB, mem_total_bytes=64 * GiB,
    power_w=389.0, power_limit_w=500.0, temp_c=58, mem_temp_c=52, clock_sm_mhz=1700,
    clock_mem_mhz=1600, fan_pct=None, pcie_gen=4, pcie_width=16, energy_j=10000.0,
    ecc_uncorrected=0, throttle_mask=0, lost=False, error=None)
RX7900XTX_SAMPLE: dict[str, object] = dict(
    util_gpu_pct=34, util_mem_pct=17, mem_used_bytes=3 * GiB, mem_total_bytes=24 * GiB,
    power_w=181.0, power_limit_w=339.0, temp_c=66, mem_temp_c=70, clock_sm_mhz=2400,
    clock_mem_mhz=1249, fan_pct=35, pcie_gen=4, pcie_width=16, energy_j=1000.0,
    ecc_uncorrected=None, throttle_mask=0, lost=False, error=None)


def test_mi300x_static_facts_and_every_field(tmp_path: Path) -> None:
    host = FakeHost(tmp_path)
    card = mi300x(host, 0)
    src = opened(host)
    assert src.devices == (DeviceInfo(
        index=0, name="AMD Instinct MI300X", uuid="AMD-a1b2c3d4e5f60718",
        pci_bus_id="00000000:C1:00.0", mem_total_bytes=192 * GiB,
        # junction sensor's thresholds: MI300X has no edge sensor
        temp_slowdown_c=110, temp_shutdown_c=115, clock_sm_max_mhz=2100,
        clock_mem_max_mhz=1300, pcie_gen_max=5, pcie_width_max=16, temp_mem_max_c=95,
        vendor="amd"),)
    sample, procs = src.read_device(0, slow=True, processes=False)
    assert fields(sample, MI300X_SAMPLE) == MI300X_SAMPLE
    assert procs is None
    # MI300 reports no throttle word: its residency counters need a second reading,
    # once the firmware has counted on.
    assert sample.throttle_mask is None
    assert src.read_device(0, slow=False, processes=False)[0].throttle_mask is None
    card.set_metrics(accumulation_counter=2000)
    assert src.read_device(0, slow=False, processes=False)[0].throttle_mask == 0


def test_mi250x_static_facts_and_every_field(tmp_path: Path) -> None:
    host = FakeHost(tmp_path)
    mi250x(host, 0)
    src = opened(host)
    assert src.devices == (DeviceInfo(
        index=0, name="AMD Instinct MI250X", uuid="AMD-38d1a2b3c4d5e6f7",
        pci_bus_id="00000000:29:00.0", mem_total_bytes=64 * GiB, temp_slowdown_c=110,
        temp_shutdown_c=115, clock_sm_max_mhz=1700, clock_mem_max_mhz=1600, pcie_gen_max=4,
        pcie_width_max=16, temp_mem_max_c=95, vendor="amd"),)
    sample, _ = src.read_device(0, slow=True, processes=False)
    assert fields(sample, MI250X_SAMPLE) == MI250X_SAMPLE


def test_rx7900xtx_static_facts_and_every_field(tmp_path: Path) -> None:
    host = FakeHost(tmp_path)
    rx7900xtx(host, 0)
    src = opened(host)
    # No product_name: the name comes from the device id and revision (0x744c rev c8);
    # no unique_id: the uuid is the PCI address's.
    assert src.devices == (DeviceInfo(
        index=0, name="AMD Radeon RX 7900 XTX", uuid="AMD-PCI-0000:03:00.0",
        pci_bus_id="00000000:03:00.0", mem_total_bytes=24 * GiB, temp_slowdown_c=110,
        temp_shutdown_c=115, clock_sm_max_mhz=2526, clock_mem_max_mhz=1249, pcie_gen_max=4,
        pcie_width_max=16, temp_mem_max_c=108, vendor="amd"),)
    sample, _ = src.read_device(0, slow=True, processes=False)
    assert fields(sample, RX7900XTX_SAMPLE) == RX7900XTX_SAMPLE


def test_three_cards_in_pci_order_connectors_and_render_nodes_skipped(tmp_path: Path) -> None:
    host = FakeHost(tmp_path)
    mi300x(host, 0, "0000:c1:00.0")  # card0, but last on the bus
    rx7900xtx(host, 1, "0000:03:00.0")  # adds card1-DP-1 and card1-HDMI-A-1
    mi250x(host, 2, "0000:29:00.0")
    src = opened(host)
    assert [d.pci_bus_id for d in src.devices] == [
        "00000000:03:00.0", "00000000:29:00.0", "00000000:C1:00.0"]
    assert [d.name for d in src.devices] == [
        "AMD Radeon RX 7900 XTX", "AMD Instinct MI250X", "AMD Instinct MI300X"]
    assert [d.index for d in src.devices] == [0, 1, 2]
    samples = [src.read_device(i, slow=True, processes=False)[0] for i in range(3)]
    assert fields(samples[0], RX7900XTX_SAMPLE) == RX7900XTX_SAMPLE
    assert fields(samples[1], MI250X_SAMPLE) == MI250X_SAMPLE
    assert fields(samples[2], MI300X_SAMPLE) == MI300X_SAMPLE
    assert [s.index for s in samples] == [0, 1, 2]


def test_a_card_under_two_names_is_one_gpu_and_other_vendors_are_skipped(
        tmp_path: Path) -> None:
    host = FakeHost(tmp_path)
    card = mi300x(host, 0)
    host.link("card7", card.dev / "drm" / "card0")  # the same device again
    host.card(1, "0000:65:00.0", vendor=0x10DE, device=0x2330)  # an NVIDIA GPU
    src = opened(host)
    assert [d.pci_bus_id for d in src.devices] == ["00000000:C1:00.0"]


def test_no_amd_gpu_is_source_unavailable_with_its_path(tmp_path: Path) -> None:
    host = FakeHost(tmp_path)
    host.card(0, "0000:65:00.0", vendor=0x10DE, device=0x2330)
    src = AmdSource(host.sys, host.proc)
    with pytest.raises(SourceUnavailable, match=f"no AMD GPU under {host.sys}/class/drm"):
        src.open_system()
    with pytest.raises(SourceUnavailable):
        AmdSource(tmp_path / "nothing", tmp_path / "nothing").open_system()


def test_driver_version_is_the_modules_else_the_kernels(tmp_path: Path) -> None:
    host = FakeHost(tmp_path, kernel="6.8.0-45-generic")
    mi300x(host, 0)
    assert opened(host).system.amd_driver_version == "6.8.0-45-generic"
    version = host.sys / "module" / "amdgpu" / "version"
    version.parent.mkdir(parents=True)
    version.write_text("6.10.5\n")  # ROCm's DKMS build of amdgpu says its own
    system = opened(host).system
    assert system.amd_driver_version == "6.10.5"
    assert system.driver_version is None and system.cuda_driver_version is None


def test_name_table_and_its_fallback(tmp_path: Path) -> None:
    host = FakeHost(tmp_path)
    mi300x(host, 0).remove_file("product_name")
    host.card(1, "0000:c2:00.0", device=0x74A5)  # MI325X, no product_name
    host.card(2, "0000:c3:00.0", device=0x740F, revision=2)  # MI210
    host.card(3, "0000:c4:00.0", device=0x1234)  # not in the table
    host.card(4, "0000:c5:00.0", device=0x744C, revision=0xCC)  # the XT on the same id
    assert [d.name for d in opened(host).devices] == [
        "AMD Instinct MI300X", "AMD Instinct MI325X", "AMD Instinct MI210",
        "AMD GPU 0x1234", "AMD Radeon RX 7900 XT"]


@pytest.mark.parametrize("layout", [V1_4, V1_6], ids=["v1.4", "v1.6"])
def test_mi300x_on_older_kernels_layouts(tmp_path: Path, layout: object) -> None:
    host = FakeHost(tmp_path)
    card = mi300x(host, 0, layout=layout)  # type: ignore[arg-type]
    for name in ("gpu_busy_percent", "mem_busy_percent"):
        card.remove_file(name)  # gpu_metrics' activity stands in
    card.hwmon_write("power1_input", "")  # nor power: gpu_metrics' socket power
    src = opened(host)
    s, _ = src.read_device(0, slow=True, processes=False)
    assert (s.util_gpu_pct, s.util_mem_pct, s.power_w, s.energy_j) == (97, 41, 612.0, 50000.0)
    assert src.gpu_metrics_note(0) is None


def test_clock_and_temperature_fall_back_to_hwmon_and_gpu_metrics(tmp_path: Path) -> None:
    host = FakeHost(tmp_path)
    card = mi300x(host, 0)
    card.remove_file("pp_dpm_sclk")  # hwmon's freq1_input then
    card.write("pp_dpm_mclk", "garbage")
    card.hwmon_write("freq2_input", "")  # and gpu_metrics' current_uclk last
    (card.hwmon / "temp3_input").unlink()
    src = opened(host)
    s, _ = src.read_device(0, slow=False, processes=False)
    assert (s.clock_sm_mhz, s.clock_mem_mhz, s.mem_temp_c) == (2093, 1300, 64)
    # The highest XCD clock of gpu_metrics stands in when hwmon has none either.
    card.hwmon_write("freq1_input", "")
    assert src.read_device(0, slow=False, processes=False)[0].clock_sm_mhz == 2095


def test_slow_fields_are_read_on_slow_ticks_only(tmp_path: Path) -> None:
    host = FakeHost(tmp_path)
    card = mi250x(host, 0)
    src = opened(host)
    assert src.read_device(0, slow=True, processes=False)[0].power_limit_w == 500.0
    card.hwmon_write("power1_cap", 300_000_000)
    card.write("current_link_speed", "2.5 GT/s PCIe")
    s = src.read_device(0, slow=False, processes=False)[0]
    assert (s.power_limit_w, s.pcie_gen) == (500.0, 4)  # kept from the last slow tick
    s = src.read_device(0, slow=True, processes=False)[0]
    assert (s.power_limit_w, s.pcie_gen) == (300.0, 1)


def test_link_speed_as_older_kernels_wrote_it(tmp_path: Path) -> None:
    host = FakeHost(tmp_path)
    card = mi250x(host, 0)
    card.write("current_link_speed", "16 GT/s")  # Linux < 5.7
    card.write("max_link_speed", "Unknown")
    src = opened(host)
    assert src.devices[0].pcie_gen_max is None
    assert src.read_device(0, slow=True, processes=False)[0].pcie_gen == 4


def test_it_is_a_gpu_source_and_joins_sources(tmp_path: Path) -> None:
    host = FakeHost(tmp_path)
    mi250x(host, 0)
    src: GpuSource = opened(host, process_every=3, slow_every=7)
    assert (src.process_every, src.slow_every, src.count) == (3, 7, 1)
    assert src.take_events() == ()
    src.want_detail_fields(True)
    both = Sources([src, src])  # two sources' GPUs in one list, renumbered
    s, _ = both.read_device(1, slow=True, processes=False)
    assert s.index == 1 and s.info.vendor == "amd"
    src.close()


def test_a_device_read_before_it_opens_says_so(tmp_path: Path) -> None:
    host = FakeHost(tmp_path)
    mi300x(host, 0)
    src = AmdSource(host.sys, host.proc)
    src.open_system()
    s, procs = src.read_device(0, slow=True, processes=True)
    assert s.error == "not opened yet" and procs == ()
    assert src.devices[0].pci_bus_id == "00000000:C1:00.0"


def test_no_file_is_kept_open_between_ticks(tmp_path: Path) -> None:
    host = FakeHost(tmp_path)
    mi300x(host, 0)
    rx7900xtx(host, 1)
    host.drm_client(4242, fd=5, pdev="0000:c1:00.0", client_id=7, vram="1 MiB", gfx_ns=0)
    src = opened(host)
    before = len(os.listdir("/proc/self/fd"))
    for _ in range(20):
        for i in range(2):
            src.read_device(i, slow=True, processes=True)
    assert len(os.listdir("/proc/self/fd")) == before
