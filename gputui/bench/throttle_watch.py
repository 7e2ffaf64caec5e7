"""Throttle episodes during a benchmark: the runner watches NVML (or the TUI's sampler)
while a CUDA run goes on and keeps the episodes that overlapped it. Torch-free."""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from gputui.bench.telemetry_port import Telemetry


class ThrottleWatch:
    """Samples NVML during a CUDA run and returns the throttle episodes that overlapped it.

    Everything is optional: no NVML, no telemetry module, or a device we cannot map gives
    no episodes, never an error. A caller that already runs a sampler (the TUI) passes
    it in, so NVML is not opened twice.
    """

    def __init__(self, sampler: Telemetry, own: bool, gpu_index: int | None,
                 start: datetime) -> None:
        self._sampler = sampler
        self._own = own
        self._gpu_index = gpu_index
        self._start = start

    @classmethod
    def start(cls, gpu_index: int | None, sampler: Telemetry | None) -> ThrottleWatch | None:
        """Watch NVML device `gpu_index` (None: keep every GPU's episodes)."""
        start = datetime.now(UTC)
        if sampler is not None:
            return cls(sampler, False, gpu_index, start)
        try:
            from gputui.telemetry.sampler import Sampler

            # Only what throttling needs: no processes, no PCIe throughput (NVML samples
            # the link for ~20 ms a call; on an 8-GPU node, twice a second, that is a
            # host core taken from the job being measured).
            own = Sampler.open(interval=0.5, process_every=1_000_000, profile="throttle")
        except Exception:
            return None
        if own.nvml is None:
            with contextlib.suppress(Exception):
                own.close()
            return None
        try:
            own.start()
        except Exception:
            return None
        return cls(own, True, gpu_index, start)

    @property
    def sampler(self) -> Telemetry:
        """The telemetry sampler watched (its `nvml` source serves one-off reads)."""
        return self._sampler

    def listen(self, fn: Any) -> None:
        """Also hand each snapshot to `fn` (bench.throttle_window's recorder) until `unlisten`."""
        self._sampler.subscribe(fn)

    def unlisten(self, fn: Any) -> None:
        with contextlib.suppress(Exception):
            self._sampler.unsubscribe(fn)

    def stop(self) -> list[dict[str, Any]]:
        end = datetime.now(UTC)
        if self._own:
            with contextlib.suppress(Exception):
                self._sampler.tick()  # close an episode that ended since the last tick
            with contextlib.suppress(Exception):
                self._sampler.close()
        out = []
        for ep in self._sampler.episodes():
            ep_end = ep.end or end
            if ep.start <= end and ep_end >= self._start and (
                self._gpu_index is None or ep.gpu_index == self._gpu_index
            ):
                out.append(ep.to_dict(now=end))
        return out


def worker_nvml_index(env: Mapping[str, Any]) -> int | None:
    """The NVML index of the worker's GPU, as the worker found it by UUID.

    torch's cuda:N and NVML's index N are different numberings (CUDA_VISIBLE_DEVICES,
    CUDA_DEVICE_ORDER=FASTEST_FIRST by default, MIG), so the runner never guesses from
    the device string: without the worker's answer (no NVML, UUID not found) it keeps
    every GPU's episodes; each episode names its own gpu_index.
    """
    nvml = env.get("nvml")
    if not isinstance(nvml, Mapping):
        return None
    index = nvml.get("nvml_index")
    return index if isinstance(index, int) and not isinstance(index, bool) else None
