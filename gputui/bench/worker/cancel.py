"""Stopping a benchmark between measurements, and the simulated failures tests ask for."""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Mapping
from typing import Any

from gputui.bench.request import RunRequest

log = logging.getLogger("gputui.bench.worker")

HOOK_ENV = "GPUTUI_BENCH_TEST_HOOKS"


class Cancelled(Exception):
    """SIGTERM arrived between measurements: report what we have."""


class SimulatedCrash(RuntimeError):
    pass


class CancelFlag:
    """Set by the SIGTERM/SIGINT handler; read at step boundaries."""

    def __init__(self) -> None:
        self.set_ = False

    def set(self, *_: object) -> None:
        self.set_ = True

    def is_set(self) -> bool:
        return self.set_


def _simulated_oom(message: str) -> BaseException:
    import torch

    return torch.cuda.OutOfMemoryError(message)


class TestHooks:
    """Simulated failures for the runner's tests; inert unless GPUTUI_BENCH_TEST_HOOKS=1."""

    __test__ = False  # not a pytest class

    def __init__(self, request: RunRequest, enabled: bool) -> None:
        self.hook = request.test_hook if enabled else None
        self.params: Mapping[str, Any] = request.params or {}
        self.fired = False

    @classmethod
    def from_env(cls, request: RunRequest) -> TestHooks:
        return cls(request, os.environ.get(HOOK_ENV) == "1")

    def fire(self) -> None:
        hook = self.hook
        if hook is None or self.fired:
            return
        if hook == "oom" and "oom_above_batch" in self.params:
            return  # the batch-threshold variant: see probe
        self.fired = True
        log.warning("test hook %r firing", hook)
        if hook == "crash":
            raise SimulatedCrash("simulated crash (test hook)")
        if hook == "oom":
            raise _simulated_oom(
                "CUDA out of memory. Tried to allocate 2.00 GiB (simulated by test hook)")
        if hook == "exit":
            os._exit(3)
        if hook == "hang":
            # Like a hung kernel: SIGTERM's handler only sets a flag nobody reads now, so
            # the runner's SIGKILL escalation is what ends this.
            while True:
                time.sleep(3600)

    def probe(self, batch: int) -> None:
        """test_hook "oom" + params.oom_above_batch N: any probe above batch N "OOMs"."""
        limit = self.params.get("oom_above_batch")
        if self.hook != "oom" or limit is None:
            return
        if batch > int(limit):
            raise _simulated_oom(f"CUDA out of memory at batch {batch} (simulated above batch "
                                 f"{int(limit)} by test hook)")
