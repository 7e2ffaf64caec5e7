"""Messages between the app and its screens/widgets."""

from __future__ import annotations

from textual.message import Message

from gputui.telemetry.model import Snapshot


class SnapshotShown(Message):
    """Posted to a screen other than the main one after the app took in a snapshot,
    so screens that show live data (the alerts screen) can refresh themselves."""

    def __init__(self, snapshot: Snapshot) -> None:
        super().__init__()
        self.snapshot = snapshot


class SamplerOpened(Message):
    """The NVML-opening thread finished: here is the sampler (host-only if NVML failed)."""

    def __init__(self, sampler: object) -> None:
        super().__init__()
        self.sampler = sampler
