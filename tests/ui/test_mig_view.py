"""MIG on screen: the panel's summary line and the detail screen's table of
MIG devices, from samples read through the real pynvml and the fake (pure functions), and
the widget in a Textual app (Pilot)."""

from __future__ import annotations

from textual.app import App, ComposeResult

from gputui.telemetry.mig import MigDevice
from gputui.telemetry.model import DeviceInfo, GpuSample
from gputui.telemetry.nvml import NvmlSource
from gputui.ui.widgets.mig_view import MigTable, mig_summary, mig_table_lines
from tests.fakenvml.harness import FakeNvml

INFO = DeviceInfo(index=0, name="NVIDIA H100 80GB HBM3", uuid="GPU-1", pci_bus_id="0:18")


def _mig_samples(fake_nvml: FakeNvml) -> tuple[GpuSample, ...]:
    fake_nvml.use("mig")
    src = NvmlSource()
    ticks = iter(range(1000, 100000))  # a second between GPM samples, as at 1 Hz
    src.gpm_clock = lambda: float(next(ticks))  # type: ignore[method-assign]
    src.open()
    src.read()
    samples, _ = src.read()
    src.close()
    return samples


def test_summary_and_table_of_an_h100_in_three_mig_devices(fake_nvml: FakeNvml) -> None:
    h100, a100 = _mig_samples(fake_nvml)
    assert mig_summary(h100) == "MIG on · 3 instances"
    assert mig_summary(a100) is None and mig_table_lines(a100) == []
    assert mig_table_lines(h100) == [
        "MIG  PROFILE      GI/CI  MEMORY (GiB)   SMs   SM ACT  TENSOR  PROCESSES",
        "0    3g.40gb      2/0    10.0/39.2      60    88%     62%     4101 4102",
        "1    2g.20gb      3/0    1.0/19.6       32    12%     0%      4103",
        "2    1g.10gb      9/0    0.0/9.8        16    N/A     N/A     none",
    ]


def test_one_instance_reads_in_the_singular_and_unknowns_read_na() -> None:
    dev = MigDevice(index=5, uuid="MIG-x", name="?", profile=None, gpu_instance_id=None,
                    compute_instance_id=None)
    sample = GpuSample(info=INFO, mig_devices=(dev,))
    assert mig_summary(sample) == "MIG on · 1 instance"
    assert mig_table_lines(sample)[1] == (
        "5    MIG          N/A    N/A            N/A   N/A     N/A     N/A")


def test_a_hostile_profile_name_is_escaped() -> None:
    dev = MigDevice(index=0, uuid="MIG-x", name="x MIG \x1b[2J", profile="\x1b[2J",
                    gpu_instance_id=1, compute_instance_id=0)
    line = mig_table_lines(GpuSample(info=INFO, mig_devices=(dev,)))[1]
    assert "\x1b" not in line and "\\x1b[2J" in line


class _MigApp(App[None]):
    def compose(self) -> ComposeResult:
        yield MigTable(id="mig")


async def test_the_widget_shows_the_mig_devices_and_hides_without_them(
        fake_nvml: FakeNvml) -> None:
    h100, a100 = _mig_samples(fake_nvml)
    app = _MigApp()
    async with app.run_test(size=(100, 12)) as pilot:
        table = app.query_one(MigTable)
        assert table.has_class("-empty") and not table.region.height  # nothing yet
        table.update_sample(h100)
        await pilot.pause()
        assert table.display is True
        text = str(table.render())
        assert "MIG on · 3 instances" in text
        assert "3g.40gb      2/0    10.0/39.2" in text
        table.update_sample(a100)
        await pilot.pause()
        assert table.lines == [] and not table.region.height
