"""Everything known about one GPU at one tick, as titled sections of (label, value) rows:
what the GPU detail screen shows beyond the panel.

Pure (a sample in, text out), so that the screen and the tests read the same words. Each
number is formatted by `gputui.telemetry.units` as everywhere else; a value NVML did not
give is N/A. Names and ids come from the driver and go through `safe_text.printable`
(the widget draws them as `Text`, never as markup).
"""

from __future__ import annotations

from dataclasses import dataclass

from rich.text import Text
from textual.widgets import Static

from gputui.safe_text import printable
from gputui.telemetry.model import GpuSample, NvLink, SystemInfo
from gputui.telemetry.throttle import state_words
from gputui.telemetry.units import (
    NA,
    fmt_bytes,
    fmt_j,
    fmt_mhz,
    fmt_pct,
    fmt_rate,
    fmt_temp,
    fmt_w,
)

LABEL_WIDTH = 19  # the longest label and a space


@dataclass(frozen=True, slots=True)
class Section:
    key: str  # stable widget id part: "identity", "clocks", …
    title: str
    rows: tuple[tuple[str, str], ...]


def _of(value: str, limit: str, word: str = "max") -> str:
    """"1410MHz of max 1980MHz"; just the value when the limit is unknown."""
    if value == NA:
        return NA
    return value if limit == NA else f"{value} of {word} {limit}"


def _share(value: float | None, limit: float | None) -> str:
    if value is None or not limit:
        return ""
    return f" ({100.0 * value / limit:.0f}%)"


def _yes_no(flag: bool | None) -> str:
    return NA if flag is None else ("yes" if flag else "no")


def _count(n: int | None) -> str:
    return NA if n is None else str(n)


def _range(lo: str, hi: str) -> str:
    return NA if lo == NA or hi == NA else f"{lo} – {hi}"


def state_line(g: GpuSample) -> str:
    """How current the values are: the first thing to know before reading them."""
    if g.lost:
        return f"LOST: {printable(g.error or 'the GPU fell off the bus')}"
    if g.stale:
        age = NA if g.stale_s is None else f"{g.stale_s:.0f} s"
        return f"STALE: not answering; the values below are {age} old"
    if g.error:
        return f"error: {printable(g.error)}"
    return "current"


def identity(g: GpuSample, system: SystemInfo) -> Section:
    info = g.info
    if info.vendor == "amd":
        # Read from amdgpu's kernel files: no CUDA, the kernel driver's own version.
        driver = (("driver", f"amdgpu {printable(system.amd_driver_version)}"
                   if system.amd_driver_version else NA),
                  ("read from", "amdgpu sysfs, hwmon, gpu_metrics, fdinfo"))
    else:
        driver = (("driver", printable(system.driver_version) if system.driver_version
                   else NA),
                  ("CUDA (driver)", printable(system.cuda_driver_version)
                   if system.cuda_driver_version else NA))
    return Section("identity", "Identity", (
        ("name", printable(info.name) or NA),
        ("UUID", printable(info.uuid) or NA),
        ("PCI bus id", printable(info.pci_bus_id) or NA),
        *driver,
        ("state", state_line(g)),
    ))


def clocks_power(g: GpuSample) -> Section:
    info = g.info
    sm = _of(fmt_mhz(g.clock_sm_mhz), fmt_mhz(info.clock_sm_max_mhz))
    if sm != NA:
        sm += _share(g.clock_sm_mhz, info.clock_sm_max_mhz)
    power = _of(fmt_w(g.power_w), fmt_w(g.power_limit_w), "enforced limit")
    if power != NA:
        power += _share(g.power_w, g.power_limit_w)
    return Section("clocks", "Clocks and power", (
        ("SM clock", sm),
        ("SM clock in tick", _range(fmt_mhz(g.clock_sm_mhz_min), fmt_mhz(g.clock_sm_mhz_max))),
        ("memory clock", _of(fmt_mhz(g.clock_mem_mhz), fmt_mhz(info.clock_mem_max_mhz))),
        ("P-state", NA if g.pstate is None else f"P{g.pstate}"),
        ("clock events", state_words(g.throttle_mask)),
        ("power", power),
        ("power in tick", _range(fmt_w(g.power_w_min), fmt_w(g.power_w_max))),
        ("energy", fmt_j(g.energy_j)),
        ("power violation", fmt_pct(None if g.violation_power_frac is None
                                    else 100.0 * g.violation_power_frac)),
        ("thermal violation", fmt_pct(None if g.violation_thermal_frac is None
                                      else 100.0 * g.violation_thermal_frac)),
    ))


def temperatures(g: GpuSample) -> Section:
    info = g.info
    gpu = fmt_temp(g.temp_c)
    limits = [f"{word} {fmt_temp(c)}" for word, c in
              (("slowdown", info.temp_slowdown_c), ("shutdown", info.temp_shutdown_c))
              if c is not None]
    if gpu != NA and limits:
        gpu += " (" + ", ".join(limits) + ")"
    return Section("temps", "Temperatures and use", (
        ("GPU", gpu),
        ("memory (HBM)", _of(fmt_temp(g.mem_temp_c), fmt_temp(info.temp_mem_max_c), "limit")),
        ("fan", fmt_pct(g.fan_pct)),
        ("GPU util", fmt_pct(g.util_gpu_pct)),
        ("memory controller", fmt_pct(g.util_mem_pct)),
        ("encoder / decoder", f"{fmt_pct(g.enc_util_pct)} / {fmt_pct(g.dec_util_pct)}"),
        ("memory used", _of(fmt_bytes(g.mem_used_bytes),
                            fmt_bytes(g.mem_total_bytes or info.mem_total_bytes), "total")),
        ("memory reserved", fmt_bytes(g.mem_reserved_bytes)),
    ))


def _link(gen: int | None, width: int | None) -> str:
    if gen is None and width is None:
        return NA
    return f"Gen {NA if gen is None else gen} x{NA if width is None else width}"


def pcie(g: GpuSample) -> Section:
    info = g.info
    return Section("pcie", "PCIe", (
        ("link now", _link(g.pcie_gen, g.pcie_width)),
        ("link max", _link(info.pcie_gen_max, info.pcie_width_max)),
        ("RX / TX", f"{fmt_rate(g.pcie_rx_bps)} / {fmt_rate(g.pcie_tx_bps)}"),
        ("replays", _count(g.pcie_replay_count)),
    ))


def _link_row(link: NvLink) -> tuple[str, str]:
    state = "up" if link.active else "down"
    if link.tx_bps is None and link.rx_bps is None:
        return f"link {link.link}", state
    return f"link {link.link}", f"{state}, TX {fmt_rate(link.tx_bps)} RX {fmt_rate(link.rx_bps)}"


def nvlink(g: GpuSample) -> Section:
    links = g.nvlink_links
    if links is None:
        return Section("nvlink", "NVLink", (("links", NA),))
    active = sum(1 for x in links if x.active)
    rows = [("links", f"{len(links)}, {active} up"),
            ("TX / RX", f"{fmt_rate(g.nvlink_tx_bps)} / {fmt_rate(g.nvlink_rx_bps)}")]
    rows += [_link_row(x) for x in links]
    return Section("nvlink", "NVLink", tuple(rows))


def memory_health(g: GpuSample) -> Section:
    return Section("health", "Memory errors", (
        ("ECC uncorrected", _count(g.ecc_uncorrected)),
        ("remapped rows", NA if g.remap_correctable_rows is None
         and g.remap_uncorrectable_rows is None else
         f"{_count(g.remap_correctable_rows)} correctable, "
         f"{_count(g.remap_uncorrectable_rows)} uncorrectable"),
        ("remap pending", _yes_no(g.remap_pending)),
        ("remap failure", _yes_no(g.remap_failure)),
        ("retired pages", NA if g.retired_pages_sbe is None and g.retired_pages_dbe is None
         else f"{_count(g.retired_pages_sbe)} single-bit, "
              f"{_count(g.retired_pages_dbe)} double-bit"),
        ("retire pending", _yes_no(g.retired_pages_pending)),
    ))


def profiling(g: GpuSample) -> Section:
    rows = [
        ("SM active", fmt_pct(g.sm_active_pct)),
        ("SM occupancy", fmt_pct(g.sm_occupancy_pct)),
        ("tensor active", fmt_pct(g.tensor_active_pct)),
        ("DRAM active", fmt_pct(g.dram_active_pct)),
        ("FP64 / FP32 / FP16", f"{fmt_pct(g.fp64_active_pct)} / {fmt_pct(g.fp32_active_pct)}"
                               f" / {fmt_pct(g.fp16_active_pct)}"),
        ("graphics engine", fmt_pct(g.gr_engine_active_pct)),
        ("PCIe TX / RX", f"{fmt_rate(g.gpm_pcie_tx_bps)} / {fmt_rate(g.gpm_pcie_rx_bps)}"),
        ("NVLink TX / RX", f"{fmt_rate(g.nvlink_tx_bps)} / {fmt_rate(g.nvlink_rx_bps)}"),
    ]
    if g.gpm_note:
        rows.append(("note", printable(g.gpm_note)))
    return Section("gpm", "Profiling (GPM)", tuple(rows))


# Rows fed by the fields the monitor reads only while the detail screen is open
# (telemetry.nvml.profiles.DETAIL_FIELDS): in the readings taken before they were asked
# for, they say so, not N/A (which would tell the user the GPU lacks them).
DETAIL_ROWS = frozenset({("clocks", "SM clock in tick"), ("clocks", "energy"),
                         ("pcie", "RX / TX")})
READING = "reading…"


def sections(g: GpuSample, system: SystemInfo, *, asked: bool = True
             ) -> tuple[Section, ...]:
    """`asked`: the detail fields were asked for when `g` was read."""
    out = (identity(g, system), clocks_power(g), temperatures(g), pcie(g), nvlink(g),
           memory_health(g), profiling(g))
    if asked:
        return out
    return tuple(Section(s.key, s.title, tuple(
        (label, READING if (s.key, label) in DETAIL_ROWS and _all_na(value) else value)
        for label, value in s.rows)) for s in out)


def _all_na(value: str) -> bool:
    return value.replace(NA, "").strip(" /–") == ""


def section_text(section: Section) -> Text:
    text = Text(no_wrap=False, overflow="fold")
    for i, (label, value) in enumerate(section.rows):
        if i:
            text.append("\n")
        text.append(label.ljust(LABEL_WIDTH), style="dim")
        text.append(value)
    return text


class FactsBox(Static):
    """One section, redrawn only when its rows changed (each frame otherwise a no-op)."""

    DEFAULT_CSS = """
    FactsBox { height: auto; border: round $primary 60%; border-title-style: bold;
               padding: 0 1; }
    """

    def __init__(self, section: Section) -> None:
        super().__init__(section_text(section), id=f"facts-{section.key}")
        self.border_title = section.title
        self.section = section

    def show(self, section: Section) -> None:
        if section.rows != self.section.rows:
            self.section = section
            self.update(section_text(section))
