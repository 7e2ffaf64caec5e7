"""The host side of a tick stays cheap: a GPU process this host cannot see (another PID
namespace, e.g. gputui in a container) is not looked up again every tick, and swap is read
every few seconds; a process that appears later is still described."""

from __future__ import annotations

import os

import psutil
import pytest

from gputui.telemetry import host as host_mod
from gputui.telemetry.host import MISSING_RETRY_S, SWAP_EVERY_S, HostSource
from gputui.telemetry.model import GpuProcess


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def test_an_invisible_pid_is_looked_up_again_only_after_a_while(
        monkeypatch: pytest.MonkeyPatch) -> None:
    clock = Clock()
    monkeypatch.setattr(host_mod.time, "monotonic", clock)
    lookups: list[int] = []
    real = psutil.Process

    def counting(pid: int) -> psutil.Process:
        lookups.append(pid)
        return real(pid)

    monkeypatch.setattr(host_mod.psutil, "Process", counting)
    src = HostSource()
    gone = 2**22 + 12345  # above Linux's pid_max: no such process
    rows = (GpuProcess(0, gone, 1 << 30), GpuProcess(1, os.getpid(), 1 << 20))
    for _ in range(5):
        out = src.describe(rows)
        clock.t += 1.0
        assert out[0].command is None and out[1].command  # ours is described every tick
    assert lookups.count(gone) == 1 and lookups.count(os.getpid()) == 1
    clock.t += MISSING_RETRY_S
    src.describe(rows)
    assert lookups.count(gone) == 2


def test_swap_is_read_every_few_seconds(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = Clock()
    monkeypatch.setattr(host_mod.time, "monotonic", clock)
    reads: list[int] = []
    real = psutil.swap_memory

    def counting():  # type: ignore[no-untyped-def]
        reads.append(1)
        return real()

    monkeypatch.setattr(host_mod.psutil, "swap_memory", counting)
    src = HostSource()
    first = src.read()
    for _ in range(4):
        clock.t += 1.0
        assert src.read().swap_total_bytes == first.swap_total_bytes
    assert len(reads) == 1
    clock.t += SWAP_EVERY_S
    src.read()
    assert len(reads) == 2
