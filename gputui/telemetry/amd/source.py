"""AmdSource: AMD GPUs read from the kernel's own files (gputui.telemetry.source.GpuSource).

No ROCm, no libdrm: amdgpu's sysfs files and hwmon, its binary gpu_metrics, /proc's
fdinfo and KFD's sysfs, under a sysfs and procfs root that may be another machine's
(a container with the host's /sys and /proc mounted elsewhere, or a test's fake tree).
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable
from pathlib import Path

from gputui.telemetry.amd.card import CardReader
from gputui.telemetry.amd.files import DeviceGone, read_int, read_text
from gputui.telemetry.amd.processes import ProcessScanner
from gputui.telemetry.model import DeviceInfo, GpuEvent, GpuProcess, GpuSample, SystemInfo
from gputui.telemetry.source import SourceUnavailable

AMD_VENDOR_ID = 0x1002
_CARD = re.compile(r"card\d+")  # not card0-DP-1 (a connector), not renderD128
_PCI_ADDRESS = re.compile(r"[0-9a-f]{4,8}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]")


class AmdSource:
    """Every AMD GPU under `sysfs`/class/drm, in PCI bus order."""

    def __init__(self, sysfs: Path = Path("/sys"), procfs: Path = Path("/proc"), *,
                 process_every: int = 5, slow_every: int = 10,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.sysfs, self.procfs = str(sysfs), str(procfs)
        self._process_every = max(1, process_every)
        self._slow_every = max(1, slow_every)
        self.system = SystemInfo()
        self.cards: list[CardReader] = []
        self._scanner = ProcessScanner(self.procfs, self.sysfs, clock=clock)

    @property
    def count(self) -> int:
        return len(self.cards)

    @property
    def devices(self) -> tuple[DeviceInfo, ...]:
        return tuple(c.info for c in self.cards)

    @property
    def slow_every(self) -> int:
        return self._slow_every

    @property
    def process_every(self) -> int:
        return self._process_every

    # --- lifecycle -----------------------------------------------------------------------

    def open_system(self) -> None:
        """Find the AMD GPUs and the driver's version; SourceUnavailable when none."""
        drm = f"{self.sysfs}/class/drm"
        found = _amd_cards(drm)
        if not found:
            raise SourceUnavailable(f"no AMD GPU under {drm}")
        self.cards = [CardReader(i, dev, pci) for i, (pci, dev) in enumerate(found)]
        # The amdgpu module's version where it is an out-of-tree build (ROCm's DKMS
        # package writes one), else the kernel's: the in-tree driver is the kernel's.
        self.system = SystemInfo(
            amd_driver_version=(read_text(f"{self.sysfs}/module/amdgpu/version")
                                or read_text(f"{self.procfs}/sys/kernel/osrelease")))

    def open(self) -> None:
        self.open_system()
        for i in range(self.count):
            self.open_device(i)

    def open_device(self, index: int) -> DeviceInfo:
        return self.cards[index].open()

    def close(self) -> None:
        """Nothing is held open between ticks: nothing to give back."""

    # --- sampling ------------------------------------------------------------------------

    def read_device(self, index: int, *, slow: bool, processes: bool,
                    ) -> tuple[GpuSample, tuple[GpuProcess, ...] | None]:
        card = self.cards[index]
        sample = card.read(slow)
        if not processes:
            return sample, None
        if sample.lost or card.pending:
            return sample, ()
        uses = self._scanner.processes(index, card.pci)
        return sample, tuple(
            GpuProcess(gpu_index=index, pid=u.pid, gpu_mem_bytes=u.vram_bytes, kind=u.kind,
                       sm_util_pct=u.sm_util_pct) for u in uses)

    def take_events(self) -> tuple[GpuEvent, ...]:
        return ()  # amdgpu has no event stream gputui reads

    def want_detail_fields(self, on: bool) -> None:
        """Every field is read every tick already (they cost a file read each)."""

    def gpu_metrics_note(self, index: int) -> str | None:
        """Why a GPU's gpu_metrics gives nothing (an unknown or truncated layout), for a
        view to show; None while it reads (or the card has no such file)."""
        return self.cards[index].metrics_note


def _amd_cards(drm: str) -> list[tuple[str, str]]:
    """(PCI address, resolved device directory) of each AMD card, by PCI address; a card
    seen under two names is listed once."""
    try:
        names = os.listdir(drm)
    except OSError:
        return []
    cards: dict[str, str] = {}
    for name in names:
        if not _CARD.fullmatch(name):
            continue
        dev = os.path.realpath(f"{drm}/{name}/device")
        try:
            if read_int(f"{dev}/vendor", 16) != AMD_VENDOR_ID:
                continue
        except DeviceGone:
            continue
        pci = _pci_address(dev)
        if pci is not None:
            cards.setdefault(pci, dev)
    return sorted(cards.items())


def _pci_address(dev: str) -> str | None:
    """"0000:c1:00.0": the device directory's name, else its uevent's PCI_SLOT_NAME."""
    base = os.path.basename(dev).lower()
    if _PCI_ADDRESS.fullmatch(base):
        return base
    try:
        uevent = read_text(f"{dev}/uevent") or ""
    except DeviceGone:
        return None
    for line in uevent.splitlines():
        key, _, value = line.partition("=")
        if key == "PCI_SLOT_NAME" and _PCI_ADDRESS.fullmatch(value.strip().lower()):
            return value.strip().lower()
    return None
