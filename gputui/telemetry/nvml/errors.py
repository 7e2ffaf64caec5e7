"""Why NVML cannot be used, in words, and the small text helpers every NVML read shares."""

from __future__ import annotations

import pynvml


class NvmlUnavailable(Exception):
    """NVML cannot be used at all; str() is the one line shown to the user."""


def describe_init_error(exc: BaseException) -> str:
    if isinstance(exc, pynvml.NVMLError_LibraryNotFound):
        return "NVML library not found — is the NVIDIA driver installed?"
    if isinstance(exc, pynvml.NVMLError_DriverNotLoaded):
        return "NVIDIA driver not loaded — is the nvidia kernel module loaded?"
    if isinstance(exc, pynvml.NVMLError_LibRmVersionMismatch):
        return ("NVML/driver version mismatch — the driver was updated; reload the nvidia "
                "kernel module or reboot")
    if isinstance(exc, pynvml.NVMLError_NoPermission):
        return "no permission to access the GPUs (NVML: Insufficient Permissions)"
    return f"NVML failed to initialise: {err_text(exc)}"


def err_text(exc: BaseException) -> str:
    try:
        return str(exc)
    except Exception:  # pynvml's __str__ itself calls into the library
        return type(exc).__name__


def text(value: bytes | str) -> str:
    return value.decode(errors="replace") if isinstance(value, bytes) else value
