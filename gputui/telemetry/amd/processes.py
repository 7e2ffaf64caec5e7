"""Which processes use an AMD GPU: their VRAM and their share of its time.

Two kernel sources, no library:
- DRM clients, from /proc/PID/fdinfo/FD of each fd open on /dev/dri/* whose
  `drm-driver` is amdgpu (Documentation/gpu/drm-usage-stats.rst; amdgpu_fdinfo.c):
  `drm-pdev` says which GPU; `drm-client-id` names the client, which may be open on
  several fds and, after a fork, in several processes — each client is counted once, for
  the lowest pid that holds it; VRAM from `drm-resident-vram`, else `drm-memory-vram`,
  else `drm-total-vram` (bytes, KiB, MiB or GiB); busy time from `drm-engine-gfx` plus
  `drm-engine-compute` (ns, cumulative). A process's GPU % is that time's growth over
  the wall time between two readings (None on the first), at most 100.
- ROCm/HIP processes, from /sys/class/kfd/kfd/proc/PID/vram_<gpu_id> (bytes; the gpu_id
  is a KFD topology node's, whose `properties` give its PCI domain and location). KFD's
  compute queues bypass the DRM scheduler: their busy time shows in no fdinfo, so such a
  process's GPU % is None unless its fdinfo time grew.

Cost: one pass over /proc per process reading, shared by all the source's GPUs — each
process's fd directory (a readlink per fd, to keep only /dev/dri files: no fdinfo is
opened for the others), then those fds' fdinfo. Other users' processes answer EACCES
and are skipped, as are processes that exit mid-pass.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from gputui.telemetry.amd.files import DeviceGone, read_text

_UNITS = {"": 1, "B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}
_VRAM_KEYS = ("drm-resident-vram", "drm-memory-vram", "drm-total-vram")


@dataclass(frozen=True, slots=True)
class ProcUse:
    """One process on one GPU."""

    pid: int
    vram_bytes: int | None
    sm_util_pct: int | None
    kind: str  # "compute", "graphics" or "compute+graphics"


@dataclass(frozen=True, slots=True)
class DrmClient:
    """One amdgpu client as its fdinfo describes it."""

    pdev: str  # "0000:c1:00.0"
    client_id: int
    vram_bytes: int | None
    gfx_ns: int
    compute_ns: int


def parse_fdinfo(text: str) -> DrmClient | None:
    """The amdgpu client an fdinfo file describes; None for another driver's file, or
    one without the device or client id."""
    kv: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep:
            kv[key.strip()] = value.strip()
    if kv.get("drm-driver") != "amdgpu":
        return None
    pdev = kv.get("drm-pdev", "").lower()
    client = _number(kv.get("drm-client-id"))
    if not pdev or client is None:
        return None
    vram = next((v for v in (_size(kv.get(k)) for k in _VRAM_KEYS) if v is not None), None)
    return DrmClient(pdev=pdev, client_id=client, vram_bytes=vram,
                     gfx_ns=_ns(kv.get("drm-engine-gfx")),
                     compute_ns=_ns(kv.get("drm-engine-compute")))


def _number(text: str | None) -> int | None:
    try:
        return int(text) if text is not None else None
    except ValueError:
        return None


def _size(text: str | None) -> int | None:
    """"4096 KiB" → 4194304 bytes; a bare number is bytes."""
    if text is None:
        return None
    number, _, unit = text.partition(" ")
    n, mult = _number(number), _UNITS.get(unit.strip())
    return None if n is None or mult is None else n * mult


def _ns(text: str | None) -> int:
    number, _, unit = (text or "").partition(" ")
    n = _number(number)
    return n if n is not None and unit.strip() in ("ns", "") else 0


def _read(path: str) -> str | None:
    try:
        return read_text(path)
    except DeviceGone:
        return None


@dataclass
class _Scan:
    at: float
    by_pdev: dict[str, list[ProcUse]]
    consumed: set[int] = field(default_factory=set)


@dataclass
class _PidUse:
    vram: int | None = None
    pct: float | None = None  # None until one of its clients has a previous reading
    grew: bool = False  # its busy time grew since the previous reading
    gfx: bool = False
    compute: bool = False


class ProcessScanner:
    """The process pass, shared by a source's GPU readers (each on its own thread): the
    first GPU to ask in a round scans, the others of that round take the same pass. A
    GPU that asks again starts the next round; so does any ask once the pass is older
    than `reuse_s`."""

    def __init__(self, procfs: str, sysfs: str, *, clock: Callable[[], float] = time.monotonic,
                 reuse_s: float = 1.0) -> None:
        self.procfs, self.sysfs = procfs, sysfs
        self.clock, self.reuse_s = clock, reuse_s
        self._lock = threading.Lock()
        self._scan: _Scan | None = None
        # (pdev, client id) → (busy ns, clock when read): the previous pass's readings
        self._busy: dict[tuple[str, int], tuple[int, float]] = {}
        self._topology: dict[int, str] = {}  # KFD gpu_id → pdev

    def processes(self, consumer: int, pdev: str) -> list[ProcUse]:
        with self._lock:
            now = self.clock()
            scan = self._scan
            if scan is None or consumer in scan.consumed or now - scan.at > self.reuse_s:
                scan = self._scan = self._pass(now)
            scan.consumed.add(consumer)
            return scan.by_pdev.get(pdev.lower(), [])

    # --- one pass ------------------------------------------------------------------------

    def _pass(self, now: float) -> _Scan:
        uses: dict[str, dict[int, _PidUse]] = {}
        busy: dict[tuple[str, int], tuple[int, float]] = {}
        seen: set[tuple[str, int]] = set()
        for pid in self._pids():
            for client in self._drm_clients(pid):
                key = (client.pdev, client.client_id)
                if key in seen:
                    continue  # another fd of that client, or a forked child's copy
                seen.add(key)
                use = uses.setdefault(client.pdev, {}).setdefault(pid, _PidUse())
                if client.vram_bytes is not None:
                    use.vram = (use.vram or 0) + client.vram_bytes
                use.gfx |= client.gfx_ns > 0
                use.compute |= client.compute_ns > 0
                ns = client.gfx_ns + client.compute_ns
                prev = self._busy.get(key)
                if prev is not None and now > prev[1]:
                    # drm-usage-stats: a value lower than the last one stands for it.
                    grown = max(0, ns - prev[0])
                    use.pct = (use.pct or 0.0) + grown * 100.0 / ((now - prev[1]) * 1e9)
                    use.grew |= grown > 0
                    ns = max(ns, prev[0])
                busy[key] = (ns, now)
        self._busy = busy
        kfd = self._kfd_vram()
        by_pdev: dict[str, list[ProcUse]] = {}
        for pdev in sorted(set(uses) | set(kfd)):
            drm, rocm = uses.get(pdev, {}), kfd.get(pdev, {})
            out = []
            for pid in sorted(set(drm) | set(rocm)):
                out.append(_record(pid, drm.get(pid), rocm.get(pid)))
            by_pdev[pdev] = out
        return _Scan(at=now, by_pdev=by_pdev)

    def _pids(self) -> list[int]:
        try:
            names = os.listdir(self.procfs)
        except OSError:
            return []
        return sorted(int(n) for n in names if n.isdigit())

    def _drm_clients(self, pid: int) -> Iterator[DrmClient]:
        fd_dir = f"{self.procfs}/{pid}/fd"
        try:
            fds = os.listdir(fd_dir)
        except OSError:  # exited, or another user's (EACCES)
            return
        for fd in fds:
            try:
                target = os.readlink(f"{fd_dir}/{fd}")
            except OSError:
                continue
            if not target.startswith("/dev/dri/"):
                continue
            text = _read(f"{self.procfs}/{pid}/fdinfo/{fd}")
            client = parse_fdinfo(text) if text else None
            if client is not None:
                yield client

    def _kfd_vram(self) -> dict[str, dict[int, int]]:
        """pdev → pid → VRAM bytes of the processes KFD knows (ROCm/HIP)."""
        root = f"{self.sysfs}/class/kfd/kfd/proc"
        try:
            pids = sorted(int(n) for n in os.listdir(root) if n.isdigit())
        except OSError:
            return {}
        out: dict[str, dict[int, int]] = {}
        for pid in pids:
            try:
                names = os.listdir(f"{root}/{pid}")
            except OSError:
                continue
            for name in names:
                gpu_id = _number(name.removeprefix("vram_")) if name.startswith("vram_") \
                    else None
                if gpu_id is None:
                    continue
                vram = _number(_read(f"{root}/{pid}/{name}"))
                pdev = self._pdev_of(gpu_id)
                if vram is not None and pdev is not None:
                    per_pid = out.setdefault(pdev, {})
                    per_pid[pid] = per_pid.get(pid, 0) + vram
        return out

    def _pdev_of(self, gpu_id: int) -> str | None:
        if gpu_id not in self._topology:
            self._topology = self._read_topology()  # a GPU KFD added since: read again
        return self._topology.get(gpu_id)

    def _read_topology(self) -> dict[int, str]:
        root = f"{self.sysfs}/class/kfd/kfd/topology/nodes"
        try:
            nodes = os.listdir(root)
        except OSError:
            return {}
        out: dict[int, str] = {}
        for node in nodes:
            gpu_id = _number(_read(f"{root}/{node}/gpu_id"))
            if not gpu_id:
                continue  # a CPU node
            props: dict[str, int | None] = {}
            for line in (_read(f"{root}/{node}/properties") or "").splitlines():
                key, _, value = line.partition(" ")
                props[key] = _number(value.strip())
            loc, domain = props.get("location_id"), props.get("domain")
            if loc is not None:
                # location_id is the PCI bus << 8 | device << 3 | function
                out[gpu_id] = (f"{domain or 0:04x}:{loc >> 8 & 0xFF:02x}:"
                               f"{loc >> 3 & 0x1F:02x}.{loc & 7}")
        return out


def _record(pid: int, drm: _PidUse | None, kfd_vram: int | None) -> ProcUse:
    if drm is None:
        return ProcUse(pid=pid, vram_bytes=kfd_vram, sm_util_pct=None, kind="compute")
    pct = None if drm.pct is None else min(100, round(drm.pct))
    if kfd_vram is not None:
        # A ROCm process: its kernels run on KFD queues fdinfo does not time, so an
        # unchanged fdinfo time says nothing. Its VRAM is whichever side counts more
        # (newer kernels count KFD buffers in fdinfo too: never both).
        return ProcUse(pid=pid, vram_bytes=max(drm.vram or 0, kfd_vram),
                       sm_util_pct=pct if drm.grew else None, kind="compute")
    kind = ("compute+graphics" if drm.gfx and drm.compute
            else "compute" if drm.compute else "graphics")
    return ProcUse(pid=pid, vram_bytes=drm.vram, sm_util_pct=pct, kind=kind)
