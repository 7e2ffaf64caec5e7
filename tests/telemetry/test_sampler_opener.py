"""NVML opened on its own thread while Textual starts: whoever comes
second hands the sampler over; a sampler nobody takes is closed, never leaked."""

from __future__ import annotations

import threading

from gputui.telemetry.sampler import Sampler
from gputui.telemetry.sampler_opener import SamplerOpener


def _wait_open(opener: SamplerOpener) -> None:
    assert opener._thread is not None
    opener._thread.join(30)
    assert not opener._thread.is_alive()


def test_the_sampler_is_handed_over_once_open(fake_nvml: object) -> None:
    fake_nvml.use({"device_count": 2}, frozen_time=10.0)  # type: ignore[attr-defined]
    got: list[Sampler] = []
    done = threading.Event()
    opener = SamplerOpener(interval=1.0, profile="monitor")
    opener.deliver_to(lambda s: (got.append(s), done.set(), True)[-1])  # before it opened
    assert done.wait(30)
    (sampler,) = got
    try:
        assert [d.index for d in sampler.nvml.devices] == [0, 1]  # type: ignore[union-attr]
        assert sampler.nvml is not None and sampler.nvml._open  # type: ignore[attr-defined]
        opener.taken(sampler)
        opener.cancel()  # taken: the receiver closes it, not the opener
        assert sampler.nvml._open  # type: ignore[attr-defined]
    finally:
        sampler.close()


def test_a_sampler_nobody_takes_is_closed(fake_nvml: object) -> None:
    fake_nvml.use({"device_count": 1}, frozen_time=10.0)  # type: ignore[attr-defined]
    opener = SamplerOpener(interval=1.0, profile="monitor").start()
    _wait_open(opener)
    got: list[Sampler] = []
    opener.deliver_to(lambda s: (got.append(s), False)[-1])  # the app is quitting
    assert got and not got[0].nvml._open  # type: ignore[attr-defined]

    opener = SamplerOpener(interval=1.0, profile="monitor").start()
    _wait_open(opener)
    opened = opener._opened
    opener.cancel()  # the app quit before its screen came up
    assert opened is not None and not opened.nvml._open  # type: ignore[attr-defined]
