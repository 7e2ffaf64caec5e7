"""Fake sysfs and procfs trees with AMD GPUs in them, built from the kernel's documented
formats, for AmdSource (`AmdSource(host.sys, host.proc)`) and anything above it.

    host = FakeHost(tmp_path)
    mi300x(host, 0)                         # card0, 0000:c1:00.0
    rx7900xtx(host, 1)                      # card1, with fans and a display connector
    host.drm_client(4242, fd=5, pdev="0000:c1:00.0", client_id=7, vram="1024 KiB",
                    gfx_ns=0)
    host.kfd_process(4243, gpu_id=..., vram_bytes=...)

The tree is laid out as the kernel's: /sys/class/drm/cardN is a link into the card's PCI
device directory (/sys/devices/pci0000:00/.../0000:c1:00.0/drm/cardN), whose `device`
link leads back to it; hwmon lives in device/hwmon/hwmonM.

gpu_metrics blobs are packed with `struct` at the byte offsets of the kernel's structs,
written out here by hand (natural C alignment: u16 at even offsets, u32 at multiples of
4, u64 at multiples of 8, the size rounded up to 8), independently of the reader's ctypes
transcription; like the kernel, every byte starts as 0xFF (a field the firmware does
not fill reads as all ones).
"""

from __future__ import annotations

import errno
import os
import shutil
import struct
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import pytest

# --- gpu_metrics -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Layout:
    """A gpu_metrics struct: its revision, sizeof, and the offsets of the fields used."""

    frev: int
    crev: int
    size: int
    fields: Mapping[str, tuple[int, str]]  # name → (byte offset, struct format)


V1_3 = Layout(1, 3, 120, {
    "temperature_edge": (4, "H"), "temperature_hotspot": (6, "H"), "temperature_mem": (8, "H"),
    "average_gfx_activity": (16, "H"), "average_umc_activity": (18, "H"),
    "average_socket_power": (22, "H"), "energy_accumulator": (24, "Q"),
    "current_gfxclk": (54, "H"), "current_uclk": (58, "H"), "throttle_status": (68, "I"),
    "current_fan_speed": (72, "H"), "pcie_link_width": (74, "H"),
    "pcie_link_speed": (76, "H"), "indep_throttle_status": (112, "Q"),
})
V1_4 = Layout(1, 4, 288, {
    "temperature_hotspot": (4, "H"), "temperature_mem": (6, "H"),
    "temperature_vrsoc": (8, "H"), "curr_socket_power": (10, "H"),
    "average_gfx_activity": (12, "H"), "average_umc_activity": (14, "H"),
    "energy_accumulator": (24, "Q"), "throttle_status": (40, "I"),
    "current_gfxclk": (240, "8H"), "current_uclk": (280, "H"),
})
# v1.6 as first merged (Linux 6.11): v1.5 (per-engine activity: 4 VCN and 32 JPEG u16s
# from 16) plus residencies; a throttle_status MI300 leaves at 0.
V1_6_ENGINES = Layout(1, 6, 384, {
    "temperature_hotspot": (4, "H"), "curr_socket_power": (10, "H"),
    "average_gfx_activity": (12, "H"), "energy_accumulator": (88, "Q"),
    "accumulation_counter": (104, "I"), "prochot_residency_acc": (108, "I"),
    "ppt_residency_acc": (112, "I"), "socket_thm_residency_acc": (116, "I"),
    "vr_thm_residency_acc": (120, "I"), "hbm_thm_residency_acc": (124, "I"),
    "throttle_status": (128, "I"), "current_gfxclk": (336, "8H"), "current_uclk": (376, "H"),
})
# v1.6 with per-partition stats: no per-engine activity, no throttle status; residencies.
V1_6 = Layout(1, 6, 1664, {
    "temperature_hotspot": (4, "H"), "temperature_mem": (6, "H"),
    "curr_socket_power": (10, "H"), "average_gfx_activity": (12, "H"),
    "average_umc_activity": (14, "H"), "energy_accumulator": (16, "Q"),
    "accumulation_counter": (32, "I"), "prochot_residency_acc": (36, "I"),
    "ppt_residency_acc": (40, "I"), "socket_thm_residency_acc": (44, "I"),
    "vr_thm_residency_acc": (48, "I"), "hbm_thm_residency_acc": (52, "I"),
    "current_gfxclk": (264, "8H"), "current_uclk": (304, "H"),
})
# v1.8 = v1.7's layout (VRAM bandwidth at 16 shifts the rest by 8) with bigger
# per-partition stats: 8 × 440 bytes from 344.
V1_8 = Layout(1, 8, 3872, {
    "temperature_hotspot": (4, "H"), "temperature_mem": (6, "H"),
    "curr_socket_power": (10, "H"), "average_gfx_activity": (12, "H"),
    "average_umc_activity": (14, "H"), "mem_max_bandwidth": (16, "Q"),
    "energy_accumulator": (24, "Q"),
    "accumulation_counter": (40, "I"), "prochot_residency_acc": (44, "I"),
    "ppt_residency_acc": (48, "I"), "socket_thm_residency_acc": (52, "I"),
    "vr_thm_residency_acc": (56, "I"), "hbm_thm_residency_acc": (60, "I"),
    "current_gfxclk": (296, "8H"), "current_uclk": (336, "H"),
})


def pack(layout: Layout, *, size: int | None = None, frev: int | None = None,
         crev: int | None = None, **values: int | Iterable[int]) -> bytes:
    """A gpu_metrics blob of `layout` with `values` set and every other byte 0xFF; `size`,
    `frev` and `crev` override the header (to fake a layout gputui does not know)."""
    buf = bytearray(b"\xff" * layout.size)
    struct.pack_into("<HBB", buf, 0, layout.size if size is None else size,
                     layout.frev if frev is None else frev,
                     layout.crev if crev is None else crev)
    for name, value in values.items():
        offset, fmt = layout.fields[name]
        args = list(value) if not isinstance(value, int) else [value]
        if fmt[0].isdigit():  # an array: unset elements stay 0xFF
            n = int(fmt[:-1])
            args += [(1 << (8 * struct.calcsize(fmt[-1]))) - 1] * (n - len(args))
        struct.pack_into("<" + fmt, buf, offset, *args)
    return bytes(buf)


def gpu_metrics_v1_3(**values: int | Iterable[int]) -> bytes:
    return pack(V1_3, **values)


def gpu_metrics_v1_4(**values: int | Iterable[int]) -> bytes:
    return pack(V1_4, **values)


def gpu_metrics_v1_6(**values: int | Iterable[int]) -> bytes:
    return pack(V1_6, **values)


def gpu_metrics_v1_8(**values: int | Iterable[int]) -> bytes:
    return pack(V1_8, **values)


# SMU_THROTTLER_*_BIT of indep_throttle_status (amdgpu_smu.h)
PPT0, SPL, TDC_GFX, EDC_GFX = 0, 4, 16, 22
TEMP_GPU, TEMP_MEM, TEMP_EDGE, TEMP_HOTSPOT = 32, 34, 35, 36
TEMP_VR_GFX, VRHOT0, PROCHOT_GFX, PPM, FIT = 38, 44, 47, 56, 57


def bits(*positions: int) -> int:
    return sum(1 << p for p in positions)


# --- the tree ------------------------------------------------------------------------------


@dataclass
class FakeCard:
    """One card in a FakeHost: write its files, set its throttle state, remove it."""

    host: FakeHost
    name: str  # "card0"
    pci: str  # "0000:c1:00.0"
    dev: Path  # the PCI device directory
    layout: Layout | None = None
    metrics: dict[str, int | Iterable[int]] = field(default_factory=dict)

    @property
    def hwmon(self) -> Path:
        return self.dev / "hwmon" / "hwmon3"

    def write(self, name: str, value: str | bytes | int) -> None:
        """A file of the device directory ("ras/umc_err_count" makes ras/)."""
        _write(self.dev / name, value)

    def hwmon_write(self, name: str, value: str | bytes | int) -> None:
        _write(self.hwmon / name, value)

    def remove_file(self, name: str) -> None:
        (self.dev / name).unlink()

    def set_metrics(self, **values: int | Iterable[int]) -> None:
        """Update gpu_metrics' fields (the others keep their values)."""
        assert self.layout is not None
        self.metrics.update(values)
        self.write("gpu_metrics", pack(self.layout, **self.metrics))

    def set_throttle(self, *smu_bits: int) -> None:
        """indep_throttle_status with these SMU_THROTTLER_* bits set (a v1.3 card)."""
        self.set_metrics(indep_throttle_status=bits(*smu_bits))

    def remove(self) -> None:
        """The card is gone: its PCI directory and its class/drm link (hot-unplug)."""
        remove_card(self)


def remove_card(card: FakeCard) -> None:
    shutil.rmtree(card.dev)
    link = card.host.sys / "class" / "drm" / card.name
    if link.is_symlink():
        link.unlink()


def _write(path: Path, value: str | bytes | int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(value, bytes):
        path.write_bytes(value)
    else:
        path.write_text(f"{value}\n")


class FakeHost:
    """A machine's /sys and /proc under `root`."""

    def __init__(self, root: Path, *, kernel: str = "6.8.0-45-generic") -> None:
        self.sys = root / "sys"
        self.proc = root / "proc"
        (self.sys / "class" / "drm").mkdir(parents=True)
        _write(self.proc / "sys" / "kernel" / "osrelease", kernel)
        self.cards: list[FakeCard] = []

    def card(self, index: int, pci: str, *, vendor: int = 0x1002, device: int,
             revision: int = 0, files: Mapping[str, str | bytes | int] = {},
             hwmon: Mapping[str, str | bytes | int] = {}, layout: Layout | None = None,
             metrics: Mapping[str, int | Iterable[int]] | None = None,
             connectors: Iterable[str] = ()) -> FakeCard:
        """A card named card<index> at `pci`, with its device and hwmon files."""
        dev = self.sys / "devices" / "pci0000:00" / "0000:00:01.1" / pci
        name = f"card{index}"
        card = FakeCard(self, name, pci, dev, layout, dict(metrics or {}))
        _write(dev / "vendor", f"0x{vendor:04x}")
        _write(dev / "device", f"0x{device:04x}")
        _write(dev / "revision", f"0x{revision:02x}")
        _write(dev / "uevent", f"DRIVER=amdgpu\nPCI_SLOT_NAME={pci}")
        for key, value in files.items():
            card.write(key, value)
        _write(card.hwmon / "name", "amdgpu")
        for key, value in hwmon.items():
            card.hwmon_write(key, value)
        if layout is not None:
            card.set_metrics()
        drm = dev / "drm"
        (drm / name).mkdir(parents=True)
        os.symlink("../..", drm / name / "device")
        self.link(name, drm / name)
        render = drm / f"renderD{128 + index}"
        render.mkdir()
        os.symlink("../..", render / "device")
        self.link(render.name, render)
        for connector in connectors:  # card0-DP-1: a display output, not a GPU
            out = drm / name / f"{name}-{connector}"
            out.mkdir()
            _write(out / "status", "disconnected")
            self.link(out.name, out)
        self.cards.append(card)
        return card

    def link(self, name: str, target: Path) -> None:
        """/sys/class/drm/<name> → target, relative as the kernel's links are."""
        where = self.sys / "class" / "drm" / name
        os.symlink(os.path.relpath(target, where.parent), where)

    def drm_client(self, pid: int, *, fd: int, pdev: str, client_id: int,
                   vram: str | None = None, vram_key: str = "drm-memory-vram",
                   gfx_ns: int | None = None, compute_ns: int | None = None,
                   driver: str = "amdgpu") -> None:
        """/proc/<pid>/fd/<fd> open on a render node, and its fdinfo (amdgpu_fdinfo.c's
        format: "key:\\tvalue")."""
        fd_dir = self.proc / str(pid) / "fd"
        fd_dir.mkdir(parents=True, exist_ok=True)
        link = fd_dir / str(fd)
        if not link.is_symlink():
            os.symlink("/dev/dri/renderD128", link)
        lines = ["pos:\t0", "flags:\t02100002", f"drm-driver:\t{driver}",
                 f"drm-pdev:\t{pdev}", f"drm-client-id:\t{client_id}"]
        if vram is not None:
            lines.append(f"{vram_key}:\t{vram}")
        lines.append("drm-memory-gtt: \t2048 KiB")
        if gfx_ns is not None:
            lines.append(f"drm-engine-gfx:\t{gfx_ns} ns")
        if compute_ns is not None:
            lines.append(f"drm-engine-compute:\t{compute_ns} ns")
        _write(self.proc / str(pid) / "fdinfo" / str(fd), "\n".join(lines))

    def other_file(self, pid: int, *, fd: int, target: str = "/var/log/syslog") -> None:
        """An fd that is not a GPU's (its fdinfo must never be read)."""
        fd_dir = self.proc / str(pid) / "fd"
        fd_dir.mkdir(parents=True, exist_ok=True)
        os.symlink(target, fd_dir / str(fd))

    def end_process(self, pid: int) -> None:
        shutil.rmtree(self.proc / str(pid))

    def kfd_node(self, node: int, *, gpu_id: int, pci: str) -> None:
        """A KFD topology node for the GPU at `pci` (location_id = bus << 8 | devfn)."""
        domain, bus, devfn = pci.split(":")
        dev, fn = devfn.split(".")
        loc = int(bus, 16) << 8 | int(dev, 16) << 3 | int(fn)
        root = self.sys / "class" / "kfd" / "kfd" / "topology" / "nodes" / str(node)
        _write(root / "gpu_id", gpu_id)
        _write(root / "properties", "\n".join([
            "cpu_cores_count 0", "simd_count 1216", "vendor_id 4098", "device_id 29857",
            f"location_id {loc}", f"domain {int(domain, 16)}", "drm_render_minor 128"]))

    def kfd_cpu_node(self, node: int) -> None:
        root = self.sys / "class" / "kfd" / "kfd" / "topology" / "nodes" / str(node)
        _write(root / "gpu_id", 0)
        _write(root / "properties", "cpu_cores_count 96\nsimd_count 0")

    def kfd_process(self, pid: int, vram: Mapping[int, int]) -> None:
        """/sys/class/kfd/kfd/proc/<pid>/vram_<gpu_id> (bytes) for a ROCm process."""
        root = self.sys / "class" / "kfd" / "kfd" / "proc" / str(pid)
        _write(root / "pasid", 32770)
        for gpu_id, nbytes in vram.items():
            _write(root / f"vram_{gpu_id}", nbytes)


def deny(monkeypatch: pytest.MonkeyPatch, *paths: Path,
         err: int = errno.EACCES) -> None:
    """Reads and listings of `paths` fail with `err` (EACCES, EPERM, ...), as for another
    user's /proc entries or a runtime-suspended GPU — the tests run as root, where chmod
    would not stop a read."""
    denied = {os.fspath(p) for p in paths}
    real_open, real_listdir = os.open, os.listdir

    def guarded_open(path: object, *args: object, **kw: object) -> int:
        if os.fspath(path) in denied:  # type: ignore[call-overload]
            raise OSError(err, os.strerror(err), os.fspath(path))  # type: ignore[call-overload]
        return real_open(path, *args, **kw)  # type: ignore[arg-type]

    def guarded_listdir(path: object = ".") -> list[str]:
        if os.fspath(path) in denied:  # type: ignore[call-overload]
            raise OSError(err, os.strerror(err), os.fspath(path))  # type: ignore[call-overload]
        return real_listdir(path)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "open", guarded_open)
    monkeypatch.setattr(os, "listdir", guarded_listdir)


# --- three cards -----------------------------------------------------------------------------

GiB = 1 << 30


def mi300x(host: FakeHost, index: int = 0, pci: str = "0000:c1:00.0", *,
           layout: Layout = V1_8, **metrics: int | Iterable[int]) -> FakeCard:
    """An MI300X: no edge sensor, no fan, power1_input only, an MI300 gpu_metrics layout
    (v1.8 unless given) with residency counters instead of a throttle status."""
    values: dict[str, int | Iterable[int]] = {
        "temperature_hotspot": 71, "temperature_mem": 64, "curr_socket_power": 612,
        "average_gfx_activity": 97, "average_umc_activity": 41,
        "energy_accumulator": 3_276_800_000,  # × 2^-16 J = 50,000 J
        "current_gfxclk": [2095, 2093, 2094, 2092, 2091, 2090, 2089, 2088],
        "current_uclk": 1300,
    }
    if layout is not V1_4:
        values.update(accumulation_counter=1000, prochot_residency_acc=0,
                      ppt_residency_acc=0, socket_thm_residency_acc=0,
                      vr_thm_residency_acc=0, hbm_thm_residency_acc=0)
    values.update(metrics)
    return host.card(
        index, pci, device=0x74A1, layout=layout, metrics=values,
        files={
            "product_name": "AMD Instinct MI300X", "unique_id": "a1b2c3d4e5f60718",
            "gpu_busy_percent": 98, "mem_busy_percent": 40,
            "mem_info_vram_total": 192 * GiB, "mem_info_vram_used": 150 * GiB,
            "pp_dpm_sclk": "0: 500Mhz\n1: 2093Mhz *\n2: 2100Mhz",
            "pp_dpm_mclk": "0: 900Mhz\n1: 1100Mhz\n2: 1200Mhz\n3: 1300Mhz *",
            "current_link_speed": "32.0 GT/s PCIe", "max_link_speed": "32.0 GT/s PCIe",
            "current_link_width": 16, "max_link_width": 16,
            "ras/umc_err_count": "ue: 2\nce: 17",
        },
        hwmon={
            "temp2_input": 71000, "temp2_label": "junction", "temp2_crit": 110000,
            "temp2_emergency": 115000,
            "temp3_input": 64000, "temp3_label": "mem", "temp3_crit": 95000,
            "temp3_emergency": 105000,
            "power1_input": 612_000_000, "power1_cap": 750_000_000,
            "power1_cap_max": 750_000_000,
            "freq1_input": 2_093_000_000, "freq2_input": 1_300_000_000,
        })


def mi250x(host: FakeHost, index: int = 0, pci: str = "0000:29:00.0",
           **metrics: int | Iterable[int]) -> FakeCard:
    """One GCD of an MI250X: edge, junction and memory sensors, power1_average, no fan,
    gpu_metrics v1.3 with an indep_throttle_status, no product_name."""
    values: dict[str, int | Iterable[int]] = {
        "temperature_edge": 45, "temperature_hotspot": 58, "temperature_mem": 52,
        "average_gfx_activity": 63, "average_umc_activity": 22,
        "average_socket_power": 390, "energy_accumulator": 655_360_000,  # 10,000 J
        "current_gfxclk": 1700, "current_uclk": 1600, "indep_throttle_status": 0,
    }
    values.update(metrics)
    return host.card(
        index, pci, device=0x7408, revision=0x01, layout=V1_3, metrics=values,
        files={
            "unique_id": "38d1a2b3c4d5e6f7",
            "gpu_busy_percent": 64, "mem_busy_percent": 21,
            "mem_info_vram_total": 64 * GiB, "mem_info_vram_used": 12 * GiB,
            "pp_dpm_sclk": "0: 500Mhz\n1: 800Mhz\n2: 1700Mhz *",
            "pp_dpm_mclk": "0: 400Mhz\n1: 700Mhz\n2: 1200Mhz\n3: 1600Mhz *",
            "current_link_speed": "16.0 GT/s PCIe", "max_link_speed": "16.0 GT/s PCIe",
            "current_link_width": 16, "max_link_width": 16,
            "ras/umc_err_count": "ue: 0\nce: 3",
        },
        hwmon={
            "temp1_input": 45000, "temp1_label": "edge", "temp1_crit": 100000,
            "temp1_emergency": 105000,
            "temp2_input": 58000, "temp2_label": "junction", "temp2_crit": 110000,
            "temp2_emergency": 115000,
            "temp3_input": 52000, "temp3_label": "mem", "temp3_crit": 95000,
            "temp3_emergency": 100000,
            "power1_average": 389_000_000, "power1_cap": 500_000_000,
        })


def rx7900xtx(host: FakeHost, index: int = 0, pci: str = "0000:03:00.0",
              **metrics: int | Iterable[int]) -> FakeCard:
    """An RX 7900 XTX: fans, power1_average only, a display connector, gpu_metrics v1.3,
    no unique_id, product_name or RAS counters."""
    values: dict[str, int | Iterable[int]] = {
        "temperature_edge": 52, "temperature_hotspot": 66, "temperature_mem": 70,
        "average_gfx_activity": 35, "average_umc_activity": 18,
        "average_socket_power": 180, "energy_accumulator": 65_536_000,  # 1,000 J
        "current_gfxclk": 2400, "current_uclk": 1250, "indep_throttle_status": 0,
    }
    values.update(metrics)
    return host.card(
        index, pci, device=0x744C, revision=0xC8, layout=V1_3, metrics=values,
        connectors=("DP-1", "HDMI-A-1"),
        files={
            "gpu_busy_percent": 34, "mem_busy_percent": 17,
            "mem_info_vram_total": 24 * GiB, "mem_info_vram_used": 3 * GiB,
            "pp_dpm_sclk": "0: 500Mhz\n1: 2400Mhz *\n2: 2526Mhz",
            "pp_dpm_mclk": "0: 96Mhz\n1: 456Mhz\n2: 772Mhz\n3: 1249Mhz *",
            "current_link_speed": "16.0 GT/s PCIe", "max_link_speed": "16.0 GT/s PCIe",
            "current_link_width": 16, "max_link_width": 16,
        },
        hwmon={
            "temp1_input": 52000, "temp1_label": "edge", "temp1_crit": 100000,
            "temp1_emergency": 105000,
            "temp2_input": 66000, "temp2_label": "junction", "temp2_crit": 110000,
            "temp2_emergency": 115000,
            "temp3_input": 70000, "temp3_label": "mem", "temp3_crit": 108000,
            "temp3_emergency": 115000,
            "power1_average": 181_000_000, "power1_cap": 339_000_000,
            "pwm1": 89, "pwm1_enable": 2, "fan1_input": 1187,
            "freq1_input": 2_400_000_000, "freq2_input": 1_249_000_000,
        })


# What psutil reads of a procfs for the host's figures: copied from the real one, so the
# fake tree is a procfs as a container's bind mount of the host's is.
HOST_FILES = ("stat", "meminfo", "loadavg", "uptime", "vmstat", "cpuinfo")


def three_cards(root: Path) -> FakeHost:
    """An MI300X, an MI250X GCD and an RX 7900 XTX, a process on the MI300X, and the
    host's own procfs files: a machine to run gputui's commands against."""
    host = FakeHost(root)
    mi300x(host, 0)
    mi250x(host, 1)
    rx7900xtx(host, 2)
    host.drm_client(4242, fd=5, pdev="0000:c1:00.0", client_id=7, vram="2048 KiB", gfx_ns=0)
    for name in HOST_FILES:
        shutil.copy(f"/proc/{name}", host.proc / name)
    return host


def paths(host: FakeHost) -> list[str]:
    return ["--path.sysfs", str(host.sys), "--path.procfs", str(host.proc)]
