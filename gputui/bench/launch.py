"""Where the ranks of a distributed training benchmark come from, and how they meet.

Three ways, one plan:
- `--nproc P` on one machine: the worker spawns P ranks that meet on 127.0.0.1.
- `--nnodes N --node-rank R --rdzv-endpoint HOST:PORT --nproc P`: gputui is started once
  per node; each worker spawns its P ranks, numbered R·P … R·P+P−1 of N·P. Global rank 0
  (node 0) listens at HOST:PORT. The default endpoint is 127.0.0.1: nothing listens on
  a public address unless told to.
- Started by `torchrun` or Slurm's `srun`: each worker IS one rank; it reads the
  launcher's environment (RANK/WORLD_SIZE/LOCAL_RANK/MASTER_ADDR/MASTER_PORT, or
  SLURM_PROCID/SLURM_NTASKS/SLURM_LOCALID with the endpoint from MASTER_ADDR/PORT or
  --rdzv-endpoint).

Torch-free: the CLI validates with it, the worker plans with it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from gputui.errors import UsageError

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 29500


def parse_endpoint(text: str) -> tuple[str, int]:
    """"HOST:PORT" (IPv6 as [ADDR]:PORT) → (host, port); UsageError says what is wrong."""
    host, sep, port_text = text.rpartition(":")
    host = host.strip("[]")
    if not sep or not host or not port_text.isdigit() or not 0 < int(port_text) < 65536:
        raise UsageError(f"bad rendezvous endpoint {text!r} (use HOST:PORT, e.g. "
                         f"{DEFAULT_HOST}:{DEFAULT_PORT})")
    return host, int(port_text)


@dataclass(frozen=True)
class Plan:
    world: int  # ranks in all
    local: int  # ranks this worker runs (spawned), or 1 under a launcher
    node_rank: int
    nnodes: int
    host: str
    port: int | None  # None: a free port on 127.0.0.1 (one machine)
    launcher: str | None = None  # "torchrun" or "srun": this worker is one rank
    rank: int | None = None  # under a launcher: this worker's global rank
    local_rank: int = 0

    def global_rank(self, local_rank: int) -> int:
        return self.rank if self.rank is not None else self.node_rank * self.local + local_rank

    @property
    def endpoint(self) -> str:
        return f"{self.host}:{self.port}" if self.port is not None else f"{self.host}:(free)"

    def to_settings(self) -> dict[str, Any]:
        return {"world_size": self.world, "nnodes": self.nnodes, "node_rank": self.node_rank,
                "nproc_per_node": self.local if self.launcher is None else None,
                "rdzv_endpoint": self.endpoint, "launcher": self.launcher or "gputui"}


def _int_env(env: Mapping[str, str], key: str) -> int | None:
    v = env.get(key)
    return int(v) if v is not None and v.strip().isdigit() else None


def from_launcher(env: Mapping[str, str], rdzv_endpoint: str | None = None) -> Plan | None:
    """The plan when torchrun or srun started this worker as one rank; else None."""
    rank, world = _int_env(env, "RANK"), _int_env(env, "WORLD_SIZE")
    launcher = "torchrun"
    local = _int_env(env, "LOCAL_RANK")
    if rank is None or world is None:
        rank, world = _int_env(env, "SLURM_PROCID"), _int_env(env, "SLURM_NTASKS")
        local = _int_env(env, "SLURM_LOCALID")
        launcher = "srun"
    if rank is None or world is None or world < 2:
        return None
    if env.get("MASTER_ADDR") and _int_env(env, "MASTER_PORT"):
        host, port = env["MASTER_ADDR"], int(env["MASTER_PORT"])
    elif rdzv_endpoint:
        host, port = parse_endpoint(str(rdzv_endpoint))
    else:
        raise UsageError(f"started by {launcher} but no rendezvous: set MASTER_ADDR and "
                         "MASTER_PORT or pass --rdzv-endpoint HOST:PORT")
    nodes = _int_env(env, "SLURM_NNODES") or _int_env(env, "GROUP_WORLD_SIZE") or 1
    node = _int_env(env, "SLURM_NODEID") or _int_env(env, "GROUP_RANK") or 0
    return Plan(world=world, local=1, node_rank=node, nnodes=nodes, host=host, port=port,
                launcher=launcher, rank=rank, local_rank=local or 0)


def plan(env: Mapping[str, str], *, nproc: int = 1, nnodes: int = 1, node_rank: int = 0,
         rdzv_endpoint: str | None = None) -> Plan | None:
    """How this worker's ranks are laid out (the run request's --nproc, --nnodes,
    --node-rank, --rdzv-endpoint); None for a single-process run."""
    found = from_launcher(env, rdzv_endpoint)
    if found is not None:
        return found
    if nproc * nnodes < 2:
        return None
    if rdzv_endpoint:
        host, port = parse_endpoint(str(rdzv_endpoint))
        return Plan(nproc * nnodes, nproc, node_rank, nnodes, host, port)
    if nnodes > 1:
        return Plan(nproc * nnodes, nproc, node_rank, nnodes, DEFAULT_HOST, DEFAULT_PORT)
    return Plan(nproc, nproc, 0, 1, DEFAULT_HOST, None)


def launched(env: Mapping[str, str]) -> bool:
    """torchrun or srun with more than one task started this process."""
    for rank_key, world_key in (("RANK", "WORLD_SIZE"), ("SLURM_PROCID", "SLURM_NTASKS")):
        if _int_env(env, rank_key) is not None and (_int_env(env, world_key) or 0) > 1:
            return True
    return False


def scaling(total: float | None, world: int, baseline_value: float | None,
            baseline_world: int | None) -> float | None:
    """Scaling efficiency: total throughput ÷ (ranks × the baseline's per-process
    throughput). 1.0 is perfect; None without a baseline."""
    if total is None or not baseline_value or baseline_value <= 0 or world < 1:
        return None
    per_process = baseline_value / max(1, baseline_world or 1)
    return total / (world * per_process)
