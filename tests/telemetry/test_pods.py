"""Pod, namespace, container and QoS of a GPU process, from fake procfs and rootfs trees:
each kubelet cgroup driver, each runtime, plain Docker and Podman, a host process; names
from fake kubelet log directories; missing, unreadable, forged, hostile and huge input."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from gputui.safe_text import printable
from gputui.telemetry.container import RETRY_S, CgroupRef, ContainerNames, parse_cgroup
from gputui.telemetry.host import HostSource
from gputui.telemetry.model import GpuProcess, Workload
from gputui.telemetry.pods import MAX_NAME_CHARS, clean_name
from tests.telemetry.pod_tree import (
    CID,
    POD_UID,
    Tree,
    cgroupfs_pod_v1,
    cid,
    systemd_pod,
)


class Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


@pytest.fixture
def tree(tmp_path: Path) -> Tree:
    return Tree(tmp_path)


def names(tree: Tree, clock: Clock | None = None) -> ContainerNames:
    return ContainerNames(tree.procfs, tree.rootfs, clock=clock or Clock())


def test_systemd_driver_burstable_pod_named_from_var_log_containers(tree: Tree) -> None:
    tree.process(10, systemd_pod(POD_UID, CID, qos="burstable"))
    tree.kubelet_pod("ml-team", "trainer-7f9c", POD_UID, {"pytorch": CID, "sidecar": cid(9)})
    assert names(tree).get(10, 1.0) == Workload(
        container="pytorch", container_id=CID, pod="trainer-7f9c", namespace="ml-team",
        pod_uid=POD_UID, qos="burstable")


def test_guaranteed_pod_sits_directly_under_kubepods(tree: Tree) -> None:
    tree.process(11, systemd_pod(POD_UID, CID, qos=None))
    tree.kubelet_pod("default", "infer-0", POD_UID, {"server": CID})
    w = names(tree).get(11, 1.0)
    assert w is not None and (w.pod, w.namespace, w.container, w.qos) == (
        "infer-0", "default", "server", "guaranteed")


def test_cgroupfs_driver_pod_in_a_v1_file_of_many_lines(tree: Tree) -> None:
    text = cgroupfs_pod_v1(POD_UID, CID, qos="besteffort")
    assert len(text.splitlines()) == 14
    tree.process(12, text)
    tree.kubelet_pod("batch", "sweep-3", POD_UID, {"worker": CID})
    w = names(tree).get(12, 1.0)
    assert w is not None and (w.pod, w.namespace, w.container, w.container_id, w.qos) == (
        "sweep-3", "batch", "worker", CID, "besteffort")


def test_crio_container_named_from_var_log_pods_when_it_has_no_link(tree: Tree) -> None:
    """CRI-O's scope (its conmon's scope is not the container), and only the pod's own
    log directory: the pod's one container directory names it."""
    text = (f"0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod"
            f"{POD_UID.replace('-', '_')}.slice/crio-conmon-{cid(7)}.scope\n"
            + systemd_pod(POD_UID, CID, runtime="crio"))
    tree.process(13, text)
    tree.kubelet_pod("vision", "resnet-a", POD_UID, {"train": CID}, links=False)
    w = names(tree).get(13, 1.0)
    assert w is not None and (w.pod, w.namespace, w.container, w.container_id) == (
        "resnet-a", "vision", "train", CID)
    assert parse_cgroup(text) == CgroupRef("cri-o", CID, POD_UID, "burstable")


def test_plain_docker_container_by_its_name_else_its_short_id(tree: Tree) -> None:
    tree.process(14, f"0::/system.slice/docker-{CID}.scope\n")
    tree.process(15, f"12:memory:/docker/{cid(5)}\n")
    tree.docker(CID, "bert-finetune")
    n = names(tree)
    assert n.get(14, 1.0) == Workload(container="bert-finetune", container_id=CID)
    # Its config unreadable or absent (gputui not root): the short id, as `docker ps`.
    assert n.get(15, 1.0) == Workload(container=cid(5)[:12], container_id=cid(5))


def test_podman_rootful_by_name_and_rootless_by_short_id(tree: Tree) -> None:
    tree.process(16, f"0::/machine.slice/libpod-{CID}.scope/container\n")
    tree.process(17, "0::/user.slice/user-1000.slice/user@1000.service/user.slice/"
                     f"libpod-{cid(3)}.scope/container\n")
    tree.podman({CID: "llama-serve"})
    n = names(tree)
    assert n.get(16, 1.0) == Workload(container="llama-serve", container_id=CID)
    assert n.get(17, 1.0) == Workload(container=cid(3)[:12], container_id=cid(3))


def test_a_host_process_has_no_container_and_costs_no_log_listing(tree: Tree) -> None:
    tree.process(18, "0::/user.slice/user-1000.slice/session-3.scope\n")
    tree.kubelet_pod("ml-team", "trainer-7f9c", POD_UID, {"pytorch": CID})
    n = names(tree)
    assert n.get(18, 1.0) is None
    assert n.kubelet.scans == 0


def test_a_user_cannot_name_their_own_cgroup_into_a_pod_or_docker(tree: Tree) -> None:
    """Cgroups under a user's own systemd manager are named by that user: a kubepods or
    docker name there is not believed."""
    forged = ("0::/user.slice/user-1000.slice/user@1000.service/app.slice/kubepods.slice/"
              f"kubepods-pod{POD_UID.replace('-', '_')}.slice/docker-{CID}.scope\n")
    tree.process(19, forged)
    tree.kubelet_pod("kube-system", "admin", POD_UID, {"x": CID})
    assert names(tree).get(19, 1.0) is None


def test_a_reader_in_its_own_cgroup_namespace_sees_dotdot_paths(tree: Tree) -> None:
    """A DaemonSet in a cgroup namespace of its own reads the host's /proc paths relative
    to its own cgroup."""
    u = POD_UID.replace("-", "_")
    text = (f"0::/../../kubepods-besteffort.slice/kubepods-besteffort-pod{u}.slice/"
            f"cri-containerd-{CID}.scope\n")
    assert parse_cgroup(text) == CgroupRef("containerd", CID, POD_UID, "besteffort")


def test_pod_less_and_unreadable_cases(tree: Tree) -> None:
    n = names(tree)
    assert n.get(20, 1.0) is None  # no such process (or its cgroup unreadable)
    # A pod whose log directories are not there (not mounted, or no permission): its uid
    # and QoS, the container by its short id; no pod name made up.
    tree.process(21, systemd_pod(POD_UID, CID))
    w = n.get(21, 1.0)
    assert w == Workload(container=CID[:12], container_id=CID, pod_uid=POD_UID,
                         qos="burstable")
    p = GpuProcess(0, 21, None).with_workload(w)
    assert p.pod_name == f"pod {POD_UID}"
    # A containerd container outside Kubernetes: its id only.
    tree.process(22, f"0::/system.slice/containerd.service/cri-containerd-{cid(4)}.scope\n")
    assert n.get(22, 1.0) == Workload(container=cid(4)[:12], container_id=cid(4))
    # Garbage: no container.
    tree.process(23, "\x00\xff garbage without colons\n::\n")
    assert n.get(23, 1.0) is None


def test_names_kubelet_writes_late_are_found_on_a_later_look(tree: Tree) -> None:
    """kubelet links a container's log a moment after it starts: a process first seen
    before that gets its names once they are there (looked up again every RETRY_S, not
    every tick)."""
    clock = Clock()
    n = names(tree, clock)
    tree.process(30, systemd_pod(POD_UID, CID))
    assert n.get(30, 1.0) is not None and n.get(30, 1.0).pod is None  # type: ignore[union-attr]
    tree.kubelet_pod("ml-team", "late-1", POD_UID, {"main": CID})
    clock.t += RETRY_S / 2
    assert n.get(30, 1.0).pod is None  # type: ignore[union-attr]
    clock.t += RETRY_S
    w = n.get(30, 1.0)
    assert w is not None and (w.pod, w.container) == ("late-1", "main")


def test_ten_thousand_pods_are_listed_once_and_again_only_for_a_new_container(
        tree: Tree) -> None:
    """A node's /var/log/pods with 10,000 entries: listed once for the first pod process,
    never again for other processes of known pods or for an unknown pod while the
    directory does not change, and once more when a new pod appears. (The other pods'
    entries are links here, not directories: listing reads only their names.)"""
    tree.pods_dir.mkdir(parents=True)
    for i in range(10_000):
        os.symlink("x", tree.pods_dir / f"ns{i % 50}_pod-{i}_{i:08x}-0000-4000-8000-0000000000ff")
    uid = "000004d2-0000-4000-8000-000000000000"
    tree.kubelet_pod("ns34", "pod-1234", uid, {"trainer": cid(1234)}, links=False)
    for pid in range(100, 140):
        tree.process(pid, systemd_pod(uid, cid(1234)))
    n = names(tree)
    got = {n.get(pid, 1.0) for pid in range(100, 140)}
    assert got == {Workload(container="trainer", container_id=cid(1234), pod="pod-1234",
                            namespace="ns34", pod_uid=uid, qos="burstable")}
    assert n.kubelet.scans == 1
    unknown = "eeeeeeee-0000-4000-8000-000000000000"
    tree.process(200, systemd_pod(unknown, cid(9)))  # not in the logs, nothing changed
    assert n.get(200, 1.0).pod is None  # type: ignore[union-attr]
    assert n.kubelet.scans == 1
    new_uid = "ffffffff-0000-4000-8000-000000000000"
    tree.kubelet_pod("fresh", "new-pod", new_uid, {"gpu-job": cid(7)}, links=False)
    tree.process(201, systemd_pod(new_uid, cid(7)))
    w = n.get(201, 1.0)
    assert w is not None and (w.pod, w.container) == ("new-pod", "gpu-job")
    assert n.kubelet.scans == 2


def test_hostile_and_huge_names_are_bounded_and_shown_escaped(tree: Tree) -> None:
    evil_ns = "ns\x1b[2J\x07"
    evil_pod = "p[bold]" + "\x1b]0;x" * 10
    tree.process(40, systemd_pod(POD_UID, CID))
    tree.kubelet_pod(evil_ns, evil_pod, POD_UID, {"c\u202eexe.txt": CID})
    w = names(tree).get(40, 1.0)
    assert w is not None and w.pod == evil_pod and w.namespace == evil_ns
    shown = printable(GpuProcess(0, 40, None).with_workload(w).pod_name)
    assert "\x1b" not in shown and "\x07" not in shown
    assert shown.startswith("ns\\x1b[2J\\x07/p[bold]\\x1b]0;x")
    assert printable(w.container) == "c\\u202eexe.txt"
    # A name in a JSON file has no file-name limit: cut to MAX_NAME_CHARS.
    tree.process(41, f"0::/system.slice/docker-{cid(8)}.scope\n")
    tree.docker(cid(8), "n" * 100_000)
    w = names(tree).get(41, 1.0)
    assert w is not None and w.container == "n" * MAX_NAME_CHARS
    # Bytes that are not UTF-8 become U+FFFD.
    assert clean_name(os.fsdecode(b"bad\xff")) == "bad\ufffd"
    # A cgroup file of any size is read only so far (no memory grows with it).
    tree.process(42, "1:x:/" + "a/" * 200_000)
    assert names(tree).get(42, 1.0) is None


def test_the_environment_is_never_read_for_names(tree: Tree) -> None:
    """A process's own environment names nothing (a child drops or forges it)."""
    tree.process(50, "0::/user.slice/user-1000.slice/session-3.scope\n")
    (tree.procfs / "50" / "environ").write_bytes(
        b"POD_NAME=forged\x00POD_NAMESPACE=kube-system\x00HOSTNAME=admin-pod\x00")
    assert names(tree).get(50, 1.0) is None


def test_host_source_describes_a_real_process_with_its_pod(tree: Tree) -> None:
    """The describe path end to end: a live process (this one, read by psutil) whose
    cgroup says it is in a pod, named from the fake rootfs."""
    me = os.getpid()
    tree.process(me, systemd_pod(POD_UID, CID))
    tree.kubelet_pod("ml-team", "trainer-7f9c", POD_UID, {"pytorch": CID})
    src = HostSource(procfs=tree.procfs, rootfs=tree.rootfs)
    (p,) = src.describe((GpuProcess(0, me, 2**30),))
    assert (p.pod, p.namespace, p.container, p.qos, p.pod_name) == (
        "trainer-7f9c", "ml-team", "pytorch", "burstable", "ml-team/trainer-7f9c")
    assert p.command  # psutil's facts beside
