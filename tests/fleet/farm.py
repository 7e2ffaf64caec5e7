"""A synthetic exporter farm on loopback: N endpoints, each serving one 8-GPU host's page.

Pages are written the way `gputui export` writes them (dcgm-exporter's names and labels,
gputui's own series, AMD GPUs under AMD Device Metrics Exporter's names), built once per
host and served from memory by one asyncio loop, so a thousand endpoints cost the farm
little. A "down" host's port is bound but not listening: connecting to it is refused, as
for a machine whose exporter died. `lean` pages carry only what the fleet view and the
shipped alert rules read (the tests' Prometheus stays small); full pages carry every field
`gputui export` serves for an NVIDIA GPU (the benchmark's realistic size).

In-process (tests): `with Farm(hosts) as farm: farm.port_of[name]`. As a process (the
benchmark): `python -m tests.fleet.farm --hosts 1000 --out farm.json` writes the hosts
with their ports once it serves, and serves until SIGTERM.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import resource
import signal
import socket
import sys
import threading
from dataclasses import asdict, dataclass, field
from pathlib import Path

LOOPBACK = "127.0.0.1"
GPUS = 8
MIB = 1024 * 1024
MODEL = "NVIDIA H100 80GB HBM3"
AMD_MODEL = "AMD Instinct MI300X"
FB_TOTAL_MIB = 81559
HW_THERMAL = 0x40
HW_SLOWDOWN = 0x8
SW_POWER_CAP = 0x4
GPU_IDLE = 0x1


@dataclass(frozen=True)
class FarmHost:
    """One synthetic host. Per-GPU tuples have one entry per GPU."""

    name: str
    kind: str = "ok"  # what is wrong with it, for the report ("ok", "down", "throttling", …)
    util: tuple[float, ...] = (90.0,) * GPUS
    mem_used_mib: tuple[int, ...] = (60000,) * GPUS
    temp_c: tuple[float, ...] = tuple(60.0 + i for i in range(GPUS))  # GPU 7 the hottest
    power_w: tuple[float, ...] = (550.0,) * GPUS
    mask: tuple[int, ...] = (0,) * GPUS
    lost: tuple[int, ...] = ()  # GPU indexes
    xids: dict[int, dict[int, int]] = field(default_factory=dict)  # gpu → {xid: count}
    jobs: tuple[tuple[int, str, float], ...] = ()  # (pid, name, samples/s) on every GPU
    amd: bool = False
    down: bool = False


def _nv_labels(host: str, i: int, amd: bool = False) -> str:
    """gputui's GPU labels (on every GPU's lost and stale series, AMD's too)."""
    if amd:
        return (f'gpu="{i}",UUID="AMD-{host}-{i}",device="amd{i}",modelName="{AMD_MODEL}",'
                f'hostname="{host}",pci_bus_id="0000:{0x18 + i:02x}:00.0"')
    return (f'gpu="{i}",UUID="GPU-{host}-{i}",device="nvidia{i}",modelName="{MODEL}",'
            f'hostname="{host}",pci_bus_id="00000000:{0x18 + i:02X}:00.0",'
            f'DCGM_FI_DRIVER_VERSION="550.54.15"')


def _amd_labels(host: str, i: int) -> str:
    return (f'gpu_id="{i}",serial_number="{host}-{i}",card_model="{AMD_MODEL}",'
            f'hostname="{host}",gpu="{i}",UUID="AMD-{host}-{i}",'
            f'pci_bus_id="0000:{0x18 + i:02x}:00.0"')


# The rest of what `gputui export` serves per NVIDIA GPU (full pages only), with a
# plausible constant each.
_MORE_NV = (
    ("DCGM_FI_DEV_MEM_COPY_UTIL", 31), ("DCGM_FI_DEV_FB_RESERVED", 559),
    ("DCGM_FI_DEV_ENFORCED_POWER_LIMIT", 700), ("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", 9.1e9),
    ("DCGM_FI_DEV_MEMORY_TEMP", 58), ("DCGM_FI_DEV_MEM_CLOCK", 2619),
    ("DCGM_FI_DEV_FAN_SPEED", 0), ("DCGM_FI_DEV_PSTATE", 0),
    ("DCGM_FI_DEV_PCIE_TX_THROUGHPUT", 120000), ("DCGM_FI_DEV_PCIE_RX_THROUGHPUT", 340000),
    ("DCGM_FI_DEV_PCIE_LINK_GEN", 5), ("DCGM_FI_DEV_PCIE_LINK_WIDTH", 16),
    ("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", 0), ("DCGM_FI_DEV_ENC_UTIL", 0),
    ("DCGM_FI_DEV_DEC_UTIL", 0), ("DCGM_FI_DEV_PCIE_REPLAY_COUNTER", 0),
    ("DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL", 8.2e12),
    ("DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS", 0), ("DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", 0),
    ("DCGM_FI_DEV_ROW_REMAP_FAILURE", 0), ("DCGM_FI_DEV_RETIRED_SBE", 0),
    ("DCGM_FI_DEV_RETIRED_DBE", 0), ("DCGM_FI_DEV_RETIRED_PENDING", 0),
    ("DCGM_FI_PROF_GR_ENGINE_ACTIVE", 0.91), ("DCGM_FI_PROF_SM_ACTIVE", 0.84),
    ("DCGM_FI_PROF_SM_OCCUPANCY", 0.41), ("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", 0.52),
    ("DCGM_FI_PROF_DRAM_ACTIVE", 0.63), ("DCGM_FI_PROF_PIPE_FP64_ACTIVE", 0),
    ("DCGM_FI_PROF_PIPE_FP32_ACTIVE", 0.12), ("DCGM_FI_PROF_PIPE_FP16_ACTIVE", 0.02),
    ("DCGM_FI_PROF_PCIE_TX_BYTES", 1.2e8), ("DCGM_FI_PROF_PCIE_RX_BYTES", 3.4e8),
    ("DCGM_FI_PROF_NVLINK_TX_BYTES", 9.1e10), ("DCGM_FI_PROF_NVLINK_RX_BYTES", 9.0e10),
    ("gputui_row_remap_pending", 0),
)
_REASONS = ("sw_power_cap", "hw_slowdown", "sync_boost", "sw_thermal_slowdown",
            "hw_thermal_slowdown", "hw_power_brake_slowdown")


def page(h: FarmHost, *, lean: bool = True) -> bytes:
    """The host's metrics page, as `gputui export` would serve it."""
    out = ["gputui_up 1", f'gputui_host_cpu_percent{{hostname="{h.name}"}} 23.5',
           f'gputui_host_memory_used_bytes{{hostname="{h.name}"}} 412316860416',
           f'gputui_host_memory_total_bytes{{hostname="{h.name}"}} 2164663517184']
    for i in range(GPUS):
        nv = _nv_labels(h.name, i, h.amd)
        lost = i in h.lost
        out.append(f"gputui_gpu_lost{{{nv}}} {1 if lost else 0}")
        out.append(f"gputui_gpu_stale{{{nv}}} 0")
        if lost:
            continue
        if h.amd:
            amd = _amd_labels(h.name, i)
            out += [f"gpu_gfx_activity{{{amd}}} {h.util[i]:g}",
                    f"gpu_used_vram{{{amd}}} {h.mem_used_mib[i]}",
                    f"gpu_total_vram{{{amd}}} 196592",
                    f"gpu_package_power{{{amd}}} {h.power_w[i]:g}",
                    f"gpu_junction_temperature{{{amd}}} {h.temp_c[i]:g}",
                    f"gpu_edge_temperature{{{amd}}} {h.temp_c[i] - 10:g}",
                    f'gpu_clock{{{amd},clock_type="system"}} 2100',
                    f"gputui_clock_event_reasons{{{amd}}} {h.mask[i]}"]
            continue
        out += [f"DCGM_FI_DEV_GPU_UTIL{{{nv}}} {h.util[i]:g}",
                f"DCGM_FI_DEV_FB_USED{{{nv}}} {h.mem_used_mib[i]}",
                f"DCGM_FI_DEV_FB_FREE{{{nv}}} {FB_TOTAL_MIB - 559 - h.mem_used_mib[i]}",
                f"DCGM_FI_DEV_FB_TOTAL{{{nv}}} {FB_TOTAL_MIB}",
                f"DCGM_FI_DEV_POWER_USAGE{{{nv}}} {h.power_w[i]:g}",
                f"DCGM_FI_DEV_GPU_TEMP{{{nv}}} {h.temp_c[i]:g}",
                f"DCGM_FI_DEV_SLOWDOWN_TEMP{{{nv}}} 87",
                f"DCGM_FI_DEV_SM_CLOCK{{{nv}}} {1980 if not h.mask[i] & ~GPU_IDLE else 1410}",
                f"DCGM_FI_DEV_CLOCK_THROTTLE_REASONS{{{nv}}} {h.mask[i]}",
                f"DCGM_FI_DEV_XID_ERRORS{{{nv}}} {max(h.xids.get(i, {0: 0}))}"]
        out.append(f"gputui_throttle_episodes_total{{{nv}}} {1 if h.mask[i] > 1 else 0}")
        out += [f'gputui_throttle_seconds_total{{{nv},reason="{r}"}} 0' for r in _REASONS]
        out += [f'gputui_xid_events_total{{{nv},xid="{x}"}} {n}'
                for x, n in sorted(h.xids.get(i, {}).items())]
        if not lean:
            out += [f"{name}{{{nv}}} {v:g}" for name, v in _MORE_NV]
    for pid, job, rate in h.jobs:
        out += [f'gputui_job_samples_per_second{{pid="{pid}",job="{job}",gpu="{i}"}} {rate:g}'
                for i in range(GPUS)]
    return ("\n".join(out) + "\n").encode()


# Where each kind of host sits in every `period` hosts: spread over the names (not the
# first alphabetically), so problems-first ordering is visible.
KINDS = {3: "idle", 7: "idle_held", 11: "jobs", 17: "down", 19: "throttling", 23: "hot",
         26: "lost", 29: "xid", 31: "amd"}


def mix(n: int, *, period: int = 41, prefix: str = "node") -> list[FarmHost]:
    """`n` hosts: per `period` hosts one of each kind in KINDS, the rest busy (30-99 %).

    Deterministic: the same arguments give the same farm.
    """
    hosts = []
    width = len(str(n - 1))
    for k in range(n):
        name = f"{prefix}-{k:0{width}d}"
        util = tuple(float(30 + (k * 7 + i * 13) % 70) for i in range(GPUS))
        kind = KINDS.get(k % period, "ok")
        h = FarmHost(name, kind, util=util)
        if kind == "idle":
            h = FarmHost(name, kind, util=(0.0,) * GPUS, mem_used_mib=(0,) * GPUS,
                         power_w=(70.0,) * GPUS, mask=(GPU_IDLE,) * GPUS)
        elif kind == "idle_held":
            h = FarmHost(name, kind, util=(0.0,) * GPUS, mem_used_mib=(40960,) * GPUS,
                         power_w=(95.0,) * GPUS)
        elif kind == "jobs":
            h = FarmHost(name, kind, util=util, jobs=((4242, "llama-pretrain", 512.0),))
        elif kind == "down":
            h = FarmHost(name, kind, down=True)
        elif kind == "throttling":
            h = FarmHost(name, kind, util=util, temp_c=(62.0,) * 6 + (88.0, 89.0),
                         mask=(0,) * 6 + (HW_THERMAL, HW_THERMAL | SW_POWER_CAP))
        elif kind == "hot":
            h = FarmHost(name, kind, util=util, temp_c=(62.0,) * 7 + (86.0,))
        elif kind == "lost":
            h = FarmHost(name, kind, util=util, lost=(3,))
        elif kind == "xid":
            h = FarmHost(name, kind, util=util, xids={5: {79: 1}})
        elif kind == "amd":
            h = FarmHost(name, kind, util=util, mem_used_mib=(100000,) * GPUS, amd=True)
        hosts.append(h)
    return hosts


async def _serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                 body: bytes) -> None:
    head = (b"HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4; charset=utf-8\r\n"
            b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n")
    try:
        while True:  # keep-alive, as Prometheus scrapes
            request = await reader.readuntil(b"\r\n\r\n")
            writer.write(head + body)
            await writer.drain()
            if b"connection: close" in request.lower():
                break
    except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError):
        pass
    finally:
        writer.close()


class Farm:
    """The hosts served on 127.0.0.1, one port each, by one asyncio loop on a thread."""

    def __init__(self, hosts: list[FarmHost], *, lean: bool = True) -> None:
        self.hosts = hosts
        self.lean = lean
        self.port_of: dict[str, int] = {}
        self._held: list[socket.socket] = []  # the down hosts' ports: bound, not listening
        self._loop = asyncio.new_event_loop()
        self._servers: list[asyncio.base_events.Server] = []
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True,
                                        name="farm")

    def target(self, name: str) -> str:
        return f"{LOOPBACK}:{self.port_of[name]}"

    def __enter__(self) -> Farm:
        raise_fd_limit()
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._start(), self._loop).result(120)
        return self

    async def _start(self) -> None:
        for h in self.hosts:
            if h.down:
                s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                s.bind((LOOPBACK, 0))
                self._held.append(s)
                self.port_of[h.name] = int(s.getsockname()[1])
                continue
            body = page(h, lean=self.lean)

            async def handler(r: asyncio.StreamReader, w: asyncio.StreamWriter,
                              body: bytes = body) -> None:
                await _serve(r, w, body)

            server = await asyncio.start_server(handler, LOOPBACK, 0, backlog=64)
            self._servers.append(server)
            self.port_of[h.name] = int(server.sockets[0].getsockname()[1])

    async def _stop(self) -> None:
        for server in self._servers:
            server.close()
        for server in self._servers:
            await server.wait_closed()

    def __exit__(self, *exc: object) -> None:
        with contextlib.suppress(Exception):
            asyncio.run_coroutine_threadsafe(self._stop(), self._loop).result(30)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        for s in self._held:
            s.close()


def raise_fd_limit() -> None:
    """A thousand listening sockets need more than the usual 1,024 descriptors."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and (hard == resource.RLIM_INFINITY or soft < hard):
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--hosts", type=int, default=100)
    p.add_argument("--out", type=Path, required=True, help="JSON: the hosts and their ports")
    p.add_argument("--lean", action="store_true", help="only the series the fleet reads")
    args = p.parse_args(argv)
    hosts = mix(args.hosts)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    with Farm(hosts, lean=args.lean) as farm:
        doc = [{**asdict(h), "port": farm.port_of[h.name], "xids": None} for h in hosts]
        tmp = args.out.with_suffix(".tmp")
        tmp.write_text(json.dumps({"hosts": doc, "page_bytes": len(page(
            hosts[0], lean=args.lean))}))
        tmp.rename(args.out)
        stop.wait()
    return 0


if __name__ == "__main__":
    sys.exit(main())
