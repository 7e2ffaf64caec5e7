"""The reader pool (gputui.telemetry.readers): one worker reads every GPU while they answer,
and a GPU stuck in a driver call keeps only its own worker — the others are read on time,
in the same tick, by another."""

from __future__ import annotations

import threading

from gputui.telemetry.model import DeviceInfo, GpuSample
from gputui.telemetry.readers import ReaderPool


class Source:
    """A stand-in NVML source: device `stuck` blocks in its read until released."""

    def __init__(self, n: int, stuck: int | None = None) -> None:
        self.count = n
        self.devices = tuple(DeviceInfo(index=i, name=f"GPU {i}", uuid="", pci_bus_id="")
                             for i in range(n))
        self.stuck = stuck
        self.release = threading.Event()
        self.reads = [0] * n
        self.threads: set[str] = set()

    def open_device(self, index: int) -> DeviceInfo:
        return self.devices[index]

    def read_device(self, index: int, *, slow: bool, processes: bool,
                    ) -> tuple[GpuSample, None]:
        self.threads.add(threading.current_thread().name)
        if index == self.stuck:
            self.release.wait(30)
        self.reads[index] += 1
        return GpuSample(info=self.devices[index], util_gpu_pct=float(self.reads[index])), None


def test_one_worker_reads_every_gpu_while_they_answer() -> None:
    src = Source(8)
    pool = ReaderPool(src)
    # The pool reads each GPU once as it opens it: by the first tick a GPU may have
    # answered once or (the opening read done before the tick asked) twice.
    samples, _ = pool.read(slow=False, processes=False, timeout_s=5.0)
    first = [s.util_gpu_pct for s in samples]
    assert all(v in (1.0, 2.0) for v in first) and len(first) == 8
    for tick in range(1, 20):
        samples, _ = pool.read(slow=False, processes=False, timeout_s=5.0)
        # Every tick reads every GPU again, fresh.
        assert [s.util_gpu_pct for s in samples] == [v + tick for v in first]  # type: ignore[operator]
        assert not any(s.stale for s in samples)
    assert len(src.threads) == 1  # one hand-off per tick, not one thread per GPU
    assert not pool.hung
    pool.close()


def test_a_stuck_gpu_keeps_its_worker_and_the_others_are_read_in_the_same_tick() -> None:
    src = Source(4, stuck=1)
    pool = ReaderPool(src)
    samples, _ = pool.read(slow=False, processes=False, timeout_s=1.0)
    # GPU 1 never answered: not answering; 0, 2 and 3 were read all the same. (The pool
    # reads each GPU once as it opens it, so a GPU may have answered twice by now.)
    first = [s.util_gpu_pct for s in samples]
    assert first[1] is None and all(first[i] in (1.0, 2.0) for i in (0, 2, 3))
    assert not any(samples[i].stale for i in (0, 2, 3))
    assert samples[1].stale and samples[1].error == "not answering"
    assert pool.hung and len(src.threads) == 2  # the stuck worker and one that took over
    samples, _ = pool.read(slow=False, processes=False, timeout_s=0.3)
    # The next tick reads 0, 2 and 3 again, on time, though GPU 1 is still stuck.
    assert [s.util_gpu_pct for s in samples] == [
        None if v is None else v + 1.0 for v in first]
    assert not any(samples[i].stale for i in (0, 2, 3))
    assert src.reads[1] == 0  # a GPU inside a call is not asked again
    src.release.set()  # the call returns: its reading is taken at the next tick
    for _ in range(50):
        if not pool.hung:
            break
        threading.Event().wait(0.05)
    samples, _ = pool.read(slow=False, processes=False, timeout_s=1.0)
    assert [s.util_gpu_pct for s in samples][1] in (1.0, 2.0) and not samples[1].stale
    pool.close()
