"""The GPU detail screen (`i`): everything NVML gave for one GPU that its panel has no room
for, updated in place each frame, at 80×24 and 120×40, with a sampler fed by hand."""

from __future__ import annotations

from dataclasses import replace

import pytest

from gputui.telemetry.mig import MigDevice, MigProcess
from gputui.telemetry.model import GpuSample, NvLink, Snapshot
from gputui.ui.app import GputuiApp
from gputui.ui.screens.gpu_detail import GpuDetailScreen
from gputui.ui.widgets.gpu_facts import FactsBox
from gputui.ui.widgets.mig_view import MigTable
from tests.ui.conftest import MonitorFactory
from tests.ui.helpers import GIB, device, gpu, make_app, proc, screen_text, snap


def rich_gpu(t: float = 0.0, **kw: object) -> GpuSample:
    """GPU 0 with every detail NVML can give."""
    info = replace(device(0, "NVIDIA H100 80GB HBM3"), pcie_gen_max=5, pcie_width_max=16,
                   temp_mem_max_c=95, clock_sm_max_mhz=1980)
    base: dict[str, object] = dict(
        info=info, clock_sm_mhz=1410, power_w=350.0, power_limit_w=700.0, temp_c=71,
        mem_temp_c=84, pcie_gen=4, pcie_width=8, pcie_rx_bps=2 * GIB, pcie_tx_bps=512 * 2**20,
        pcie_replay_count=3, ecc_uncorrected=2, remap_correctable_rows=5,
        remap_uncorrectable_rows=1, remap_pending=True, remap_failure=False,
        retired_pages_sbe=None, retired_pages_dbe=None, retired_pages_pending=None,
        nvlink_links=(NvLink(0, True, 3 * GIB, GIB), NvLink(1, False, None, None)),
        nvlink_tx_bps=3 * GIB, nvlink_rx_bps=GIB, sm_active_pct=22.4, sm_occupancy_pct=11.0,
        tensor_active_pct=0.0, dram_active_pct=64.0, fp64_active_pct=None,
        fp32_active_pct=18.0, fp16_active_pct=0.0, throttle_mask=0x4, power_w_min=300.0,
        power_w_max=690.0, energy_j=12_345.0, util_mem_pct=30)
    base.update(kw)
    return gpu(0, t, **base)


def frame(t: float = 0.0, **kw: object) -> Snapshot:
    return snap(t, [rich_gpu(t, **kw), gpu(1, t)], [proc(4242, 0, 30)])


def rows(app: GputuiApp, key: str) -> dict[str, str]:
    """One box's rows as shown (label → value)."""
    box = app.screen.query_one(f"#facts-{key}", FactsBox)
    return dict(box.section.rows)


async def open_detail(pilot: object, app: GputuiApp) -> GpuDetailScreen:
    await pilot.press("i")  # type: ignore[attr-defined]
    await pilot.pause()  # type: ignore[attr-defined]
    assert isinstance(app.screen, GpuDetailScreen)
    return app.screen


async def test_every_detail_is_shown_exactly_at_120x40() -> None:
    app, sampler = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        sampler.ingest(frame())
        await pilot.pause()
        await open_detail(pilot, app)
        text = screen_text(app)
        assert "GPU 0 · NVIDIA H100 80GB HBM3" in text
        for line in ("UUID               GPU-00000000-0000-0000-0000-000000000000",
                     "PCI bus id         00000000:3B:00.0",
                     "driver             550.54.15",
                     "state              current",
                     "SM clock           1410MHz of max 1980MHz (71%)",
                     "memory clock       1593MHz of max 1593MHz",
                     "clock events       SW power cap",
                     "power              350W of enforced limit 700W (50%)",
                     "power in tick      300W – 690W",
                     "energy             12.3kJ",
                     "GPU                71°C (slowdown 85°C, shutdown 92°C)",
                     "memory (HBM)       84°C of limit 95°C",
                     "link now           Gen 4 x8",
                     "link max           Gen 5 x16",
                     "RX / TX            2.0GiB/s / 512MiB/s",
                     "replays            3",
                     "links              2, 1 up",
                     "link 0             up, TX 3.0GiB/s RX 1.0GiB/s",
                     "link 1             down"):
            assert line in text, line
        # Further down (the screen scrolls): asserted on the boxes' rows.
        assert rows(app, "health") == {
            "ECC uncorrected": "2", "remapped rows": "5 correctable, 1 uncorrectable",
            "remap pending": "yes", "remap failure": "no", "retired pages": "N/A",
            "retire pending": "N/A"}
        assert rows(app, "gpm") == {
            "SM active": "22%", "SM occupancy": "11%", "tensor active": "0%",
            "DRAM active": "64%", "FP64 / FP32 / FP16": "N/A / 18% / 0%",
            "graphics engine": "N/A", "PCIe TX / RX": "N/A / N/A",
            "NVLink TX / RX": "3.0GiB/s / 1.0GiB/s"}
        await pilot.press("end")
        await pilot.pause()
        text = screen_text(app)
        assert "remapped rows      5 correctable, 1 uncorrectable" in text
        assert "FP64 / FP32 / FP16 N/A / 18% / 0%" in text
        assert not app.screen.query_one(MigTable).display  # no MIG: no MIG box
        await pilot.press("escape")
        assert not isinstance(app.screen, GpuDetailScreen)


async def test_80x24_scrolls_to_every_box_and_updates_in_place() -> None:
    app, sampler = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        sampler.ingest(frame())
        await pilot.pause()
        screen = await open_detail(pilot, app)
        text = screen_text(app)
        assert "SM clock           1410MHz of max 1980MHz (71%)" in text
        assert "SM active" not in text  # GPM is further down
        assert "UUID               GPU-00000000-0000-0000-0000-000000000000" in text
        boxes = list(screen.query(FactsBox))
        assert [b.border_title for b in boxes] == [
            "Identity", "Clocks and power", "Temperatures and use", "PCIe", "NVLink",
            "Memory errors", "Profiling (GPM)"]
        assert all(b.region.right <= 80 for b in boxes)  # one column, nothing cut
        # A new frame: the same widgets show the new values (no remount).
        sampler.ingest(frame(3.0, clock_sm_mhz=945, mem_temp_c=93, throttle_mask=0x40))
        await pilot.pause()
        assert list(screen.query(FactsBox)) == boxes
        assert rows(app, "clocks")["SM clock"] == "945MHz of max 1980MHz (48%)"
        assert rows(app, "clocks")["clock events"] == "HW thermal slowdown"
        assert rows(app, "temps")["memory (HBM)"] == "93°C of limit 95°C"
        assert "945MHz of max 1980MHz (48%)" in screen_text(app)
        await pilot.press("end")
        await pilot.pause()
        assert "SM active          22%" in screen_text(app)


async def test_missing_values_are_na_and_n_p_move_between_gpus() -> None:
    app, sampler = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        sampler.ingest(frame())
        await pilot.pause()
        screen = await open_detail(pilot, app)
        await pilot.press("n")
        await pilot.pause()
        assert screen.gpu_index == 1
        assert "GPU 1 · NVIDIA A100-SXM4-80GB" in screen_text(app)
        # The helper's GPU 1 has no memory sensor, no NVLink, no GPM, no PCIe reads.
        assert rows(app, "temps")["memory (HBM)"] == "N/A"
        assert rows(app, "nvlink") == {"links": "N/A"}
        assert rows(app, "pcie")["link now"] == "N/A"
        assert set(rows(app, "gpm").values()) == {"N/A", "N/A / N/A", "N/A / N/A / N/A"}
        assert rows(app, "health")["remap pending"] == "N/A"
        await pilot.press("p")
        await pilot.pause()
        assert screen.gpu_index == 0 and rows(app, "pcie")["link now"] == "Gen 4 x8"


@pytest.mark.parametrize("size", [(80, 24), (120, 40)])
async def test_a_stale_gpu_is_marked(size: tuple[int, int]) -> None:
    app, sampler = make_app()
    async with app.run_test(size=size) as pilot:
        sampler.ingest(frame())
        await pilot.pause()
        await open_detail(pilot, app)
        sampler.ingest(frame(1.0, stale=True, stale_s=7.0))
        await pilot.pause()
        text = screen_text(app)
        assert "⚠ STALE: values 7 s old" in text.splitlines()[0]
        assert "state              STALE: not answering; the values below are 7 s old" in text
        sampler.ingest(frame(2.0))
        await pilot.pause()
        assert "STALE" not in screen_text(app)
        assert rows(app, "identity")["state"] == "current"


async def test_hostile_driver_text_is_escaped() -> None:
    app, sampler = make_app()
    evil = "[bold red]GPU\x1b[2J\x07"
    sample = replace(rich_gpu(), info=replace(rich_gpu().info, name=evil, uuid="GPU-\x1b]0;x\x07"),
                     gpm_note="[link=http://x]held[/link] by \x1b[31mdcgm")
    async with app.run_test(size=(120, 40)) as pilot:
        sampler.ingest(snap(0, [sample]))
        await pilot.pause()
        await open_detail(pilot, app)
        text = screen_text(app)
        assert "\x1b" not in text and "\x07" not in text
        assert "GPU 0 · [bold red]GPU\\x1b[2J\\x07" in text  # literal, markup not applied
        assert rows(app, "identity")["UUID"] == "GPU-\\x1b]0;x\\x07"
        assert rows(app, "gpm")["note"] == "[link=http://x]held[/link] by \\x1b[31mdcgm"


async def test_mig_devices_are_listed_under_their_gpu() -> None:
    app, sampler = make_app()
    migs = (MigDevice(index=0, uuid="MIG-a", name="NVIDIA H100 80GB HBM3 MIG 1g.10gb",
                      profile="1g.10gb", gpu_instance_id=9, compute_instance_id=0,
                      sm_count=16, mem_used_bytes=2 * GIB, mem_total_bytes=10 * GIB,
                      processes=(MigProcess(4242, GIB),), sm_active_pct=40.0),)
    async with app.run_test(size=(120, 40)) as pilot:
        sampler.ingest(snap(0, [rich_gpu(mig_devices=migs)]))
        await pilot.pause()
        screen = await open_detail(pilot, app)
        table = screen.query_one(MigTable)
        assert table.display
        assert table.lines[1].split() == ["0", "1g.10gb", "9/0", "2.0/10.0", "16", "40%",
                                          "N/A", "4242"]
        await pilot.press("end")
        await pilot.pause()
        assert "MIG on · 1 instance" in screen_text(app)


async def test_the_monitor_profile_feeds_the_detail(fake_monitor: MonitorFactory) -> None:
    """Through the real pynvml and the fake, with the TUI's own field profile: the HBM
    temperature and its limit, the PCIe link and the NVLink links are read, not N/A."""
    app, sampler = fake_monitor({"device_count": 1, "gpu.0.nvlink": 1, "gpu.0.nvlink_links": 4,
                                 "gpu.0.nvlink_down_mask": 8, "gpu.0.mem_temp_c": 71,
                                 "gpu.0.temp_mem_max_c": 95}, 1.0)
    async with app.run_test(size=(120, 40)) as pilot:
        sampler.tick()
        await pilot.pause()
        await open_detail(pilot, app)
        g = sampler.latest.gpus[0]  # type: ignore[union-attr]
        assert rows(app, "nvlink")["links"] == "4, 3 up"  # link 3 is down
        assert rows(app, "nvlink")["link 3"] == "down"
        assert rows(app, "temps")["memory (HBM)"] == "71°C of limit 95°C"
        assert rows(app, "pcie")["link now"] == f"Gen {g.pcie_gen} x{g.pcie_width}"
        assert g.pcie_gen is not None and g.clock_mem_mhz is not None
        assert rows(app, "clocks")["memory clock"].startswith(f"{g.clock_mem_mhz}MHz")


async def test_the_detail_screen_asks_for_per_link_rates_while_open(
        fake_monitor: MonitorFactory) -> None:
    """The live monitor reads per-link NVLink rates only while the detail shows them:
    opening it turns them on, leaving turns them off (through the real pynvml)."""
    app, sampler = fake_monitor("gpm", 1000.0)
    nvml = sampler.nvml
    ticks = iter(range(1000, 2000))
    nvml.gpm_clock = lambda: float(next(ticks))  # type: ignore[union-attr]
    async with app.run_test(size=(120, 50)) as pilot:
        sampler.tick()
        sampler.tick()
        await pilot.pause()
        assert not nvml.link_rates_wanted  # type: ignore[union-attr]
        g = sampler.latest.gpus[0]  # type: ignore[union-attr]
        assert g.nvlink_links is not None and g.nvlink_links[0].tx_bps is None
        await open_detail(pilot, app)
        assert nvml.link_rates_wanted  # type: ignore[union-attr]
        sampler.tick()
        await pilot.pause()
        # gpm.conf: 4096 MiB/s TX, 2048 RX over the 3 links that are up.
        assert rows(app, "nvlink")["link 0"] == "up, TX 1.3GiB/s RX 683MiB/s"
        assert rows(app, "nvlink")["link 3"] == "down, TX 0B/s RX 0B/s"
        await pilot.press("escape")
        await pilot.pause()
        assert not isinstance(app.screen, GpuDetailScreen)
        assert not nvml.link_rates_wanted  # type: ignore[union-attr]


async def test_the_detail_screen_shows_its_extra_fields_on_a_gpu_that_has_them(
        fake_monitor: MonitorFactory) -> None:
    """Energy, the SM clock's min/max within the tick and PCIe RX/TX are not in the
    monitor's field profile: the screen asks for them while open, and shows values, not
    N/A; closed, the monitor stops reading them."""
    app, sampler = fake_monitor({"device_count": 1}, 100.0)
    async with app.run_test(size=(120, 40)) as pilot:
        sampler.tick()
        await pilot.pause()
        assert sampler.latest.gpus[0].energy_j is None  # type: ignore[union-attr]
        await open_detail(pilot, app)
        await pilot.pause()  # the app took the screen's request
        sampler.tick()
        await pilot.pause()
        g = sampler.latest.gpus[0]  # type: ignore[union-attr]
        assert None not in (g.energy_j, g.clock_sm_mhz_min, g.clock_sm_mhz_max,
                            g.pcie_rx_bps, g.pcie_tx_bps)
        clocks, pcie = rows(app, "clocks"), rows(app, "pcie")
        assert clocks["energy"] != "N/A" and clocks["SM clock in tick"] != "N/A"
        assert "N/A" not in pcie["RX / TX"], pcie
        text = screen_text(app)
        assert clocks["SM clock in tick"] in text and clocks["energy"] in text
        await pilot.press("escape")
        await pilot.pause()
        sampler.tick()
        assert sampler.latest.gpus[0].energy_j is None  # type: ignore[union-attr]


async def test_fields_not_read_yet_say_so_and_a_gpu_without_them_says_na(
        fake_monitor: MonitorFactory) -> None:
    """Opened, the screen's own fields come with the next reading: until then they read
    "reading…", not N/A (which would say the GPU lacks them). A GPU that has no energy
    counter shows N/A once the readings that asked for it are in."""
    app, sampler = fake_monitor({"device_count": 2, "gpu.1.unsupported": ["energy"]}, 100.0)
    async with app.run_test(size=(120, 40)) as pilot:
        sampler.tick()
        await pilot.pause()
        screen = await open_detail(pilot, app)
        await pilot.pause()
        clocks, pcie = rows(app, "clocks"), rows(app, "pcie")
        assert clocks["energy"] == "reading…" and clocks["SM clock in tick"] == "reading…"
        assert pcie["RX / TX"] == "reading…"
        assert clocks["SM clock"] != "reading…"  # what the monitor reads anyway
        sampler.tick()
        await pilot.pause()
        clocks = rows(app, "clocks")
        assert clocks["energy"] not in ("reading…", "N/A")
        assert "reading…" not in rows(app, "pcie")["RX / TX"]
        await pilot.press("n")  # GPU 1: no energy counter
        await pilot.pause()
        assert screen.gpu_index == 1
        sampler.tick()
        await pilot.pause()
        assert rows(app, "clocks")["energy"] == "N/A"


def test_an_amd_gpus_identity_names_its_driver_and_no_cuda() -> None:
    from gputui.telemetry.model import SystemInfo
    from gputui.ui.widgets.gpu_facts import identity

    system = SystemInfo("580.65.06", "12.580.65.06", "13.0", "6.12.0-amd")
    from dataclasses import replace

    amd = gpu(1, info=replace(device(1, name="AMD Instinct MI300X"), vendor="amd"))
    rows = dict(identity(amd, system).rows)
    assert rows["driver"] == "amdgpu 6.12.0-amd" and "CUDA (driver)" not in rows
    nvidia = dict(identity(gpu(0), system).rows)
    assert nvidia["driver"] == "580.65.06" and nvidia["CUDA (driver)"] == "13.0"
