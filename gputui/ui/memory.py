"""Give memory back to the system after a burst (a resize storm).

A terminal being dragged to a new size makes every widget render at dozens of widths
in a few seconds. Most of what that allocates is freed again, but glibc keeps freed
heap pages, so the monitor's RSS stayed ~19 MB higher for the rest of its run. Once
the sizes settle, collect and ask glibc to return free pages (malloc_trim); elsewhere
this is a no-op.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import gc
from functools import cache

SETTLE_S = 2.0  # how long the size must stay put before memory is released


@cache
def _malloc_trim() -> object | None:
    name = ctypes.util.find_library("c")
    if not name:
        return None
    try:
        return getattr(ctypes.CDLL(name), "malloc_trim", None)
    except OSError:
        return None


def release_memory() -> bool:
    """Collect garbage and return free heap pages to the OS; True if trimmed."""
    gc.collect()
    trim = _malloc_trim()
    if trim is None:
        return False
    trim(0)  # type: ignore[operator]
    return True
