"""Which container and Kubernetes pod a process runs in, from its /proc/PID/cgroup.

Container runtimes and kubelet name the cgroups they make (cgroup v1: one line per
hierarchy, `N:controllers:/path`; v2: `0::/path`):

    kubelet, systemd driver  /kubepods.slice/kubepods-<qos>.slice/kubepods-<qos>-pod<uid>.slice/
                             <runtime>-<id>.scope   (the uid's dashes written as "_"; a
                             guaranteed pod's slice sits directly under kubepods.slice)
    kubelet, cgroupfs driver /kubepods/<qos>/pod<uid>/<id>   (guaranteed: /kubepods/pod<uid>/<id>)
    runtimes                 cri-containerd-<id>.scope, crio-<id>.scope, docker-<id>.scope,
                             libpod-<id>.scope (Podman), /docker/<id> (cgroupfs Docker)

`<qos>` is burstable or besteffort, `<id>` 64 hex digits. A reader in a cgroup namespace of
its own sees the paths relative to its own cgroup (`/../../kubepods.slice/…`): the leading
`..` are skipped. Conmon's scopes (`crio-conmon-`, `libpod-conmon-`) are not containers.

A user names the cgroups under their own systemd manager (`user@UID.service`) as they like:
a pod or a Docker container is never believed from inside one. Only rootless Podman's
`libpod-<id>` is (a name that costs nobody anything). The names of the pod and container
come from kubelet's and the runtimes' files (gputui.telemetry.pods), never from a
process's environment (a child process drops or forges it).
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from gputui.telemetry.model import Workload
from gputui.telemetry.pods import KubeletLogs, RuntimeNames

MAX_CGROUP_BYTES = 64 * 1024  # far above any real /proc/PID/cgroup (v1: ~15 short lines)
SHORT_ID = 12  # digits of a container id shown where its name is unknown (as `docker ps`)
# A process whose pod or container name was not found yet (kubelet writes its log links
# a moment after the container starts) is looked up again this often, not every tick.
RETRY_S = 10.0
MAX_CACHED = 4096  # processes remembered; pids come and go for days

_UID = r"[0-9a-f]{8}[-_][0-9a-f]{4}[-_][0-9a-f]{4}[-_][0-9a-f]{4}[-_][0-9a-f]{12}|[0-9a-f]{32}"
# kubelet's systemd driver: kubepods-pod<uid>.slice, kubepods-burstable-pod<uid>.slice
# (also under a prefix: kind's kubelet-kubepods-…).
_POD_SLICE = re.compile(rf"(?:^|-)kubepods(?:-(burstable|besteffort))?-pod({_UID})\.slice$")
_POD_DIR = re.compile(rf"pod({_UID})$")  # kubelet's cgroupfs driver
_QOS_DIRS = ("burstable", "besteffort")
# <runtime>-<id>.scope, or <runtime>-<id> (cgroupfs Podman: /libpod_parent/libpod-<id>).
_SCOPE = re.compile(r"(cri-containerd|crio|docker|libpod)-([0-9a-f]{64})(?:\.scope)?$")
_HEX_ID = re.compile(r"[0-9a-f]{64}$")
_USER_MANAGER = re.compile(r"user@\d+\.service$")
RUNTIMES = {"cri-containerd": "containerd", "crio": "cri-o", "docker": "docker",
            "libpod": "podman"}


@dataclass(frozen=True, slots=True)
class CgroupRef:
    """What a cgroup path says: the container's runtime and id, the pod's uid and QoS."""

    runtime: str | None = None  # docker, containerd, cri-o, podman; None: not said
    container_id: str | None = None
    pod_uid: str | None = None  # with dashes, as the API server writes it
    qos: str | None = None  # guaranteed, burstable, besteffort


def _from_path(path: str) -> CgroupRef | None:
    segments = [s for s in path.split("/") if s and s != ".."]
    delegated = any(_USER_MANAGER.match(s) for s in segments)
    runtime = cid = uid = qos = None
    for i, seg in enumerate(segments):
        if (m := _SCOPE.match(seg)) is not None:
            if delegated and m.group(1) != "libpod":
                continue
            runtime, cid = RUNTIMES[m.group(1)], m.group(2)
        elif _HEX_ID.match(seg) and i and (segments[i - 1] == "docker"
                                           or _POD_DIR.match(segments[i - 1])):
            if delegated:
                continue
            runtime, cid = ("docker" if segments[i - 1] == "docker" else None), seg
        elif delegated:
            continue
        elif (m := _POD_SLICE.search(seg)) is not None:
            uid, qos = m.group(2), m.group(1) or "guaranteed"
        elif (m := _POD_DIR.match(seg)) is not None and i and (
                segments[i - 1] == "kubepods"
                or (segments[i - 1] in _QOS_DIRS and i > 1 and segments[i - 2] == "kubepods")):
            uid = m.group(1)
            qos = segments[i - 1] if segments[i - 1] in _QOS_DIRS else "guaranteed"
    if cid is None and uid is None:
        return None
    if uid is not None and len(uid) > 32:
        uid = uid.replace("_", "-")
    return CgroupRef(runtime, cid, uid, qos)


def parse_cgroup(text: str) -> CgroupRef | None:
    """The container and pod named by a /proc/PID/cgroup text (any number of v1 lines, or
    v2's one), None for a process on the host. Of several lines, the one that says the
    most (a pod and a container, then a container) wins."""
    best: CgroupRef | None = None
    best_score = 0
    for line in text.splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        ref = _from_path(parts[2])
        if ref is None:
            continue
        score = 2 * (ref.container_id is not None) + (ref.pod_uid is not None)
        if score > best_score:
            best, best_score = ref, score
    return best


class ContainerNames:
    """Each GPU process's Workload: its cgroup read once per process (a pid's cgroup does
    not change while it lives; its start time tells a reused pid from the old one), the
    names looked up in kubelet's and the runtimes' files under `rootfs`, which are read
    once and read again only when a container they do not name appears."""

    def __init__(self, procfs: Path = Path("/proc"), rootfs: Path = Path("/"), *,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._proc = procfs
        self._clock = clock
        self.kubelet = KubeletLogs(rootfs)
        self.runtimes = RuntimeNames(rootfs)
        # (pid, start) → (its Workload or None, when to look its names up again or None)
        self._cache: dict[tuple[int, float | None],
                          tuple[CgroupRef | None, Workload | None, float | None]] = {}

    def get(self, pid: int, started: float | None) -> Workload | None:
        key = (pid, started)
        now = self._clock()
        cached = self._cache.get(key)
        if cached is not None:
            ref, known, retry_at = cached
            if retry_at is None or now < retry_at:
                return known
        else:
            if len(self._cache) > MAX_CACHED:
                self._cache.clear()
            try:
                with open(self._proc / str(pid) / "cgroup", "rb") as f:
                    raw = f.read(MAX_CGROUP_BYTES)
            except OSError:
                return None  # gone, or not ours to read: unknown, asked again next time
            ref = parse_cgroup(raw.decode("utf-8", "replace"))
        known = self._name(ref)
        self._cache[key] = (ref, known, now + RETRY_S if _unnamed(ref, known) else None)
        return known

    def _name(self, ref: CgroupRef | None) -> Workload | None:
        if ref is None:
            return None
        pod = namespace = container = None
        cid = ref.container_id
        if cid is not None:
            found = self.kubelet.container(cid)
            if found is not None:
                pod, namespace, container = found
            elif ref.pod_uid is None:
                container = self.runtimes.name(ref.runtime, cid)
        if ref.pod_uid is not None and pod is None:
            in_pod = self.kubelet.pod(ref.pod_uid)
            if in_pod is not None:
                namespace, pod = in_pod
                if container is None and cid is not None:
                    container = self.kubelet.only_container(namespace, pod, ref.pod_uid)
        if container is None and cid is not None:
            container = short_id(cid)
        return Workload(container=container, container_id=cid, pod=pod, namespace=namespace,
                        pod_uid=ref.pod_uid, qos=ref.qos)


def _unnamed(ref: CgroupRef | None, w: Workload | None) -> bool:
    """True when a name that could be known is not yet: the pod's, or the container's in
    a pod or under Docker or Podman (a plain containerd container has only its id)."""
    if ref is None or w is None:
        return False
    if w.pod_uid is not None and w.pod is None:
        return True
    return (w.container_id is not None and w.container == short_id(w.container_id)
            and (w.pod_uid is not None or ref.runtime in ("docker", "podman")))


def short_id(cid: str) -> str:
    return cid[:SHORT_ID]
