"""Which container a process runs in, from its /proc/PID/cgroup.

Container runtimes put the container id in the cgroup path: Docker
(`/docker/<id>` or `docker-<id>.scope`), containerd (`cri-containerd-<id>.scope`,
`/containerd/<id>`), CRI-O (`crio-<id>.scope`), Podman (`libpod-<id>.scope`), and
Kubernetes adds the pod (`kubepods-…-pod<uid>.slice` or `/kubepods/…/pod<uid>/`). The
name is shown as `<runtime>:<first 12 hex digits>`, with ` pod <uid>` where Kubernetes
is visible; a process on the host has no container (None).
"""

from __future__ import annotations

import re
from pathlib import Path

_RUNTIMES = (
    ("docker", re.compile(r"(?:/docker/|docker-)([0-9a-f]{64})")),
    ("containerd", re.compile(r"(?:cri-containerd-|/containerd/)([0-9a-f]{64})")),
    ("cri-o", re.compile(r"crio-(?:conmon-)?([0-9a-f]{64})")),
    ("podman", re.compile(r"libpod-(?:conmon-)?([0-9a-f]{64})")),
    # cgroup v1 Kubernetes without a runtime prefix: /kubepods/<qos>/pod<uid>/<id>
    ("container", re.compile(r"/kubepods[^\n]*/pod[0-9a-f_-]{36}/([0-9a-f]{64})")),
)
_POD = re.compile(r"pod([0-9a-f]{8}[-_][0-9a-f]{4}[-_][0-9a-f]{4}[-_][0-9a-f]{4}[-_][0-9a-f]{12})")


def container_from_cgroup(text: str) -> str | None:
    """The container named by a /proc/PID/cgroup text, or None for a host process."""
    name = None
    for runtime, pattern in _RUNTIMES:
        m = pattern.search(text)
        if m:
            name = f"{runtime}:{m.group(1)[:12]}"
            break
    pod = _POD.search(text)
    if pod:
        uid = pod.group(1).replace("_", "-")
        return f"{name} pod {uid}" if name else f"pod {uid}"
    return name


class ContainerNames:
    """Looks each process up once (a pid's cgroup does not change while it lives; the
    start time tells a reused pid from the old one)."""

    def __init__(self, proc: Path = Path("/proc")) -> None:
        self._proc = proc
        self._cache: dict[tuple[int, float | None], str | None] = {}

    def get(self, pid: int, started: float | None) -> str | None:
        key = (pid, started)
        if key not in self._cache:
            if len(self._cache) > 4096:  # bounded: pids come and go for days
                self._cache.clear()
            try:
                text = (self._proc / str(pid) / "cgroup").read_text(errors="replace")
            except OSError:
                return None  # gone, or not ours to read: unknown, asked again next time
            self._cache[key] = container_from_cgroup(text)
        return self._cache[key]
