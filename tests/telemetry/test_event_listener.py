"""The XID/ECC listener's NVML calls follow the query funnel's rules: a device without
events is not asked again, and a driver or pynvml without an event-set call stops the
listener with a reason instead of killing its thread."""

from __future__ import annotations

import threading
import time

import pynvml
import pytest

from gputui.telemetry.nvml import NvmlSource, XidWatcher
from tests.fakenvml.harness import FakeNvml


def _open() -> NvmlSource:
    src = NvmlSource()
    src.open()
    return src


@pytest.fixture
def thread_errors(monkeypatch: pytest.MonkeyPatch) -> list[BaseException | None]:
    """Exceptions that ended a thread (none should: the listener reports in `error`)."""
    seen: list[BaseException | None] = []
    monkeypatch.setattr(threading, "excepthook", lambda args: seen.append(args.exc_value))
    return seen


def test_a_device_without_events_is_not_asked_again(fake_nvml: FakeNvml) -> None:
    fake_nvml.use({"device_count": 2, "gpu.0.unsupported": ["events"],
                   "gpu.1.xid": 79, "gpu.1.xid_at_s": 1.0})
    src = _open()
    try:
        first = XidWatcher(src, poll_ms=20)
        first.start()
        first.stop()
        asked = fake_nvml.count_for("nvmlDeviceGetSupportedEventTypes")
        second = XidWatcher(src, poll_ms=20)  # a second doctor run on the same session
        second.start()
        fake_nvml.set_time(1.0)
        deadline = time.monotonic() + 5
        while not second.events() and time.monotonic() < deadline:
            time.sleep(0.02)
        events = second.stop()
        assert fake_nvml.count_for("nvmlDeviceGetSupportedEventTypes") == asked + 1  # GPU 1
    finally:
        src.close()
    assert first.unsupported == second.unsupported == {0}
    assert [(e.gpu, e.xid) for e in events] == [(1, 79)]


def test_a_driver_without_event_sets_says_so(fake_nvml: FakeNvml,
                                             thread_errors: list[BaseException | None]) -> None:
    fake_nvml.use({"device_count": 2, "not_found": ["nvmlEventSetCreate"]})
    src = _open()
    try:
        watcher = XidWatcher(src, poll_ms=20)
        watcher.start()
        events = watcher.stop()
    finally:
        src.close()
    assert events == () and watcher.unsupported == {0, 1}
    assert watcher.error == "NVML events unavailable: not supported"
    assert thread_errors == []


def _listen_once() -> str | None:
    """Start and stop an XID listener on a freshly opened source; its error."""
    src = _open()
    try:
        watcher = XidWatcher(src, poll_ms=20)
        watcher.start()
        watcher.stop()
    finally:
        src.close()
    return watcher.error


def test_a_driver_without_the_wait_stops_listening_with_a_reason(
        fake_nvml: FakeNvml, thread_errors: list[BaseException | None]) -> None:
    fake_nvml.use({"device_count": 1, "not_found": ["nvmlEventSetWait_v2"]})
    assert _listen_once() == "listening for XID events failed: not supported"
    assert thread_errors == []


def test_a_pynvml_older_than_the_wait_stops_listening_with_a_reason(
        fake_nvml: FakeNvml, monkeypatch: pytest.MonkeyPatch,
        thread_errors: list[BaseException | None]) -> None:
    fake_nvml.use({"device_count": 1})
    monkeypatch.delattr(pynvml, "nvmlEventSetWait_v2")
    assert _listen_once() == "listening for XID events failed: not supported"
    assert thread_errors == []


def test_stopping_a_listener_does_not_wait_for_its_poll(fake_nvml: FakeNvml) -> None:
    """A monitor quitting stops its listener: at once, not after the poll (a minute here),
    and the events that arrived before the stop are still taken."""
    fake_nvml.use({"device_count": 2, "gpu.1.xid": 79, "gpu.1.xid_at_s": 1.0})
    src = _open()
    try:
        watcher = XidWatcher(src, poll_ms=60_000)
        watcher.start()
        fake_nvml.set_time(1.0)  # the XID arrives while the listener sleeps
        events = watcher.stop(timeout_s=10.0)
    finally:
        src.close()
    assert watcher.error is None  # "the NVML event wait did not return" had it waited
    assert [(e.gpu, e.xid) for e in events] == [(1, 79)]
