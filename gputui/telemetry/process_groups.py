"""GPU processes grouped by user, container or pod, with their totals: what the process
table shows when grouped (`g`). Pure: the same records in, the same groups out."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from gputui.telemetry.model import GpuProcess

GROUP_BY = ("user", "container", "pod")


@dataclass(frozen=True, slots=True)
class ProcessGroup:
    """One user's, container's or pod's GPU processes, summed. `name` None: the
    processes with none (host processes, for containers and pods; an unknown user)."""

    by: str
    key: str  # tells groups apart (a container's id, a pod's uid, a user's name)
    name: str | None
    processes: int
    gpus: tuple[int, ...]
    gpu_mem_bytes: int | None
    sm_util_pct: int | None  # summed over its processes (on several GPUs: over 100)
    power_w: float | None
    energy_j: float | None
    energy_estimate: bool  # some of its energy is an estimate


def _key_and_name(by: str) -> Callable[[GpuProcess], tuple[str, str | None]]:
    if by == "user":
        return lambda p: (p.user or "", p.user)
    if by == "container":
        return lambda p: (p.container_id or p.container or "", p.container)
    if by == "pod":
        return lambda p: (p.pod_uid or p.pod_name or "", p.pod_name)
    raise ValueError(f"unknown grouping {by!r} (known: {', '.join(GROUP_BY)})")


def _sum(values: Iterable[float | int | None]) -> float | None:
    known = [v for v in values if v is not None]
    return sum(known) if known else None


def group_processes(procs: Iterable[GpuProcess], by: str) -> tuple[ProcessGroup, ...]:
    """The groups in the order their first process comes."""
    key_of = _key_and_name(by)
    members: dict[str, list[GpuProcess]] = {}
    names: dict[str, str | None] = {}
    for p in procs:
        key, name = key_of(p)
        members.setdefault(key, []).append(p)
        names.setdefault(key, name)
    out = []
    for key, ps in members.items():
        mem = _sum(p.gpu_mem_bytes for p in ps)
        sm = _sum(p.sm_util_pct for p in ps)
        out.append(ProcessGroup(
            by=by, key=key, name=names[key], processes=len(ps),
            gpus=tuple(sorted({p.gpu_index for p in ps})),
            gpu_mem_bytes=None if mem is None else int(mem),
            sm_util_pct=None if sm is None else int(sm),
            power_w=_sum(p.power_w for p in ps), energy_j=_sum(p.energy_j for p in ps),
            energy_estimate=any(p.energy_estimate for p in ps)))
    return tuple(out)


@dataclass(frozen=True, slots=True)
class GpuOwner:
    """The one pod every process on a GPU belongs to (dcgm-exporter's labels): its name,
    namespace and, where they all run in one container, that container's name."""

    pod: str
    namespace: str
    container: str | None


def gpu_owners(procs: Iterable[GpuProcess]) -> dict[int, GpuOwner]:
    """GPU index → its owner, for each GPU whose processes are all in one named pod (a
    GPU with no process, or one process outside it, has none)."""
    by_gpu: dict[int, list[GpuProcess]] = {}
    for p in procs:
        by_gpu.setdefault(p.gpu_index, []).append(p)
    out = {}
    for index, ps in by_gpu.items():
        first = ps[0]
        if first.pod is None:
            continue
        if any((p.namespace, p.pod) != (first.namespace, first.pod) for p in ps):
            continue
        containers = {p.container for p in ps}
        out[index] = GpuOwner(first.pod, first.namespace or "",
                              first.container if len(containers) == 1 else None)
    return out
