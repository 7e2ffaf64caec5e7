"""Pod and container names from the node's own files, under --path.rootfs: no API call,
no daemon call, no new dependency.

kubelet lays out its containers' logs as

    /var/log/pods/<namespace>_<pod>_<uid>/<container>/<restart>.log
    /var/log/containers/<pod>_<namespace>_<container>-<container id>.log

(namespaces, pods and containers are DNS names: no "_" in them). Each directory is listed
once, when a name is first wanted, and listed again only when a name is missing and the
directory changed since (its mtime): a node with 10,000 pods costs one listing, not one
per tick or per process. Plain Docker names its containers in
/var/lib/docker/containers/<id>/config.v2.json ("Name"), rootful Podman in
/var/lib/containers/storage/overlay-containers/containers.json; both are read only where
this user may (root, usually) and within a size cap.

A name is text from the node's files: it is cut to MAX_NAME_CHARS, bytes that are not
UTF-8 become U+FFFD, and every view escapes what it shows (gputui.safe_text).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from pathlib import Path

from gputui.user_file import UserFileError, read_text

# Kubernetes' longest name (a DNS subdomain); no real name is longer, and no hostile one
# gets more room than this in a table, a label or a JSON field.
MAX_NAME_CHARS = 253
MAX_ENTRIES = 200_000  # entries read from one log directory (a node runs ~110 pods)
DOCKER_CONFIG_MAX_BYTES = 4 * 2**20
PODMAN_LIST_MAX_BYTES = 32 * 2**20
_LOG = re.compile(r"(.+)-([0-9a-f]{64})\.log$")
_UID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$|[0-9a-f]{32}$")


def clean_name(raw: str) -> str | None:
    """A name read from the node's files, bounded and valid text; None when empty."""
    text = raw.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
    return text[:MAX_NAME_CHARS] or None


class _Listing:
    """One directory's entries, listed again only when its mtime moved since."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._mtime: int | None = None
        self.scans = 0  # listings made (tests and docs count them)

    def changed(self) -> Iterator[str] | None:
        """The entries when the directory changed since the last listing, else None."""
        try:
            mtime = os.stat(self.path).st_mtime_ns
        except OSError:
            return None
        if mtime == self._mtime:
            return None
        self._mtime = mtime
        self.scans += 1
        return self._entries()

    def _entries(self) -> Iterator[str]:
        try:
            with os.scandir(self.path) as it:
                for n, e in enumerate(it):
                    if n >= MAX_ENTRIES:
                        break
                    yield e.name
        except OSError:
            return


class KubeletLogs:
    """Pod and container names from kubelet's log directories under `rootfs`."""

    def __init__(self, rootfs: Path = Path("/")) -> None:
        self._containers = _Listing(rootfs / "var" / "log" / "containers")
        self._pods = _Listing(rootfs / "var" / "log" / "pods")
        self._by_cid: dict[str, tuple[str | None, str | None, str | None]] = {}
        self._by_uid: dict[str, tuple[str | None, str | None]] = {}
        self._only: dict[str, str | None] = {}  # pod uid → its one container's name

    @property
    def scans(self) -> int:
        return self._containers.scans + self._pods.scans

    def container(self, cid: str) -> tuple[str | None, str | None, str | None] | None:
        """(pod, namespace, container) of a container id, from /var/log/containers."""
        found = self._by_cid.get(cid)
        if found is None and (names := self._containers.changed()) is not None:
            self._by_cid = dict(self._parse_containers(names))
            found = self._by_cid.get(cid)
        return found

    def pod(self, uid: str) -> tuple[str | None, str | None] | None:
        """(namespace, pod) of a pod uid, from /var/log/pods."""
        found = self._by_uid.get(uid)
        if found is None and (names := self._pods.changed()) is not None:
            self._by_uid = dict(self._parse_pods(names))
            found = self._by_uid.get(uid)
        return found

    def only_container(self, namespace: str | None, pod: str | None, uid: str) -> str | None:
        """The container's name when the pod's log directory holds exactly one (a process
        whose container has no /var/log/containers link)."""
        if uid in self._only:
            return self._only[uid]
        name = None
        if namespace and pod:
            d = self._pods.path / f"{namespace}_{pod}_{uid}"
            try:
                with os.scandir(d) as it:
                    dirs = [e.name for _, e in zip(range(64), it, strict=False)
                            if e.is_dir(follow_symlinks=False)]
            except OSError:
                dirs = []
            name = clean_name(dirs[0]) if len(dirs) == 1 else None
        self._only[uid] = name
        return name

    @staticmethod
    def _parse_containers(names: Iterator[str],
                          ) -> Iterator[tuple[str, tuple[str | None, str | None, str | None]]]:
        for name in names:
            m = _LOG.match(name)
            if m is None:
                continue
            parts = m.group(1).split("_")
            if len(parts) == 3:
                pod, namespace, container = (clean_name(p) for p in parts)
                yield m.group(2), (pod, namespace, container)

    @staticmethod
    def _parse_pods(names: Iterator[str]) -> Iterator[tuple[str, tuple[str | None, str | None]]]:
        for name in names:
            parts = name.split("_")
            if len(parts) == 3 and _UID.match(parts[2]):
                yield parts[2], (clean_name(parts[0]), clean_name(parts[1]))


class RuntimeNames:
    """Container names from Docker's and rootful Podman's own files under `rootfs`
    (readable by root, usually): each Docker container's config once, Podman's list
    again only when it changed and a container is missing from it."""

    def __init__(self, rootfs: Path = Path("/")) -> None:
        self._docker = rootfs / "var" / "lib" / "docker" / "containers"
        self._podman = rootfs / "var" / "lib" / "containers" / "storage" / \
            "overlay-containers" / "containers.json"
        self._docker_names: dict[str, str | None] = {}
        self._podman_names: dict[str, str | None] = {}
        self._podman_mtime: int | None = None

    def name(self, runtime: str | None, cid: str) -> str | None:
        if runtime == "docker":
            if cid not in self._docker_names:
                if len(self._docker_names) > 4096:
                    self._docker_names.clear()
                self._docker_names[cid] = self._docker_name(cid)
            return self._docker_names[cid]
        if runtime == "podman":
            if cid not in self._podman_names:
                self._read_podman()
            return self._podman_names.get(cid)
        return None

    def _docker_name(self, cid: str) -> str | None:
        try:
            doc = json.loads(read_text(self._docker / cid / "config.v2.json",
                                       DOCKER_CONFIG_MAX_BYTES))
        except (OSError, UserFileError, ValueError):
            return None
        name = doc.get("Name") if isinstance(doc, dict) else None
        return clean_name(name.lstrip("/")) if isinstance(name, str) else None

    def _read_podman(self) -> None:
        try:
            mtime = os.stat(self._podman).st_mtime_ns
        except OSError:
            return
        if mtime == self._podman_mtime:
            return
        self._podman_mtime = mtime
        try:
            doc = json.loads(read_text(self._podman, PODMAN_LIST_MAX_BYTES))
        except (OSError, UserFileError, ValueError):
            return
        names: dict[str, str | None] = {}
        for c in doc if isinstance(doc, list) else ():
            if not isinstance(c, dict) or not isinstance(c.get("id"), str):
                continue
            given = c.get("names")
            first = given[0] if isinstance(given, list) and given else None
            names[c["id"]] = clean_name(first) if isinstance(first, str) else None
        self._podman_names = names
