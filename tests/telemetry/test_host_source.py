"""The host side of a tick stays cheap: a GPU process this host cannot see (another PID
namespace, e.g. gputui in a container) is not looked up again every tick, and swap is read
every few seconds; a process that appears later is still described."""

from __future__ import annotations

import os
import time

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
    lookups: list[int] = []
    real = psutil.Process

    def counting(pid: int) -> psutil.Process:
        lookups.append(pid)
        return real(pid)

    monkeypatch.setattr(host_mod.psutil, "Process", counting)
    src = HostSource(clock=clock)
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


def test_a_process_command_and_user_are_read_once_cpu_and_rss_every_time(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """User, command line, start time and container do not change while a process runs:
    read when it is first seen. CPU % and RSS are read at every description. A process
    that left the GPU and came back is read afresh."""
    reads: list[str] = []
    # (memory_info and cpu_times are cached by psutil's oneshot: not patched here.)
    for name in ("cmdline", "username"):
        real = getattr(psutil.Process, name)

        def counting(self: psutil.Process, _real=real, _name=name) -> object:
            reads.append(_name)
            return _real(self)

        monkeypatch.setattr(psutil.Process, name, counting)
    src = HostSource()
    me = (GpuProcess(0, os.getpid(), 1 << 20),)
    outs = [src.describe(me) for _ in range(3)]
    assert reads.count("cmdline") == 1 and reads.count("username") == 1
    assert len({o[0].command for o in outs}) == 1 and outs[0][0].command
    assert all(o[0].rss_bytes and o[0].user == outs[0][0].user for o in outs)
    # CPU % is over the time since the last description: none yet at the first.
    assert outs[0][0].cpu_pct is None
    assert outs[1][0].cpu_pct is not None and outs[2][0].cpu_pct is not None
    src.describe(())  # it left the GPU
    src.describe(me)
    assert reads.count("cmdline") == 2


def test_swap_is_read_every_few_seconds(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = Clock()
    reads: list[int] = []
    real = psutil.swap_memory

    def counting():  # type: ignore[no-untyped-def]
        reads.append(1)
        return real()

    monkeypatch.setattr(host_mod.psutil, "swap_memory", counting)
    src = HostSource(clock=clock)
    first = src.read()
    for _ in range(4):
        clock.t += 1.0
        assert src.read().swap_total_bytes == first.swap_total_bytes
    assert len(reads) == 1
    clock.t += SWAP_EVERY_S
    src.read()
    assert len(reads) == 2


class _Times:
    """A psutil cpu_times row: user, nice, system, idle, iowait, guest (inside user)."""

    def __init__(self, user: float, system: float, idle: float, iowait: float = 0.0,
                 guest: float = 0.0) -> None:
        self.user, self.nice, self.system, self.idle = user, 0.0, system, idle
        self.iowait, self.guest, self.guest_nice = iowait, guest, 0.0

    def __iter__(self):  # type: ignore[no-untyped-def]
        return iter((self.user, self.nice, self.system, self.idle, self.iowait, self.guest,
                     self.guest_nice))


@pytest.fixture
def cpu_rows(monkeypatch: pytest.MonkeyPatch) -> object:
    """Set the per-core CPU times the host reads (psutil's rows)."""
    current: list[list[_Times]] = [[]]
    monkeypatch.setattr(host_mod.psutil, "cpu_times", lambda percpu=False: current[0])
    return lambda rows: current.__setitem__(0, rows)


def test_cpu_percent_per_core_and_whole_host_from_one_read(cpu_rows) -> None:  # type: ignore[no-untyped-def]
    cpu_rows([_Times(100, 50, 850), _Times(10, 10, 980)])
    load = host_mod.CpuLoad()
    # Core 0: 60 busy of 100 s; core 1: 5 busy (guest time is inside user, not added)
    # and 10 s of iowait (not busy) of 100 s. Whole host: 65 of 200 s.
    cpu_rows([_Times(140, 70, 890), _Times(14, 11, 1065, iowait=10, guest=3)])
    assert load.percent() == (32.5, (60.0, 5.0))
    # A core going offline starts a new window instead of pairing the wrong cores.
    cpu_rows([_Times(150, 80, 900)])
    assert load.percent() == (0.0, (0.0,))
    cpu_rows([_Times(200, 80, 950)])
    assert load.percent() == (50.0, (50.0,))


def test_host_cpu_percent_is_the_first_reading_after_priming(
        monkeypatch: pytest.MonkeyPatch, cpu_rows) -> None:  # type: ignore[no-untyped-def]
    clock = Clock()
    cpu_rows([_Times(0, 0, 100)])
    src = HostSource(clock=clock)
    clock.t += 1.0
    cpu_rows([_Times(20, 5, 175)])
    sample = src.read()
    assert (sample.cpu_pct, sample.cpu_per_core_pct) == (25.0, (25.0,))


def test_host_memory_used_is_total_minus_available(monkeypatch: pytest.MonkeyPatch) -> None:
    class Vm:
        total, available, free = 16_000_000 * 1024, 6_000_000 * 1024, 1_000_000 * 1024

    monkeypatch.setattr(host_mod.psutil, "virtual_memory", Vm)
    sample = HostSource().read()
    assert (sample.mem_used_bytes, sample.mem_total_bytes) == (10_000_000 * 1024,
                                                               16_000_000 * 1024)


def test_process_cpu_percent_and_rss_are_psutils_figures() -> None:
    """CPU % (user + system time over wall time since the last description, of one core)
    and RSS agree with what the process itself measures and psutil says."""
    import time

    src = HostSource()
    me = (GpuProcess(0, os.getpid(), 1 << 20),)
    src.describe(me)
    c0, w0 = time.process_time(), time.monotonic()
    while time.process_time() - c0 < 0.4:  # busy: close to one core
        pass
    out = src.describe(me)[0]
    expected = 100.0 * (time.process_time() - c0) / (time.monotonic() - w0)
    assert out.cpu_pct is not None and abs(out.cpu_pct - expected) < 10.0
    rss = psutil.Process().memory_info().rss
    assert out.rss_bytes is not None and abs(out.rss_bytes - rss) < 4 << 20


def test_a_process_that_ends_between_readings_keeps_its_row_without_host_facts() -> None:
    import subprocess

    child = subprocess.Popen(["sleep", "60"])
    # Just after exec the kernel may not show the new command line yet: wait until it does.
    deadline = time.monotonic() + 10
    while psutil.Process(child.pid).cmdline() != ["sleep", "60"] and time.monotonic() < deadline:
        time.sleep(0.01)
    src = HostSource()
    rows = (GpuProcess(0, child.pid, 1 << 20),)
    assert src.describe(rows)[0].command == "sleep 60"
    child.kill()
    child.wait()
    out = src.describe(rows)[0]
    assert out.pid == child.pid and out.command is None and out.cpu_pct is None


def test_description_keeps_every_field_nvml_gave() -> None:
    """Host facts are added; every field the NVML side filled comes through unchanged."""
    import dataclasses

    src = HostSource()
    nvml_side = GpuProcess(gpu_index=2, pid=os.getpid(), gpu_mem_bytes=5 << 30,
                           kind="compute+graphics", sm_util_pct=71, mem_util_pct=33,
                           enc_util_pct=4, dec_util_pct=5)
    (out,) = src.describe((nvml_side,))
    host_side = {"user", "command", "cpu_pct", "rss_bytes", "started", "container",
                 "container_id", "pod", "namespace", "pod_uid", "qos"}
    for f in dataclasses.fields(GpuProcess):
        if f.name not in host_side:
            assert getattr(out, f.name) == getattr(nvml_side, f.name), f.name
    assert out.command and out.rss_bytes and out.started
