from __future__ import annotations

import math
import threading

import pytest

from gputui.telemetry.history import History, history_capacity
from gputui.telemetry.model import GpuSample
from gputui.telemetry.sampler import Sampler
from tests.factories import HandSource, device, gpu, snapshot


def test_history_keeps_fifteen_minutes_at_one_hertz_and_stays_bounded() -> None:
    assert history_capacity(1.0) >= 15 * 60
    assert history_capacity(0.1) <= 9000
    h = History(capacity=100)
    for t in range(250):
        h.append(snapshot(t, [gpu(0, util_gpu_pct=t % 100)]))
    assert len(h) == 100
    _times, values = h.window(0, "util_gpu_pct", seconds=10_000)
    assert len(values) == 100 and values[-1] == 249 % 100


def test_history_window_and_fixed_time_buckets() -> None:
    h = History(capacity=1000)
    for t in range(120):
        h.append(snapshot(t, [gpu(0, util_gpu_pct=t)]))
    _times, values = h.window(0, "util_gpu_pct", seconds=59)
    assert values[0] == 60 and values[-1] == 119
    b = h.buckets(0, "util_gpu_pct", seconds=60, n=6)
    assert len(b) == 6 and b[-1] == 119
    assert h.buckets(3, "util_gpu_pct", seconds=60, n=4) == [None] * 4


def test_unknown_and_lost_values_are_gaps_not_zero() -> None:
    h = History(capacity=10)
    h.append(snapshot(0, [gpu(0, fan_pct=None, power_w=None)]))
    h.append(snapshot(1, [gpu(0, lost=True)]))
    _, power = h.window(0, "power_w", 100)
    assert all(math.isnan(v) for v in power)
    _, util = h.window(0, "util_gpu_pct", 100)
    assert util[0] == 50 and math.isnan(util[1])


def test_a_gpu_appearing_later_is_aligned() -> None:
    h = History(capacity=10)
    h.append(snapshot(0, [gpu(0)]))
    h.append(snapshot(1, [gpu(0), gpu(1, util_gpu_pct=7)]))
    times, values = h.window(1, "util_gpu_pct", 100)
    assert len(times) == 2 and math.isnan(values[0]) and values[1] == 7


def test_sampler_without_nvml_is_host_only_with_the_reason() -> None:
    s = Sampler(interval=0.5, nvml=None, nvml_error="NVML library not found")
    snap = s.tick()
    assert snap.gpus == () and snap.nvml_error == "NVML library not found"
    assert snap.host.mem_total_bytes and snap.host.mem_total_bytes > 0


def test_interval_below_minimum_is_refused() -> None:
    with pytest.raises(ValueError):
        Sampler(interval=0.05)


def test_ingest_tracks_throttling_and_notifies_listeners() -> None:
    s = Sampler(interval=1.0, nvml=None)
    seen = []
    s.subscribe(seen.append)
    started = s.ingest(snapshot(0, [gpu(0, throttle_mask=0x40)]))
    assert len(started) == 1 and s.ongoing()[0].gpu_index == 0
    s.ingest(snapshot(1, [gpu(0, throttle_mask=0)]))
    assert len(seen) == 2 and s.latest is seen[-1]
    assert not s.episodes()[0].ongoing


class _SlowDriver(HandSource):
    """Stands in for NVML on a driver whose calls take longer than the interval, on a
    fake clock: each read takes `delay` seconds of it, and the sampler's wait for its
    next tick moves it by the seconds waited. After `reads` reads the wait blocks on
    the sampler's stop event, as the real one does. Reads before `armed` (the reader
    thread's first, as it opens the device) take no time."""

    def __init__(self, delay: float, reads: int) -> None:
        super().__init__((device(0),))
        self.armed = False
        self.delay = delay
        self.reads = reads
        self.now = 0.0
        self.starts: list[float] = []  # when each read began, on the fake clock
        self.enough = threading.Event()

    def clock(self) -> float:
        return self.now

    def sample(self, index: int) -> GpuSample:
        if self.armed:
            self.starts.append(self.now)
            self.now += self.delay
        return super().sample(index)

    def wait(self, stop: threading.Event, seconds: float) -> None:
        self.now += seconds
        if len(self.starts) >= self.reads:
            self.enough.set()
            stop.wait()


def test_slow_reads_skip_ticks_instead_of_piling_up() -> None:
    # Each read takes four intervals (exact binary fractions: no rounding in the sums).
    drv = _SlowDriver(delay=0.5, reads=4)
    s = Sampler(interval=0.125, source=drv, clock=drv.clock, wait=drv.wait)
    s.read()  # the device's reader thread opens it and is idle once this returns
    drv.armed = True
    s.start()
    assert drv.enough.wait(30)
    s.stop()
    # Reads never overlap or queue: each starts on the first tick after the previous
    # one ended (no missed ticks fired back to back), and the four ticks each read
    # overran are counted as skipped.
    assert drv.starts == [0.0, 0.625, 1.25, 1.875]
    assert s.skipped_ticks == 4 * len(drv.starts)


def test_host_cpu_is_unknown_until_it_covers_a_real_window() -> None:
    from gputui.telemetry.host import MIN_CPU_WINDOW_S, HostSource

    now = [100.0]
    host = HostSource(clock=lambda: now[0])
    assert host.read().cpu_pct is None  # a few ms after priming: no made-up 0 %
    now[0] += MIN_CPU_WINDOW_S + 0.05
    later = host.read()
    assert later.cpu_pct is not None and len(later.cpu_per_core_pct) >= 1


def test_process_host_facts_are_read_with_each_process_list_not_every_tick() -> None:
    """NVML's process list is read every few ticks; the readers hand the same records on
    in between. The user, command, CPU % and RSS from /proc are read with each new list,
    so a process's CPU % covers the window of its GPU figures, and the ticks between
    cost no /proc reads (~50 µs per process)."""
    import os

    from gputui.telemetry.host import HostSource
    from gputui.telemetry.model import GpuProcess

    class CountingHost(HostSource):
        calls = 0

        def describe(self, procs: tuple[GpuProcess, ...]) -> tuple[GpuProcess, ...]:
            self.calls += 1
            return super().describe(procs)

    class ListEveryThirdTick(HandSource):
        """A new process list on every third read, as NvmlSource."""

        def processes(self, index: int) -> tuple[GpuProcess, ...]:
            return (GpuProcess(0, os.getpid(), 2**30),)

    host = CountingHost()
    s = Sampler(interval=1.0, source=ListEveryThirdTick((device(0),), process_every=3),
                host=host)
    snaps = [s.tick() for _ in range(7)]
    assert host.calls == 3  # ticks 0, 3 and 6
    # Every tick shows this process with its host-side facts.
    assert all(snap.processes[0].pid == os.getpid() for snap in snaps)
    assert all(snap.processes[0].command for snap in snaps)
    # The ticks between lists carry the facts of the last description (each tick's
    # records are new only for their energy shares).
    host_facts = [(p.user, p.command, p.cpu_pct, p.rss_bytes)
                  for snap in snaps for p in snap.processes]
    assert host_facts[1] == host_facts[0] and host_facts[2] == host_facts[0]
