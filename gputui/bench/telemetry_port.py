"""What a benchmark run reads from telemetry: the narrow, typed port between the bench
layer and the sampler (the TUI's, shared with its runs, or one the runner opens).

A run watches the sampler's ticks (its throttle episodes and GPU window) and, at its end,
reads one GPU's configuration and the links between a DDP run's GPUs through the NVML
source (`nvml`, None without one: a CPU box, an AMD one, NVML unavailable). Torch- and
pynvml-free: only types cross here.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from gputui.telemetry.model import Snapshot
    from gputui.telemetry.nvml import NvmlSource
    from gputui.telemetry.throttle import ThrottleEpisode


class Telemetry(Protocol):
    """`gputui.telemetry.sampler.Sampler` is one; tests pass their own."""

    @property
    def interval(self) -> float: ...

    @property
    def nvml(self) -> NvmlSource | None: ...

    def subscribe(self, fn: Callable[[Snapshot], None]) -> None: ...

    def unsubscribe(self, fn: Callable[[Snapshot], None]) -> None: ...

    def tick(self) -> Snapshot: ...

    def episodes(self) -> tuple[ThrottleEpisode, ...]: ...

    def start(self, first_in: float = 0.0) -> None: ...

    def close(self) -> None: ...
