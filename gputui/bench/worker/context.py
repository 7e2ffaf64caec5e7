"""What a benchmark kind gets to work with: the run request, the device, the environment, the
event emitter, the cancel flag, and the result it fills."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from gputui.bench import catalog, events
from gputui.bench.request import RunRequest
from gputui.bench.result import ResultBuilder
from gputui.bench.worker.cancel import CancelFlag, Cancelled, TestHooks

if TYPE_CHECKING:
    import torch

    from gputui.bench.worker.energy import NvmlLink


@dataclass
class Ctx:
    request: RunRequest  # resolved: the device's defaults are filled in
    device: torch.device
    env: dict[str, Any]
    emit: Callable[[events.Event], None]
    cancel: CancelFlag
    hooks: TestHooks | None = None
    link: NvmlLink | None = None
    result: ResultBuilder = field(default_factory=lambda: ResultBuilder(id="", benchmark=""))
    current_batch: int | None = None  # named in an out-of-memory error

    @property
    def bench(self) -> catalog.Benchmark:
        return catalog.get(self.request.benchmark)

    @property
    def params(self) -> Mapping[str, Any]:
        return self.request.params or {}

    def should_stop(self) -> bool:
        return self.cancel.is_set()

    def checkpoint(self) -> None:
        if self.cancel.is_set():
            raise Cancelled

    def fire_hook(self) -> None:
        if self.hooks is not None:
            self.hooks.fire()

    def probe_hook(self, batch: int) -> None:
        if self.hooks is not None:
            self.hooks.probe(batch)

    def add_point(self, point: events.Point) -> None:
        """Emit a point and keep it in the result: the one way a kind reports a point."""
        self.emit(point)
        self.result.add_point(point)
