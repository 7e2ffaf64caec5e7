"""amdgpu's binary `gpu_metrics` file: its layouts as the kernel declares them, and the few
fields gputui takes from it.

The kernel writes one C struct per (format, content) revision (`struct gpu_metrics_vF_C`
in drivers/gpu/drm/amd/include/kgd_pp_interface.h): naturally aligned, not packed, native
endian. `smu_cmn_init_soft_gpu_metrics` fills the struct with 0xFF, then sets the header:
the revision and `structure_size` = sizeof the struct. A field the firmware leaves alone
therefore reads as all ones (N/A here). One revision number has carried two layouts
(v1.6: first with per-engine activity and a throttle status, later with per-partition
stats), so a layout is known by (format, content, structure_size); anything else, or a
file shorter than its header says, gives no values and one line saying why — never a
number read from the wrong offset.

The structs below are transcribed field by field from the kernel header (the v1.6
variants and v1.7/v1.8 from the amd-gfx patches that added them); ctypes lays them out
as the kernel's compiler does on the same machine. Format 2 and 3 (APUs) are not read.
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass

U8, U16, U32, U64 = ctypes.c_uint8, ctypes.c_uint16, ctypes.c_uint32, ctypes.c_uint64
NUM_HBM_INSTANCES, NUM_XGMI_LINKS, MAX_GFX_CLKS, MAX_CLKS = 4, 8, 8, 4
NUM_VCN, NUM_JPEG_ENG, NUM_JPEG_ENG_V1, MAX_XCC, NUM_XCP = 4, 32, 40, 8, 8

# One energy_accumulator count: 15.259 µJ (2^-16 J), as the v1.4+ structs say and ROCm SMI
# applies to every revision (its kEnergyCounterResolution, 15.3 µJ).
ENERGY_UNIT_J = 2.0 ** -16

_HEADER = [("structure_size", U16), ("format_revision", U8), ("content_revision", U8)]
_TEMPS_V1 = [("temperature_edge", U16), ("temperature_hotspot", U16),
             ("temperature_mem", U16), ("temperature_vrgfx", U16),
             ("temperature_vrsoc", U16), ("temperature_vrmem", U16)]
_ACTIVITY_V1 = [("average_gfx_activity", U16), ("average_umc_activity", U16),
                ("average_mm_activity", U16)]
_CLOCKS_V1 = [(f"{kind}_{clk}", U16)
              for kind, names in (("average", ("gfxclk_frequency", "socclk_frequency",
                                               "uclk_frequency", "vclk0_frequency",
                                               "dclk0_frequency", "vclk1_frequency",
                                               "dclk1_frequency")),
                                  ("current", ("gfxclk", "socclk", "uclk", "vclk0", "dclk0",
                                               "vclk1", "dclk1")))
              for clk in names]


class _Struct(ctypes.Structure):
    pass


def _struct(name: str, fields: list[tuple[str, object]]) -> type[ctypes.Structure]:
    return type(name, (_Struct,), {"_fields_": fields})


GpuMetricsV1_0 = _struct("GpuMetricsV1_0", [
    *_HEADER, ("system_clock_counter", U64), *_TEMPS_V1, *_ACTIVITY_V1,
    ("average_socket_power", U16), ("energy_accumulator", U32), *_CLOCKS_V1,
    ("throttle_status", U32), ("current_fan_speed", U16),
    ("pcie_link_width", U8), ("pcie_link_speed", U8)])

_V1_1 = [
    *_HEADER, *_TEMPS_V1, *_ACTIVITY_V1,
    ("average_socket_power", U16), ("energy_accumulator", U64),
    ("system_clock_counter", U64), *_CLOCKS_V1,
    ("throttle_status", U32), ("current_fan_speed", U16),
    ("pcie_link_width", U16), ("pcie_link_speed", U16), ("padding", U16),
    ("gfx_activity_acc", U32), ("mem_activity_acc", U32),
    ("temperature_hbm", U16 * NUM_HBM_INSTANCES)]
GpuMetricsV1_1 = _struct("GpuMetricsV1_1", _V1_1)
_V1_2 = [*_V1_1, ("firmware_timestamp", U64)]
GpuMetricsV1_2 = _struct("GpuMetricsV1_2", _V1_2)
GpuMetricsV1_3 = _struct("GpuMetricsV1_3", [
    *_V1_2, ("voltage_soc", U16), ("voltage_gfx", U16), ("voltage_mem", U16),
    ("padding1", U16), ("indep_throttle_status", U64)])

# The MI300 family's (smu_v13_0_6) layouts share this shape.
_MI300_HEAD = [*_HEADER, ("temperature_hotspot", U16), ("temperature_mem", U16),
               ("temperature_vrsoc", U16), ("curr_socket_power", U16),
               ("average_gfx_activity", U16), ("average_umc_activity", U16)]
_RESIDENCY = [("accumulation_counter", U32), ("prochot_residency_acc", U32),
              ("ppt_residency_acc", U32), ("socket_thm_residency_acc", U32),
              ("vr_thm_residency_acc", U32), ("hbm_thm_residency_acc", U32)]
_LINKS = [("pcie_link_width", U16), ("pcie_link_speed", U16),
          ("xgmi_link_width", U16), ("xgmi_link_speed", U16),
          ("gfx_activity_acc", U32), ("mem_activity_acc", U32),
          ("pcie_bandwidth_acc", U64), ("pcie_bandwidth_inst", U64),
          ("pcie_l0_to_recov_count_acc", U64), ("pcie_replay_count_acc", U64),
          ("pcie_replay_rover_count_acc", U64)]
_NAK = [("pcie_nak_sent_count_acc", U32), ("pcie_nak_rcvd_count_acc", U32)]
_XGMI_DATA = [("xgmi_read_data_acc", U64 * NUM_XGMI_LINKS),
              ("xgmi_write_data_acc", U64 * NUM_XGMI_LINKS)]
_MI300_CLOCKS = [("current_gfxclk", U16 * MAX_GFX_CLKS), ("current_socclk", U16 * MAX_CLKS),
                 ("current_vclk0", U16 * MAX_CLKS), ("current_dclk0", U16 * MAX_CLKS),
                 ("current_uclk", U16)]
_ENGINES = [("vcn_activity", U16 * NUM_VCN)]
_ENGINES_JPEG = [*_ENGINES, ("jpeg_activity", U16 * NUM_JPEG_ENG)]
_ENERGY = [("energy_accumulator", U64), ("system_clock_counter", U64)]

GpuMetricsV1_4 = _struct("GpuMetricsV1_4", [
    *_MI300_HEAD, *_ENGINES, *_ENERGY, ("throttle_status", U32), ("gfxclk_lock_status", U32),
    *_LINKS, *_XGMI_DATA, ("firmware_timestamp", U64), *_MI300_CLOCKS, ("padding", U16)])
GpuMetricsV1_5 = _struct("GpuMetricsV1_5", [
    *_MI300_HEAD, *_ENGINES_JPEG, *_ENERGY, ("throttle_status", U32),
    ("gfxclk_lock_status", U32), *_LINKS, *_NAK, *_XGMI_DATA, ("firmware_timestamp", U64),
    *_MI300_CLOCKS, ("padding", U16)])
# v1.6 as first merged: v1.5 plus the throttler residency accumulators.
GpuMetricsV1_6Engines = _struct("GpuMetricsV1_6Engines", [
    *_MI300_HEAD, *_ENGINES_JPEG, *_ENERGY, *_RESIDENCY, ("throttle_status", U32),
    ("gfxclk_lock_status", U32), *_LINKS, *_NAK, *_XGMI_DATA, ("firmware_timestamp", U64),
    *_MI300_CLOCKS, ("padding", U16)])

XcpMetrics = _struct("XcpMetrics", [
    ("gfx_busy_inst", U32 * MAX_XCC), ("jpeg_busy", U16 * NUM_JPEG_ENG),
    ("vcn_busy", U16 * NUM_VCN), ("gfx_busy_acc", U64 * MAX_XCC)])
XcpMetricsV1_1 = _struct("XcpMetricsV1_1", [
    *XcpMetrics._fields_, ("gfx_below_host_limit_acc", U64 * MAX_XCC)])
XcpMetricsV1_2 = _struct("XcpMetricsV1_2", [
    ("gfx_busy_inst", U32 * MAX_XCC), ("jpeg_busy", U16 * NUM_JPEG_ENG_V1),
    ("vcn_busy", U16 * NUM_VCN), ("gfx_busy_acc", U64 * MAX_XCC),
    ("gfx_below_host_limit_ppt_acc", U64 * MAX_XCC),
    ("gfx_below_host_limit_thm_acc", U64 * MAX_XCC),
    ("gfx_low_utilization_acc", U64 * MAX_XCC),
    ("gfx_below_host_limit_total_acc", U64 * MAX_XCC)])


def _partitioned(name: str, xcp: type[ctypes.Structure], *,
                 bandwidth: bool) -> type[ctypes.Structure]:
    """v1.6 (per-partition stats), v1.7 and v1.8: no per-engine activity or throttle
    status; v1.7 adds the VRAM bandwidth and the XGMI link status."""
    return _struct(name, [
        *_MI300_HEAD, *([("mem_max_bandwidth", U64)] if bandwidth else []), *_ENERGY,
        *_RESIDENCY, ("gfxclk_lock_status", U32), *_LINKS, *_NAK, *_XGMI_DATA,
        *([("xgmi_link_status", U16 * NUM_XGMI_LINKS), ("padding", U16)] if bandwidth
          else []),
        ("firmware_timestamp", U64), *_MI300_CLOCKS, ("num_partition", U16),
        ("xcp_stats", xcp * NUM_XCP), ("pcie_lc_perf_other_end_recovery", U32)])


GpuMetricsV1_6 = _partitioned("GpuMetricsV1_6", XcpMetrics, bandwidth=False)
GpuMetricsV1_7 = _partitioned("GpuMetricsV1_7", XcpMetricsV1_1, bandwidth=True)
GpuMetricsV1_8 = _partitioned("GpuMetricsV1_8", XcpMetricsV1_2, bandwidth=True)

# (format, content) → its layouts; the header's structure_size picks one.
REVISIONS: dict[tuple[int, int], tuple[type[ctypes.Structure], ...]] = {
    (1, 0): (GpuMetricsV1_0,), (1, 1): (GpuMetricsV1_1,), (1, 2): (GpuMetricsV1_2,),
    (1, 3): (GpuMetricsV1_3,), (1, 4): (GpuMetricsV1_4,), (1, 5): (GpuMetricsV1_5,),
    (1, 6): (GpuMetricsV1_6Engines, GpuMetricsV1_6), (1, 7): (GpuMetricsV1_7,),
    (1, 8): (GpuMetricsV1_8,),
}
# MI300's firmware reports no throttle status through these (smu_v13_0_6 writes 0:
# "Throttle status is not reported through metrics now"); a 0 there is not "not
# throttling".
_NO_THROTTLE_STATUS = frozenset({GpuMetricsV1_4, GpuMetricsV1_5, GpuMetricsV1_6Engines})


@dataclass(frozen=True, slots=True)
class Residency:
    """MI300's accumulated throttler residencies (v1.6 and later): counts of firmware
    cycles each throttler was active, and the cycle counter they are counted against."""

    cycles: int
    prochot: int | None
    ppt: int | None
    socket_thermal: int | None
    vr_thermal: int | None
    hbm_thermal: int | None


@dataclass(frozen=True, slots=True)
class Metrics:
    """The fields gputui reads, None where the layout has none or the firmware left it
    unfilled (all ones)."""

    revision: str  # "1.3"
    size: int
    gfx_activity_pct: int | None = None
    umc_activity_pct: int | None = None
    socket_power_w: float | None = None
    energy_j: float | None = None
    gfxclk_mhz: int | None = None
    uclk_mhz: int | None = None
    edge_c: int | None = None
    hotspot_c: int | None = None
    mem_c: int | None = None
    indep_throttle_status: int | None = None  # SMU_THROTTLER_* bits (v1.3)
    residency: Residency | None = None


def parse(blob: bytes) -> tuple[Metrics | None, str | None]:
    """(metrics, None) for a layout gputui knows, else (None, the one-line reason)."""
    if len(blob) < 4:
        return None, f"gpu_metrics is {len(blob)} bytes, too short for its header"
    size = int.from_bytes(blob[0:2], "little")
    rev = (blob[2], blob[3])
    name = f"{rev[0]}.{rev[1]}"
    layouts = REVISIONS.get(rev)
    if layouts is None:
        return None, (f"gpu_metrics revision {name} ({size} bytes) is a layout gputui "
                      "does not know")
    layout = next((lay for lay in layouts if ctypes.sizeof(lay) == size), None)
    if layout is None:
        known = ", ".join(str(ctypes.sizeof(lay)) for lay in layouts)
        return None, (f"gpu_metrics {name} says {size} bytes; gputui knows that revision "
                      f"at {known} bytes only")
    if len(blob) < size:
        return None, f"gpu_metrics {name} is truncated: {len(blob)} of {size} bytes"
    s = layout.from_buffer_copy(blob[:size])
    return _fields(s, name, size), None


def _get(s: ctypes.Structure, field: str) -> int | None:
    """A field's value, None when the layout lacks it or it reads all ones (unfilled)."""
    if not hasattr(s, field):
        return None
    value = getattr(s, field)
    if isinstance(value, ctypes.Array):
        # Per-instance values (MI300's XCC clocks): the highest of those filled.
        filled = [v for v in value if v != _ones(value._type_)]
        return max(filled) if filled else None
    ctype = dict(s._fields_)[field]
    return None if value == _ones(ctype) else int(value)


def _ones(ctype: object) -> int:
    return (1 << (8 * ctypes.sizeof(ctype))) - 1  # type: ignore[arg-type]


def _fields(s: ctypes.Structure, name: str, size: int) -> Metrics:
    layout = type(s)
    power = _get(s, "curr_socket_power")
    if power is None:
        power = _get(s, "average_socket_power")
    energy = _get(s, "energy_accumulator") if layout is not GpuMetricsV1_0 else None
    residency = None
    cycles = _get(s, "accumulation_counter")
    if cycles is not None:
        residency = Residency(cycles, _get(s, "prochot_residency_acc"),
                              _get(s, "ppt_residency_acc"),
                              _get(s, "socket_thm_residency_acc"),
                              _get(s, "vr_thm_residency_acc"),
                              _get(s, "hbm_thm_residency_acc"))
    return Metrics(
        revision=name, size=size,
        gfx_activity_pct=_get(s, "average_gfx_activity"),
        umc_activity_pct=_get(s, "average_umc_activity"),
        socket_power_w=None if power is None else float(power),
        energy_j=None if energy is None else energy * ENERGY_UNIT_J,
        gfxclk_mhz=_get(s, "current_gfxclk"), uclk_mhz=_get(s, "current_uclk"),
        edge_c=_get(s, "temperature_edge"), hotspot_c=_get(s, "temperature_hotspot"),
        mem_c=_get(s, "temperature_mem"),
        indep_throttle_status=(None if layout in _NO_THROTTLE_STATUS
                               else _get(s, "indep_throttle_status")),
        residency=residency)
