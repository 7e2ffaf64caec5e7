"""CardReader: one AMD GPU — its static facts, and everything read from its files each tick.

Files under the card's PCI device directory (/sys/class/drm/cardN/device), as amdgpu
writes them (drivers/gpu/drm/amd/pm/amdgpu_pm.c; the PCI core writes the link files):
  gpu_busy_percent, mem_busy_percent        "%d"
  mem_info_vram_used, mem_info_vram_total   bytes
  pp_dpm_sclk, pp_dpm_mclk                  "N: 1234Mhz" lines, the current one ending " *"
  current_link_speed, max_link_speed        "16.0 GT/s PCIe" ("16 GT/s" before Linux 5.7)
  current_link_width, max_link_width        lanes
  unique_id, product_name                   server cards only
  ras/umc_err_count                         "ue: N" and "ce: N" lines
  gpu_metrics                               binary (gputui.telemetry.amd.gpu_metrics)
and its hwmon directory (the one whose `name` is amdgpu):
  temp1 edge, temp2 junction, temp3 mem     m°C; _crit, _emergency thresholds
  power1_average, power1_input, power1_cap  µW
  freq1_input (sclk), freq2_input (mclk)    Hz
  pwm1                                      0–255
MI300 has no edge sensor (amdgpu hides temp1 on GC 9.4.3/9.4.4), RDNA3 has no
power1_input and MI300 no power1_average; passively cooled cards have no fan files.
`pcie_bw` is never read: it blocks for about a second.
"""

from __future__ import annotations

import logging
import os
import re
from dataclasses import dataclass
from typing import Any

from gputui.telemetry.amd import gpu_metrics, throttle_bits
from gputui.telemetry.amd.files import DeviceGone, read_bytes, read_int, read_text
from gputui.telemetry.amd.names import name_of
from gputui.telemetry.model import DeviceInfo, GpuSample

log = logging.getLogger("gputui")

_DPM_LINE = re.compile(r"^\s*\w+:\s*(\d+)\s*mhz\s*(\*)?\s*$", re.IGNORECASE)
_GT_S = re.compile(r"([\d.]+)\s*GT/s")
# PCIe generation by its transfer rate, GT/s.
_GEN_BY_RATE = {2.5: 1, 5.0: 2, 8.0: 3, 16.0: 4, 32.0: 5, 64.0: 6}


def dpm_levels(text: str | None) -> tuple[int | None, int | None]:
    """(current MHz, highest MHz) of a pp_dpm_* file; None each where it says nothing."""
    if not text:
        return None, None
    current = top = None
    for line in text.splitlines():
        m = _DPM_LINE.match(line)
        if not m:
            continue
        mhz = int(m.group(1))
        top = mhz if top is None else max(top, mhz)
        if m.group(2):
            current = mhz
    return current, top


def pcie_gen(text: str | None) -> int | None:
    """"16.0 GT/s PCIe" → 4; None for "Unknown" or anything else."""
    m = _GT_S.search(text or "")
    if not m:
        return None
    try:
        return _GEN_BY_RATE.get(float(m.group(1)))
    except ValueError:
        return None


def nvml_bus_id(pci: str) -> str:
    """"0000:c1:00.0" → NVML's form "00000000:C1:00.0"."""
    domain, rest = pci.split(":", 1)
    return f"{int(domain, 16):08X}:{rest.upper()}"


def _milli(value: int | None) -> int | None:
    return None if value is None else round(value / 1000)


def _micro_w(value: int | None) -> float | None:
    return None if value is None else value / 1e6


@dataclass(frozen=True, slots=True)
class CardFiles:
    """Where one card's files are, found once when it opens."""

    dev: str  # the PCI device directory, resolved
    hwmon: str | None
    temp: str | None  # "temp2" (junction) or "temp1" (edge): the sensor temp_c reads
    power: str | None  # "power1_average" or "power1_input"


class CardReader:
    """One AMD GPU. `open` and `read` run on its reader thread only."""

    def __init__(self, index: int, dev: str, pci: str) -> None:
        self.index = index
        self.pci = pci  # "0000:c1:00.0", as drm-pdev and the KFD topology name it
        self.files = CardFiles(dev=dev, hwmon=None, temp=None, power=None)
        self.info = DeviceInfo(index=index, name="(not answering)", uuid="",
                               pci_bus_id=nvml_bus_id(pci), vendor="amd")
        self.pending = True
        self.lost = False
        self.lost_why = ""
        # Why gpu_metrics gives nothing (an unknown or truncated layout); None while it reads.
        self.metrics_note: str | None = None
        self._logged_notes: set[str] = set()
        self._slow: dict[str, Any] = {}
        self._residency: gpu_metrics.Residency | None = None

    # --- opening -------------------------------------------------------------------------

    def open(self) -> DeviceInfo:
        try:
            self._open()
        except DeviceGone as exc:
            self._gone(f"GPU is lost ({exc})")
        self.pending = False
        return self.info

    def _open(self) -> None:
        dev = self.files.dev
        hwmon = _amdgpu_hwmon(dev)
        temp = power = None
        if hwmon is not None:
            temp = next((s for s in ("temp2", "temp1")
                         if os.path.exists(f"{hwmon}/{s}_input")), None)
            power = next((p for p in ("power1_average", "power1_input")
                          if os.path.exists(f"{hwmon}/{p}")), None)
        self.files = CardFiles(dev=dev, hwmon=hwmon, temp=temp, power=power)
        device_id = read_int(f"{dev}/device", 16)
        revision = read_int(f"{dev}/revision", 16)
        unique_id = read_text(f"{dev}/unique_id")
        _, sclk_max = dpm_levels(read_text(f"{dev}/pp_dpm_sclk"))
        _, mclk_max = dpm_levels(read_text(f"{dev}/pp_dpm_mclk"))
        self.info = DeviceInfo(
            index=self.index,
            name=read_text(f"{dev}/product_name") or name_of(device_id, revision),
            # Consumer cards have no unique_id: the PCI address is what stays the same
            # for that card while it sits in that slot.
            uuid=f"AMD-{unique_id}" if unique_id else f"AMD-PCI-{self.pci}",
            pci_bus_id=nvml_bus_id(self.pci),
            mem_total_bytes=read_int(f"{dev}/mem_info_vram_total"),
            temp_slowdown_c=_milli(self._hwmon_int(f"{temp}_crit")) if temp else None,
            temp_shutdown_c=_milli(self._hwmon_int(f"{temp}_emergency")) if temp else None,
            clock_sm_max_mhz=sclk_max or _mhz(self._hwmon_int("freq1_input")),
            clock_mem_max_mhz=mclk_max,
            pcie_gen_max=pcie_gen(read_text(f"{dev}/max_link_speed")),
            pcie_width_max=read_int(f"{dev}/max_link_width"),
            temp_mem_max_c=_milli(self._hwmon_int("temp3_crit")),
            vendor="amd",
        )

    def _hwmon_int(self, name: str) -> int | None:
        hwmon = self.files.hwmon
        return None if hwmon is None else read_int(f"{hwmon}/{name}")

    # --- a tick --------------------------------------------------------------------------

    def read(self, slow: bool) -> GpuSample:
        if self.pending:
            return GpuSample(info=self.info, error="not opened yet")
        if self.lost:
            return self._lost_sample()
        if not os.path.isdir(self.files.dev):
            self._gone("GPU is lost (its sysfs directory is gone)")
            return self._lost_sample()
        try:
            return self._read(slow)
        except DeviceGone as exc:
            self._gone(f"GPU is lost ({exc})")
            return self._lost_sample()
        except Exception as exc:  # a fault stays here: this GPU N/A, the others read on
            return GpuSample(info=self.info, error=f"read failed: {exc}")

    def _gone(self, why: str) -> None:
        self.lost, self.lost_why = True, why

    def _lost_sample(self) -> GpuSample:
        return GpuSample(info=self.info, lost=True, error=self.lost_why)

    def _read(self, slow: bool) -> GpuSample:
        dev, f = self.files.dev, self.files
        # gpu_metrics fills in where a file is missing (and alone has energy and throttle).
        m = self._metrics() or NO_METRICS
        if slow:
            self._read_slow()
        pwm = self._hwmon_int("pwm1")
        junction = _first(_milli(self._hwmon_int("temp2_input")), m.hotspot_c)
        edge = _first(_milli(self._hwmon_int("temp1_input")), m.edge_c)
        return GpuSample(
            info=self.info,
            util_gpu_pct=_first(read_int(f"{dev}/gpu_busy_percent"), m.gfx_activity_pct),
            util_mem_pct=_first(read_int(f"{dev}/mem_busy_percent"), m.umc_activity_pct),
            mem_used_bytes=read_int(f"{dev}/mem_info_vram_used"),
            mem_total_bytes=self.info.mem_total_bytes,
            power_w=_first(_micro_w(self._hwmon_int(f.power)) if f.power else None,
                           m.socket_power_w),
            # One sensor, chosen at open (junction, else edge): a series never jumps
            # between the two when one read fails.
            temp_c=junction if f.temp == "temp2" else edge if f.temp == "temp1" else _first(
                m.hotspot_c, m.edge_c),
            temp_junction_c=junction,
            temp_edge_c=edge,
            mem_temp_c=_first(_milli(self._hwmon_int("temp3_input")), m.mem_c),
            fan_pct=None if pwm is None else round(pwm * 100 / 255),
            clock_sm_mhz=_first(self._clock("pp_dpm_sclk", "freq1_input"), m.gfxclk_mhz),
            clock_mem_mhz=_first(self._clock("pp_dpm_mclk", "freq2_input"), m.uclk_mhz),
            energy_j=m.energy_j,
            throttle_mask=self._throttle(m),
            **self._slow,
        )

    def _clock(self, dpm: str, freq: str) -> int | None:
        """The current level of a pp_dpm_* file, else hwmon's frequency (read only then)."""
        mhz, _ = dpm_levels(read_text(f"{self.files.dev}/{dpm}"))
        return mhz if mhz is not None else _mhz(self._hwmon_int(freq))

    def _read_slow(self) -> None:
        """Fields that change rarely, read every `slow_every` ticks."""
        dev, out = self.files.dev, self._slow
        out["power_limit_w"] = _micro_w(self._hwmon_int("power1_cap"))
        out["ecc_uncorrected"] = _ras_count(read_text(f"{dev}/ras/umc_err_count"), "ue")
        out["pcie_gen"] = pcie_gen(read_text(f"{dev}/current_link_speed"))
        out["pcie_width"] = read_int(f"{dev}/current_link_width")

    def _metrics(self) -> gpu_metrics.Metrics | None:
        blob = read_bytes(f"{self.files.dev}/gpu_metrics")
        if blob is None:
            return None  # no such file (older kernels, some cards): nothing to say
        m, note = gpu_metrics.parse(blob)
        self.metrics_note = note
        if note is not None and note not in self._logged_notes:
            self._logged_notes.add(note)
            log.warning("AMD GPU %d (%s): %s; its fields read from it are N/A",
                        self.index, self.pci, note)
        return m

    def _throttle(self, m: gpu_metrics.Metrics) -> int | None:
        if m.indep_throttle_status is not None:
            return throttle_bits.from_indep(m.indep_throttle_status)
        if m.residency is None:
            return None
        prev, self._residency = self._residency, m.residency
        return None if prev is None else throttle_bits.from_residency(prev, m.residency)


NO_METRICS = gpu_metrics.Metrics(revision="", size=0)


def _first(*values: Any) -> Any:
    """The first value that is not None (a file, then its gpu_metrics stand-in)."""
    return next((v for v in values if v is not None), None)


def _mhz(hz: int | None) -> int | None:
    return None if hz is None else round(hz / 1e6)


def _ras_count(text: str | None, key: str) -> int | None:
    for line in (text or "").splitlines():
        name, _, value = line.partition(":")
        if name.strip() == key:
            try:
                return int(value.strip())
            except ValueError:
                return None
    return None


def _amdgpu_hwmon(dev: str) -> str | None:
    """The card's hwmon directory (device/hwmon/hwmonM whose name is amdgpu)."""
    try:
        names = sorted(os.listdir(f"{dev}/hwmon"))
    except OSError:
        return None
    dirs = [f"{dev}/hwmon/{n}" for n in names if n.startswith("hwmon")]
    return next((d for d in dirs if read_text(f"{d}/name") == "amdgpu"),
                dirs[0] if dirs else None)
