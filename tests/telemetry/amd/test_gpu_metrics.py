"""gpu_metrics: the reader's layouts against the kernel's sizes and the hand-written
offsets the fake tree packs with, and what an unknown or damaged blob gives."""

from __future__ import annotations

import ctypes

import pytest

from gputui.telemetry.amd import gpu_metrics as gm
from tests.telemetry.amd.fake_tree import V1_3, V1_4, V1_6, V1_6_ENGINES, V1_8, Layout, pack

# sizeof as stated outside this code: v1.3 120 and v1.4 288 bytes (the field notes in
# shared/reference/amd-sysfs.md), v1.8 3,872 bytes (an amdgpu_metrics kernel module's
# comment) — three numbers a transcription slip would change.
KERNEL_SIZES = {(1, 3): 120, (1, 4): 288, (1, 8): 3872}
LAYOUTS = [(V1_3, gm.GpuMetricsV1_3), (V1_4, gm.GpuMetricsV1_4),
           (V1_6_ENGINES, gm.GpuMetricsV1_6Engines), (V1_6, gm.GpuMetricsV1_6),
           (V1_8, gm.GpuMetricsV1_8)]


def test_sizes_are_the_kernels() -> None:
    for rev, size in KERNEL_SIZES.items():
        assert [ctypes.sizeof(s) for s in gm.REVISIONS[rev]] == [size]


@pytest.mark.parametrize(("layout", "struct"), LAYOUTS,
                         ids=[f"{lay.frev}.{lay.crev}/{lay.size}" for lay, _ in LAYOUTS])
def test_ctypes_transcription_agrees_with_hand_offsets(layout: Layout, struct: type) -> None:
    assert ctypes.sizeof(struct) == layout.size
    for name, (offset, _) in layout.fields.items():
        assert getattr(struct, name).offset == offset, name


def test_v1_3_fields() -> None:
    m, note = gm.parse(pack(V1_3, temperature_edge=45, temperature_hotspot=58,
                            average_gfx_activity=63, average_socket_power=390,
                            energy_accumulator=65536 * 12, current_gfxclk=1700,
                            indep_throttle_status=1 << 36))
    assert note is None and m is not None
    assert (m.revision, m.size, m.edge_c, m.hotspot_c, m.gfx_activity_pct) == (
        "1.3", 120, 45, 58, 63)
    assert (m.socket_power_w, m.energy_j, m.gfxclk_mhz) == (390.0, 12.0, 1700)
    assert m.indep_throttle_status == 1 << 36
    # Left as the firmware's 0xFF fill: N/A, never 65535 °C.
    assert (m.mem_c, m.umc_activity_pct, m.uclk_mhz) == (None, None, None)
    assert m.residency is None


def test_mi300_layouts_have_no_throttle_word_but_v1_6_on_have_residencies() -> None:
    m4, _ = gm.parse(pack(V1_4, throttle_status=0, current_gfxclk=[2000, 2100]))
    assert m4 is not None and m4.indep_throttle_status is None and m4.residency is None
    assert m4.gfxclk_mhz == 2100  # the highest XCD clock filled
    early, _ = gm.parse(pack(V1_6_ENGINES, throttle_status=0, accumulation_counter=9,
                             ppt_residency_acc=4, energy_accumulator=65536))
    assert early is not None and early.indep_throttle_status is None
    assert early.residency == gm.Residency(9, None, 4, None, None, None)
    assert early.energy_j == 1.0
    m8, _ = gm.parse(pack(V1_8, accumulation_counter=5, prochot_residency_acc=1,
                          ppt_residency_acc=2, socket_thm_residency_acc=3,
                          vr_thm_residency_acc=4, hbm_thm_residency_acc=0))
    assert m8 is not None and m8.residency == gm.Residency(5, 1, 2, 3, 4, 0)


@pytest.mark.parametrize(("blob", "why"), [
    (pack(V1_8, crev=9), "gpu_metrics revision 1.9 (3872 bytes) is a layout gputui does "
                         "not know"),
    (pack(V1_3, frev=2, crev=4), "gpu_metrics revision 2.4 (120 bytes) is a layout gputui "
                                 "does not know"),
    (pack(V1_3, size=128) + bytes(8), "gpu_metrics 1.3 says 128 bytes; gputui knows that "
                                      "revision at 120 bytes only"),
    (pack(V1_6, size=1000), "gpu_metrics 1.6 says 1000 bytes; gputui knows that revision "
                            "at 384, 1664 bytes only"),
    (pack(V1_3)[:100], "gpu_metrics 1.3 is truncated: 100 of 120 bytes"),
    (b"\x78", "gpu_metrics is 1 bytes, too short for its header"),
])
def test_an_unknown_or_damaged_blob_gives_nothing_and_one_line(blob: bytes, why: str) -> None:
    assert gm.parse(blob) == (None, why)
