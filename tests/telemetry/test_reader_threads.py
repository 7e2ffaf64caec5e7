"""The reader threads (gputui.telemetry.readers): every GPU is read each tick while they
answer, and a GPU stuck in a driver call keeps only its own thread — the others are read
on time, in the same tick; the stuck one keeps its last values, marked stale."""

from __future__ import annotations

import threading

from gputui.telemetry.model import DeviceInfo, GpuSample
from gputui.telemetry.readers import ReaderThreads


class Source:
    """A stand-in NVML source: device `stuck` blocks in its read until released."""

    def __init__(self, n: int, stuck: int | None = None) -> None:
        self.count = n
        self.devices = tuple(DeviceInfo(index=i, name=f"GPU {i}", uuid="", pci_bus_id="")
                             for i in range(n))
        self.stuck = stuck
        self.release = threading.Event()
        self.reads = [0] * n

    def open_device(self, index: int) -> DeviceInfo:
        return self.devices[index]

    def read_device(self, index: int, *, slow: bool, processes: bool,
                    ) -> tuple[GpuSample, None]:
        if index == self.stuck:
            self.release.wait(30)
        self.reads[index] += 1
        return GpuSample(info=self.devices[index], util_gpu_pct=float(self.reads[index])), None


def test_every_gpu_is_read_fresh_every_tick_while_they_answer() -> None:
    src = Source(8)
    readers = ReaderThreads(src)
    # Each GPU is read once as it opens: by the first tick a GPU may have answered once
    # or (the opening read done before the tick asked) twice.
    samples, _ = readers.read(slow=False, processes=False, timeout_s=5.0)
    first = [s.util_gpu_pct for s in samples]
    assert all(v in (1.0, 2.0) for v in first) and len(first) == 8
    for tick in range(1, 20):
        samples, _ = readers.read(slow=False, processes=False, timeout_s=5.0)
        # Every tick reads every GPU again, fresh.
        assert [s.util_gpu_pct for s in samples] == [v + tick for v in first]  # type: ignore[operator]
        assert not any(s.stale for s in samples)
    assert not readers.hung
    readers.close()


def test_a_stuck_gpu_is_stale_and_the_others_are_read_in_the_same_tick() -> None:
    src = Source(4, stuck=1)
    readers = ReaderThreads(src)
    samples, _ = readers.read(slow=False, processes=False, timeout_s=1.0)
    # GPU 1 never answered: not answering; 0, 2 and 3 were read all the same.
    first = [s.util_gpu_pct for s in samples]
    assert first[1] is None and all(first[i] in (1.0, 2.0) for i in (0, 2, 3))
    assert not any(samples[i].stale for i in (0, 2, 3))
    assert samples[1].stale and samples[1].error == "not answering"
    assert samples[1].stale_s is not None and samples[1].stale_s > 0
    assert readers.hung
    samples, _ = readers.read(slow=False, processes=False, timeout_s=0.3)
    # The next tick reads 0, 2 and 3 again, on time, though GPU 1 is still stuck.
    assert [s.util_gpu_pct for s in samples] == [
        None if v is None else v + 1.0 for v in first]
    assert not any(samples[i].stale for i in (0, 2, 3))
    assert src.reads[1] == 0  # a GPU inside a call is not asked again
    src.release.set()  # the call returns: its reading is taken at the next tick
    for _ in range(50):
        if not readers.hung:
            break
        threading.Event().wait(0.05)
    samples, _ = readers.read(slow=False, processes=False, timeout_s=1.0)
    assert [s.util_gpu_pct for s in samples][1] in (1.0, 2.0) and not samples[1].stale
    readers.close()


def test_a_gpu_that_hangs_after_answering_keeps_its_last_values_marked_stale() -> None:
    src = Source(2)
    readers = ReaderThreads(src)
    readers.read(slow=False, processes=False, timeout_s=5.0)
    before, _ = readers.read(slow=False, processes=False, timeout_s=5.0)
    src.stuck = 0  # from the next read on, GPU 0's call never returns
    stale, _ = readers.read(slow=False, processes=False, timeout_s=0.3)
    assert stale[0].stale and stale[0].util_gpu_pct == before[0].util_gpu_pct
    assert stale[0].stale_s is not None and stale[0].stale_s > 0
    assert not stale[1].stale and stale[1].util_gpu_pct == before[1].util_gpu_pct + 1  # type: ignore[operator]
    readers.close()  # returns at once although GPU 0 is inside a call
    src.release.set()


def test_a_tick_is_woken_once_by_its_last_reading_not_by_each() -> None:
    src = Source(8)
    readers = ReaderThreads(src)
    readers.read(slow=False, processes=False, timeout_s=5.0)  # every device opened
    wakes = []
    notify_all = readers._done.notify_all
    readers._done.notify_all = lambda: (wakes.append(1), notify_all())  # type: ignore[method-assign]
    for tick in range(1, 6):
        samples, _ = readers.read(slow=False, processes=False, timeout_s=5.0)
        assert not any(s.stale for s in samples)  # every reading arrived in its tick
        assert len(wakes) == tick  # and only the last one woke the tick
    readers.close()


class Overlaps(Source):
    """Counts how many devices are inside a read at once (each read takes 2 ms)."""

    def __init__(self, n: int) -> None:
        super().__init__(n)
        self._lock = threading.Lock()
        self.inside = 0
        self.most_inside = 0

    def read_device(self, index: int, *, slow: bool, processes: bool,
                    ) -> tuple[GpuSample, None]:
        with self._lock:
            self.inside += 1
            self.most_inside = max(self.most_inside, self.inside)
        threading.Event().wait(0.002)
        with self._lock:
            self.inside -= 1
        return super().read_device(index, slow=slow, processes=processes)


def test_gpus_that_answer_promptly_are_read_one_at_a_time() -> None:
    """Each NVML call lets go of the GIL: readers reading at once hand it back and forth
    at every call. While each device answers within TURN_WAIT_S, a tick reads them one
    after another (they open side by side)."""
    src = Overlaps(8)
    readers = ReaderThreads(src)
    readers.read(slow=False, processes=False, timeout_s=5.0)  # opened (all at once)
    src.most_inside = 0
    for _ in range(5):
        samples, _ = readers.read(slow=False, processes=False, timeout_s=5.0)
        assert not any(s.stale for s in samples)
    assert src.most_inside == 1 and min(src.reads) >= 6
    readers.close()


class SomeHang(Source):
    """Devices in `hung` never return from a read once `hang` is set."""

    def __init__(self, n: int, hung: set[int]) -> None:
        super().__init__(n)
        self.hung = hung
        self.hang = threading.Event()

    def read_device(self, index: int, *, slow: bool, processes: bool,
                    ) -> tuple[GpuSample, None]:
        if self.hang.is_set() and index in self.hung:
            self.release.wait(30)
        return super().read_device(index, slow=slow, processes=processes)


def test_gpus_hung_first_in_line_hold_the_others_up_only_briefly() -> None:
    """Read one after another, a hung GPU would stop the ones after it: each is started
    beside it once nothing has answered for TURN_WAIT_S, within the same tick."""
    src = SomeHang(8, hung={0, 1, 2})
    readers = ReaderThreads(src)
    before, _ = readers.read(slow=False, processes=False, timeout_s=5.0)
    src.hang.set()
    for _ in range(3):
        samples, _ = readers.read(slow=False, processes=False, timeout_s=0.6)
        assert [s.stale for s in samples] == [True] * 3 + [False] * 5
    # The hung ones keep their last values; the others were read at every tick.
    assert [s.util_gpu_pct for s in samples[:3]] == [s.util_gpu_pct for s in before[:3]]
    assert [s.util_gpu_pct for s in samples[3:]] == [
        s.util_gpu_pct + 3 for s in before[3:]]  # type: ignore[operator]
    readers.close()
    src.release.set()


class Slowish(Source):
    """Every read takes 30 ms: one after another, eight do not fit a 0.1 s deadline."""

    def read_device(self, index: int, *, slow: bool, processes: bool,
                    ) -> tuple[GpuSample, None]:
        threading.Event().wait(0.03)
        return super().read_device(index, slow=slow, processes=processes)


def test_gpus_not_reached_by_the_deadline_are_read_and_shown_at_the_next_tick() -> None:
    src = Slowish(8)
    readers = ReaderThreads(src)
    readers.read(slow=False, processes=False, timeout_s=5.0)  # opened
    samples, _ = readers.read(slow=False, processes=False, timeout_s=0.1)
    late = [s.info.index for s in samples if s.stale]
    assert late  # one after another, 8 × 30 ms is past the deadline
    reads = list(src.reads)
    for _ in range(2):
        samples, _ = readers.read(slow=False, processes=False, timeout_s=5.0)
    # The late ones were read all the same, and every GPU is asked again: none is left
    # waiting for a turn that never comes.
    assert not any(s.stale for s in samples)
    assert all(src.reads[i] >= reads[i] + 2 for i in range(8))
    readers.close()
