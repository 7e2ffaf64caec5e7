"""NVTX ranges for Nsight Systems: `gputui bench run NAME --nvtx` under `nsys profile` shows
each benchmark's warm-up, its timed loop and every step as named ranges on the timeline.

Off unless the request asks (`RunRequest.nvtx`), and then on CUDA only: a range push/pop
is a host call per step, so it is never paid by a run that did not ask. The worker's main
switches it on once per process (`configure`); the shared loops (measure.do_warmup,
timing.timed_loop and latency_loop, measure.measure_phases, the interconnect kinds) call
`span` and `push`/`pop`, which do nothing while it is off.

`configure(..., any_device=True)` is the seam the tests use: it switches the ranges on for
a CPU run so that a test can patch `torch.cuda.nvtx.range_push`/`range_pop` and see the
calls (the real ones need a CUDA build).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

_on = False


def configure(requested: bool, device_type: str, *, any_device: bool = False) -> None:
    global _on
    _on = bool(requested) and (device_type == "cuda" or any_device)


def enabled() -> bool:
    return _on


def push(name: str) -> None:
    if _on:
        import torch

        torch.cuda.nvtx.range_push(name)


def pop() -> None:
    if _on:
        import torch

        torch.cuda.nvtx.range_pop()


@contextmanager
def span(name: str) -> Iterator[None]:
    """One named range around a block (a phase: warm-up, timed loop, a shape)."""
    push(name)
    try:
        yield
    finally:
        pop()
