"""XID and ECC events: one listener per NVML session, each event an alert,
in the snapshot's `events` (JSON and recordings), through the real pynvml and the fake."""

from __future__ import annotations

import time
from pathlib import Path

from gputui.telemetry.alerts import AlertEngine
from gputui.telemetry.model import Snapshot, iso_utc
from gputui.telemetry.nvml import NvmlSource
from gputui.telemetry.record import Recorder, load_recording
from gputui.telemetry.sampler import Sampler
from gputui.telemetry.schema import snapshot_to_dict
from tests.fakenvml.harness import FakeNvml

XID79 = {"device_count": 2, "gpu.1.xid": 79, "gpu.1.xid_at_s": 1.0}


def _tick_until_event(sampler: Sampler) -> Snapshot:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        snap = sampler.tick()
        if snap.events:
            return snap
        time.sleep(0.05)
    raise AssertionError("no event arrived within 10 s")


def test_an_xid_becomes_an_event_and_an_alert(fake_nvml: FakeNvml) -> None:
    fake_nvml.use(XID79, frozen_time=0.0)
    src = NvmlSource(fields={"events"})
    src.open_system()
    sampler = Sampler(interval=1.0, nvml=src, alerts=True)
    first = sampler.tick()  # opens both devices (their listener registrations at t=0)
    assert first.events == ()
    fake_nvml.set_time(2.0)
    snap = _tick_until_event(sampler)
    (e,) = snap.events
    assert (e.gpu_index, e.kind, e.xid, e.meaning) == (1, "xid", 79,
                                                        "GPU has fallen off the bus")
    assert sampler.alerts is not None
    (alert,) = [a for a in sampler.alerts.active() if a.kind == "xid"]
    assert (alert.gpu_index, alert.severity) == (1, "error")
    assert alert.message == "GPU 1: XID 79: GPU has fallen off the bus"
    # Delivered once: the next ticks carry no event, the alert stays for a while.
    assert sampler.tick().events == ()
    doc = snapshot_to_dict(snap)
    assert doc["events"] == [{"gpu": 1, "kind": "xid", "xid": 79,
                              "meaning": "GPU has fallen off the bus",
                              "time": doc["events"][0]["time"]}]
    assert doc["events"][0]["time"].endswith("Z")
    sampler.close()


def test_events_are_recorded_and_replayed(fake_nvml: FakeNvml, tmp_path: Path) -> None:
    fake_nvml.use(XID79, frozen_time=0.0)
    src = NvmlSource(fields={"events"})
    src.open_system()
    sampler = Sampler(interval=1.0, nvml=src)
    sampler.tick()
    fake_nvml.set_time(2.0)
    snap = _tick_until_event(sampler)
    sampler.close()
    rec = Recorder(tmp_path / "r.jsonl")
    rec.write(snap)
    rec.close()
    (back,) = load_recording(tmp_path / "r.jsonl").snapshots
    (e,), (b,) = snap.events, back.events
    assert (b.gpu_index, b.kind, b.xid, b.meaning) == (e.gpu_index, e.kind, e.xid, e.meaning)
    assert iso_utc(b.time) == iso_utc(e.time)  # recordings keep milliseconds
    # Replayed through the alert engine, the XID is an alert again.
    raised = AlertEngine().update(back, {})
    assert [(a.kind, a.gpu_index) for a in raised] == [("xid", 1)]


def test_a_device_without_events_is_left_out(fake_nvml: FakeNvml) -> None:
    fake_nvml.use({"device_count": 2, "gpu.0.unsupported": ["events"]}, frozen_time=0.0)
    src = NvmlSource(fields={"events"})
    src.open()
    assert src.events is not None
    assert src.events.unsupported == {0}
    assert fake_nvml.count_for("nvmlDeviceRegisterEvents") == 1  # GPU 1 only
    assert src.take_events() == ()
    src.close()


def test_without_the_events_field_no_listener_starts(fake_nvml: FakeNvml) -> None:
    fake_nvml.use(XID79, frozen_time=0.0)
    src = NvmlSource(fields=set())
    src.open()
    assert src.events is None and src.take_events() == ()
    assert fake_nvml.count_for("nvmlEventSetCreate") == 0
    src.close()


def test_ecc_events_have_kinds_and_words() -> None:
    from datetime import UTC, datetime

    from gputui.telemetry.model import GpuEvent, HostSample, SystemInfo

    t = datetime(2026, 11, 23, 4, 0, tzinfo=UTC)
    snap = Snapshot(time=t, mono=0.0, system=SystemInfo(), host=HostSample("h"), events=(
        GpuEvent(0, "ecc_double_bit", t, meaning="double-bit ECC error (uncorrected)"),
        GpuEvent(1, "ecc_single_bit", t, meaning="single-bit ECC error (corrected)")))
    raised = AlertEngine().update(snap, {})
    assert [(a.kind, a.gpu_index, a.severity, a.message) for a in raised] == [
        ("ecc_event", 0, "error", "GPU 0: double-bit ECC error (uncorrected)"),
        ("ecc_event", 1, "warning", "GPU 1: single-bit ECC error (corrected)")]
