"""Reading the kernel's small files: one open and one read each, nothing kept open between
ticks, and every failure None — a missing file is a field the card lacks, EACCES/EPERM
is a file this user may not read (or a runtime-suspended dGPU that newer kernels will
not wake for a read), garbage is N/A. Only ENODEV, a device that is gone, is raised."""

from __future__ import annotations

import errno
import os


class DeviceGone(Exception):
    """A read answered ENODEV: the device has been removed."""


# sysfs attributes are at most a page; fdinfo and gpu_metrics (3,872 bytes for v1.8) fit.
_LIMIT = 1 << 16


def read_bytes(path: str) -> bytes | None:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError as exc:
        return _failed(exc)
    try:
        return os.read(fd, _LIMIT)
    except OSError as exc:
        return _failed(exc)
    finally:
        os.close(fd)


def _failed(exc: OSError) -> None:
    if exc.errno == errno.ENODEV:
        raise DeviceGone(str(exc)) from exc
    return None


def read_text(path: str) -> str | None:
    raw = read_bytes(path)
    if raw is None:
        return None
    text = raw.decode("utf-8", "replace").strip()
    return text or None


def read_int(path: str, base: int = 10) -> int | None:
    text = read_text(path)
    if text is None:
        return None
    try:
        return int(text, base)
    except ValueError:
        return None
