"""Training-framework callbacks that report a job's steps with gputui.track.

`gputui.integrations.hf.GputuiCallback` (Hugging Face transformers) and
`gputui.integrations.lightning.GputuiCallback` (Lightning). Each framework is imported
only when its callback class is first asked for: importing gputui imports neither.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def lazy_callback(module: str, make: Callable[[], type]) -> Callable[[str], Any]:
    """A module `__getattr__` that makes `GputuiCallback` (importing its framework) the
    first time it is asked for, and keeps it in the module."""
    import sys

    def __getattr__(name: str) -> Any:
        if name == "GputuiCallback":
            cls = make()
            setattr(sys.modules[module], name, cls)
            return cls
        raise AttributeError(f"module {module!r} has no attribute {name!r}")

    return __getattr__
