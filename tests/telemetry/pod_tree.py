"""Fake procfs and rootfs trees for pod and container naming: /proc/PID/cgroup as each
runtime and kubelet driver writes it, kubelet's log directories, Docker's and Podman's
own files."""

from __future__ import annotations

import json
from pathlib import Path

POD_UID = "1a2b3c4d-5e6f-4a8b-9c0d-1e2f3a4b5c6d"
CID = "ab12" * 16  # a container id (64 hex digits)


def cid(n: int) -> str:
    return f"{n:064x}"


def systemd_pod(uid: str, container_id: str, *, qos: str | None = "burstable",
                runtime: str = "cri-containerd") -> str:
    """cgroup v2, kubelet's systemd driver; qos None: a guaranteed pod (no QoS slice)."""
    u = uid.replace("-", "_")
    if qos is None:
        return (f"0::/kubepods.slice/kubepods-pod{u}.slice/"
                f"{runtime}-{container_id}.scope\n")
    return (f"0::/kubepods.slice/kubepods-{qos}.slice/kubepods-{qos}-pod{u}.slice/"
            f"{runtime}-{container_id}.scope\n")


def cgroupfs_pod_v1(uid: str, container_id: str, qos: str = "besteffort") -> str:
    """cgroup v1 (one line per hierarchy), kubelet's cgroupfs driver."""
    controllers = ["cpuset", "cpu,cpuacct", "blkio", "memory", "devices", "freezer",
                   "net_cls,net_prio", "perf_event", "hugetlb", "pids", "rdma", "misc"]
    lines = [f"{i + 1}:{c}:/kubepods/{qos}/pod{uid}/{container_id}"
             for i, c in enumerate(controllers)]
    lines.append(f"0::/kubepods/{qos}/pod{uid}/{container_id}")
    return "\n".join(["13:name=systemd:/", *lines]) + "\n"


class Tree:
    """`procfs` and `rootfs` under a temporary directory."""

    def __init__(self, base: Path) -> None:
        self.procfs = base / "proc"
        self.rootfs = base / "root"
        self.procfs.mkdir()
        self.rootfs.mkdir()

    def process(self, pid: int, cgroup: str) -> None:
        (self.procfs / str(pid)).mkdir()
        (self.procfs / str(pid) / "cgroup").write_text(cgroup)

    @property
    def pods_dir(self) -> Path:
        return self.rootfs / "var" / "log" / "pods"

    @property
    def containers_dir(self) -> Path:
        return self.rootfs / "var" / "log" / "containers"

    def kubelet_pod(self, namespace: str, pod: str, uid: str, containers: dict[str, str],
                    *, links: bool = True) -> None:
        """kubelet's log layout for a pod: its directory with one per container, and
        (`links`) the /var/log/containers link of each (container name → id)."""
        d = self.pods_dir / f"{namespace}_{pod}_{uid}"
        for name, container_id in containers.items():
            (d / name).mkdir(parents=True)
            (d / name / "0.log").write_text("")
            if links:
                self.containers_dir.mkdir(parents=True, exist_ok=True)
                (self.containers_dir / f"{pod}_{namespace}_{name}-{container_id}.log"
                 ).symlink_to(d / name / "0.log")

    def docker(self, container_id: str, name: str) -> None:
        d = self.rootfs / "var" / "lib" / "docker" / "containers" / container_id
        d.mkdir(parents=True)
        (d / "config.v2.json").write_text(json.dumps({"ID": container_id, "Name": f"/{name}",
                                                      "Config": {"Env": ["A=1"] * 50}}))

    def podman(self, entries: dict[str, str]) -> None:
        d = self.rootfs / "var" / "lib" / "containers" / "storage" / "overlay-containers"
        d.mkdir(parents=True, exist_ok=True)
        (d / "containers.json").write_text(json.dumps(
            [{"id": i, "names": [n], "image": "x"} for i, n in entries.items()]))
