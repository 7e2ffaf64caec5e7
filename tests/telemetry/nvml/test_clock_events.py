"""Clock-change events: NVML's nvmlEventTypeClock, where a GPU reports it,
becomes a "clock_change" event in the snapshot and one alert per episode, worded from the
GPU's state; through the real pynvml and the fake libnvidia-ml."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pynvml

from gputui.telemetry.alerts import CLOCK_QUIET_S, AlertEngine, toasts
from gputui.telemetry.model import (
    DeviceInfo,
    GpuEvent,
    GpuSample,
    HostSample,
    Snapshot,
    SystemInfo,
)
from gputui.telemetry.nvml import MONITOR_EVENTS, NvmlSource
from gputui.telemetry.record import Recorder, load_recording
from gputui.telemetry.sampler import Sampler
from gputui.telemetry.schema import snapshot_to_dict
from tests.fakenvml.harness import FakeNvml

# GPU 0 reports clock changes (three in half a second, from t=1 s) and holds its clocks
# down for heat; GPU 1, like every GPU since Kepler, does not support the event.
FLAPPING = {"device_count": 2, "gpu.0.clock_events_at_s": [1.0, 1.2, 1.5],
            "gpu.0.clock_sm_mhz": 945, "gpu.0.clock_sm_max_mhz": 1980,
            "gpu.0.throttle_reasons": 0x40}


def _collect(sampler: Sampler, want: int) -> list[Snapshot]:
    """Tick until `want` events arrived (they may spread over ticks)."""
    snaps: list[Snapshot] = []
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        snap = sampler.tick()
        snaps.append(snap)
        if sum(len(s.events) for s in snaps) >= want:
            return snaps
        time.sleep(0.05)
    raise AssertionError(f"{sum(len(s.events) for s in snaps)} of {want} events in 10 s")


def test_clock_events_through_pynvml_become_one_alert(fake_nvml: FakeNvml) -> None:
    fake_nvml.use(FLAPPING, frozen_time=0.0)
    src = NvmlSource(fields={"events"})
    src.open_system()
    sampler = Sampler(interval=1.0, nvml=src, alerts=True)
    assert sampler.tick().events == ()  # both devices registered at t=0
    assert src.events is not None and src.events.unsupported == set()
    # What the listener asked NVML for: the clock event only where it is supported.
    h0, h1 = (pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(2))
    assert pynvml.nvmlDeviceGetSupportedEventTypes(h0) & pynvml.nvmlEventTypeClock
    assert not pynvml.nvmlDeviceGetSupportedEventTypes(h1) & pynvml.nvmlEventTypeClock
    assert MONITOR_EVENTS & pynvml.nvmlEventTypeClock
    fake_nvml.set_time(2.0)
    snaps = _collect(sampler, 3)
    events = [e for s in snaps for e in s.events]
    assert [(e.gpu_index, e.kind, e.xid, e.meaning) for e in events] == [
        (0, "clock_change", None, "clocks changed")] * 3
    assert src.events.events() == ()  # handed out, then forgotten: no growth over days
    assert sampler.alerts is not None
    raised = [a for a in sampler.alerts.history() if a.kind == "clock_change"]
    assert len(raised) == 1  # one alert for the episode, not one per event
    (alert,) = [a for a in sampler.alerts.active() if a.kind == "clock_change"]
    assert (alert.gpu_index, alert.severity) == (0, "warning")
    assert alert.message == ("GPU 0: clocks changed 3 times; now SM 945MHz of max 1980MHz, "
                             "clock events: HW thermal slowdown")
    # In the snapshot JSON as they came.
    doc = snapshot_to_dict(next(s for s in snaps if s.events))
    assert {(e["gpu"], e["kind"], e["xid"]) for e in doc["events"]} == {(0, "clock_change", None)}
    sampler.close()


def test_a_gpu_without_the_event_still_gets_xids(fake_nvml: FakeNvml) -> None:
    fake_nvml.use({"device_count": 1, "gpu.0.xid": 79, "gpu.0.xid_at_s": 1.0},
                  frozen_time=0.0)
    src = NvmlSource(fields={"events"})
    src.open()
    assert src.events is not None and src.events.unsupported == set()
    fake_nvml.set_time(2.0)
    deadline = time.monotonic() + 10
    got: tuple[GpuEvent, ...] = ()
    while not got and time.monotonic() < deadline:
        got = src.take_events()
        time.sleep(0.05)
    assert [(e.kind, e.xid) for e in got] == [("xid", 79)]
    src.close()


def test_clock_events_are_recorded_and_replayed(fake_nvml: FakeNvml, tmp_path: Path) -> None:
    fake_nvml.use(FLAPPING, frozen_time=0.0)
    src = NvmlSource(fields={"events"})
    src.open_system()
    sampler = Sampler(interval=1.0, nvml=src)
    sampler.tick()
    fake_nvml.set_time(2.0)
    snaps = _collect(sampler, 3)
    sampler.close()
    rec = Recorder(tmp_path / "r.jsonl")
    for s in snaps:
        rec.write(s)
    rec.close()
    back = load_recording(tmp_path / "r.jsonl").snapshots
    assert [e.kind for s in back for e in s.events] == ["clock_change"] * 3
    engine = AlertEngine()
    raised = [a for s in back for a in engine.update(s, {})]
    # One clock-change alert for the three events (and GPU 0's throttle alert).
    assert sorted((a.kind, a.gpu_index) for a in raised) == [("clock_change", 0),
                                                             ("throttle", 0)]


# --- the alert rule, fed by hand ---------------------------------------------------------

T0 = datetime(2026, 11, 23, 7, 0, tzinfo=UTC)
INFO = DeviceInfo(index=0, name="GPU", uuid="GPU-0", pci_bus_id="0", clock_sm_max_mhz=1980)


def _snap(t: float, changes: int = 0, *, mask: int = 0, clock: int = 1980) -> Snapshot:
    at = T0 + timedelta(seconds=t)
    g = GpuSample(info=INFO, clock_sm_mhz=clock, throttle_mask=mask)
    return Snapshot(time=at, mono=t, system=SystemInfo(), host=HostSample("h"), gpus=(g,),
                    events=tuple(GpuEvent(0, "clock_change", at, meaning="clocks changed")
                                 for _ in range(changes)))


def test_one_alert_per_episode_and_a_new_one_after_quiet() -> None:
    engine = AlertEngine()
    first = engine.update(_snap(0, 1, mask=0x1, clock=210), {})
    assert [a.message for a in first] == [
        "GPU 0: clocks changed once; now SM 210MHz of max 1980MHz, clock events: GPU idle"]
    # A flapping clock: ten more changes in the next seconds raise nothing new.
    for t in range(1, 11):
        assert engine.update(_snap(t, 1), {}) == []
    (active,) = [a for a in engine.active() if a.kind == "clock_change"]
    assert active.message == ("GPU 0: clocks changed 11 times; now SM 1980MHz of max "
                              "1980MHz, clock events: none")
    assert active.since == T0
    # Quiet for CLOCK_QUIET_S: the episode ends.
    engine.update(_snap(10 + CLOCK_QUIET_S - 1), {})
    assert any(a.kind == "clock_change" for a in engine.active())
    engine.update(_snap(10 + CLOCK_QUIET_S), {})
    assert not any(a.kind == "clock_change" for a in engine.active())
    # The next change starts a new episode: a new alert, counted from one again.
    again = engine.update(_snap(60, 2), {})
    assert [a.message.split(";")[0] for a in again] == ["GPU 0: clocks changed 2 times"]
    assert len([a for a in engine.history() if a.kind == "clock_change"]) == 2


def test_no_toast_of_its_own_while_the_gpu_throttles() -> None:
    engine = AlertEngine()
    raised = engine.update(_snap(0, 1, mask=0x40, clock=945), {})
    kinds = sorted(a.kind for a in raised)
    assert kinds == ["clock_change", "throttle"]
    # The throttle toast says it; the clock change stays listed on the alerts screen.
    assert [a.kind for a in toasts(raised, engine.active())] == ["throttle"]
    quiet = AlertEngine().update(_snap(0, 1, mask=0x1, clock=210), {})
    assert [a.kind for a in toasts(quiet, [])] == ["clock_change"]
