"""The one way an NVML call is made: `NvmlQuery`, one per device (after nvitop's
`nvmlQuery`, nvitop/api/libnvml.py).

A call that answers NOT_SUPPORTED, or whose function this driver (or this pynvml) lacks,
is remembered and never made again for that device; a lost GPU is remembered and every
later call returns None at once; any other error is N/A for this call only (asked again
next time). Every call of the package goes through here, so these rules hold in one place;
the event listener's too (its devices' registration through each device's query, the event
set's own calls through one query of the listener's, where a timeout is a transient error
that its loop tells apart by `last_error`). The few calls that do not are those whose
errors mean something else: initialising and shutting NVML down (the error is the user's
message), and giving GPM buffers and the event set back (done even for a lost GPU).
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from typing import Any

import pynvml

from gputui.telemetry.nvml.errors import err_text

# Errors that say "this device or driver has no such thing": never asked again.
_ABSENT = (pynvml.NVMLError_NotSupported, pynvml.NVMLError_FunctionNotFound,
           pynvml.NVMLError_ArgumentVersionMismatch)


class NvmlQuery:
    """One device's NVML calls. Used by one thread at a time (the device's reader)."""

    def __init__(self) -> None:
        self.unsupported: set[str] = set()  # keys of the calls this device lacks
        self.lost = False  # the GPU fell off the bus (NVML_ERROR_GPU_IS_LOST)
        # The NVML return code of the last call that failed for another reason (a
        # profiler holding the GPM counters, a timeout); None after a call that answered.
        self.last_error: int | None = None
        self.last_error_text: str | None = None  # that error in NVML's words

    def __call__(self, fn: str | Callable[..., Any], *args: Any, key: str | None = None,
                 absent: Collection[int] = ()) -> Any:
        """`fn(*args)` (`fn` a pynvml function or its name), or None when it did not
        answer. `key` names the call in the unsupported set (default: the function's
        name; give one where the arguments make a different read). Return codes in
        `absent` count as NOT_SUPPORTED for this call."""
        if isinstance(fn, str):
            key = key or fn
            fn = getattr(pynvml, fn, None)  # type: ignore[assignment]
            if fn is None:  # a pynvml older than the call
                self.unsupported.add(key)
                return None
        key = key or fn.__name__  # type: ignore[union-attr]
        if self.lost or key in self.unsupported:
            return None
        self.last_error = None
        try:
            return fn(*args)  # type: ignore[operator]
        except pynvml.NVMLError_GpuIsLost:
            self.lost = True
        except _ABSENT:
            self.unsupported.add(key)
        except pynvml.NVMLError as exc:
            if exc.value in absent:
                self.unsupported.add(key)
            else:
                self.last_error = exc.value  # transient: N/A this time
                self.last_error_text = err_text(exc)
        return None

    def done(self, fn: str | Callable[..., Any], *args: Any, key: str | None = None) -> bool:
        """A call that answers nothing (registering, setting): True when it was made and
        succeeded, under the same rules."""
        self(fn, *args, key=key)
        key = key or (fn if isinstance(fn, str) else fn.__name__)
        return not self.lost and key not in self.unsupported and self.last_error is None

    def newer_or_older(self, key: str, newer: tuple[Any, ...], older: tuple[Any, ...]) -> Any:
        """The newer form of a call, `newer` = (function, *args); on a device or driver
        without it, the older form from then on."""
        got = self(*newer, key=key + "/newer")
        if got is None and key + "/newer" in self.unsupported:
            return self(*older, key=key)
        return got

    def has(self, key: str) -> bool:
        return key not in self.unsupported
