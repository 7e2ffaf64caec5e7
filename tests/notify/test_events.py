"""Alert events as a notification receives them: one started and one ended per condition,
instants once, the monitor's own sentence, and the filters (minimum duration, kinds)."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import timedelta

from gputui.notify.events import Event, EventTracker
from gputui.telemetry.alert import Alert, alert_key
from gputui.telemetry.frame import Frame
from gputui.telemetry.model import GpuEvent, GpuSample
from gputui.telemetry.sampler import Sampler
from tests.factories import T0, gpu, snapshot

SW_POWER = 0x4


class Run:
    """Snapshots through a real Sampler (throttle tracker and alert engine) into a
    tracker, one second apart, as `gputui watch` feeds its notifier."""

    def __init__(self, **tracker: object) -> None:
        self.sampler = Sampler(alerts=True)
        self.tracker = EventTracker(**tracker)  # type: ignore[arg-type]
        self.events: list[Event] = []
        self.frames: list[Frame] = []
        self.sampler.subscribe_frames(self._take)
        self.t = 0.0

    def _take(self, frame: Frame) -> None:
        self.frames.append(frame)
        self.events.extend(self.tracker.update(frame))

    def tick(self, *gpus: GpuSample, **kw: object) -> None:
        self.sampler.ingest(snapshot(self.t, gpus, **kw))
        self.t += 1.0

    def pairs(self) -> list[tuple[str, str, int | None]]:
        return [(e.event, e.kind, e.gpu) for e in self.events]


def throttling(index: int) -> GpuSample:
    return gpu(index, throttle_mask=SW_POWER, clock_sm_mhz=1200, power_w=399.0)


def test_a_throttle_episode_is_one_started_and_one_ended_however_long() -> None:
    run = Run()
    run.tick(gpu(0), gpu(1))
    for _ in range(30):
        run.tick(throttling(0), gpu(1))
    run.tick(gpu(0), gpu(1))
    assert run.pairs() == [("started", "throttle", 0), ("ended", "throttle", 0)]
    started, ended = run.events
    raised = run.frames[1].raised[0]
    # The monitor's sentence, its reasons and the figures behind it.
    assert started.text == raised.message == (
        "GPU 0: SW power cap, SM clock 1410→1200 MHz, 399 W of 400 W limit")
    assert started.reasons == ("sw_power_cap",)
    assert started.values["clock_sm_mhz"] == 1200
    assert started.values["clock_sm_before_mhz"] == 1410
    assert started.values["power_limit_w"] == 400.0
    assert started.time == started.started == T0 + timedelta(seconds=1)
    assert started.uuid == "GPU-00000000-aaaa-bbbb-cccc-000000000000"
    assert started.host == "trainbox" and started.duration_s is None
    assert ended.duration_s == 30.0 and ended.started == started.started
    assert ended.time == T0 + timedelta(seconds=31)
    assert ended.text == f"{started.text} — ended after 30s"


def test_the_json_a_webhook_receives() -> None:
    run = Run()
    run.tick(gpu(0))
    run.tick(throttling(0))
    run.tick(gpu(0))
    doc = json.loads(run.events[1].to_json())
    assert doc == {
        "event": "ended", "kind": "throttle", "gpu": 0,
        "uuid": "GPU-00000000-aaaa-bbbb-cccc-000000000000", "host": "trainbox",
        "time": "2026-11-21T14:02:13.000Z", "started": "2026-11-21T14:02:12.000Z",
        "severity": "warning", "duration_s": 1.0, "reasons": ["sw_power_cap"],
        "values": {"clock_sm_mhz": 1200, "clock_sm_before_mhz": 1410,
                   "clock_sm_max_mhz": 1980, "temp_c": 60, "temp_slowdown_c": 85,
                   "power_w": 399.0, "power_limit_w": 400.0},
        "text": "GPU 0: SW power cap, SM clock 1410→1200 MHz, 399 W of 400 W limit — "
                "ended after 1s",
    }


def test_min_duration_keeps_a_blip_quiet_and_sends_a_long_one_late() -> None:
    run = Run(min_duration_s=5.0)
    run.tick(gpu(0), gpu(1))
    run.tick(throttling(0), gpu(1))  # t=1: a 2 s blip on GPU 0
    run.tick(throttling(0), gpu(1))
    run.tick(gpu(0), gpu(1))
    assert run.events == []
    for _ in range(8):  # t=4..11: GPU 1 throttles for 8 s
        run.tick(gpu(0), throttling(1))
    run.tick(gpu(0), gpu(1))
    assert run.pairs() == [("started", "throttle", 1), ("ended", "throttle", 1)]
    started, ended = run.events
    # Sent once it had lasted 5 s, saying when it began.
    assert started.started == T0 + timedelta(seconds=4)
    assert started.time == T0 + timedelta(seconds=9)
    assert ended.duration_s == 8.0


def test_a_condition_ended_before_it_was_sent_sends_no_ended() -> None:
    run = Run(min_duration_s=60.0)
    run.tick(gpu(0))
    for _ in range(10):
        run.tick(throttling(0))
    run.tick(gpu(0))
    assert run.events == []


def test_throttling_that_comes_back_at_once_is_a_new_pair() -> None:
    # The engine quietly reactivates the same alert (no new toast); a notification
    # already said "ended", so it says "started" again: pairs stay whole.
    run = Run()
    run.tick(gpu(0))
    run.tick(throttling(0))
    run.tick(gpu(0))
    run.tick(throttling(0))
    run.tick(throttling(0))
    run.tick(gpu(0))
    assert run.pairs() == [("started", "throttle", 0), ("ended", "throttle", 0),
                           ("started", "throttle", 0), ("ended", "throttle", 0)]
    assert run.events[2].started == T0 + timedelta(seconds=3)
    assert run.events[3].duration_s == 2.0


def test_xid_is_one_occurred_event_with_its_code_and_meaning() -> None:
    run = Run()
    run.tick(gpu(0))
    xid = GpuEvent(gpu_index=0, kind="xid", time=T0 + timedelta(seconds=0.5), xid=79,
                   meaning="GPU has fallen off the bus")
    run.tick(gpu(0), events=(xid,))
    for _ in range(70):  # the alert is held active for a while, then clears: no more events
        run.tick(gpu(0))
    assert run.pairs() == [("occurred", "xid", 0)]
    e = run.events[0]
    assert e.values == {"xid": 79, "meaning": "GPU has fallen off the bus"}
    assert e.text == "GPU 0: XID 79: GPU has fallen off the bus"
    assert e.severity == "error" and e.time == xid.time


def test_a_lost_gpu_starts_and_ends_and_the_others_are_quiet() -> None:
    run = Run()
    run.tick(gpu(0), gpu(1))
    run.tick(gpu(0), gpu(1, lost=True))
    run.tick(gpu(0), gpu(1, lost=True))
    run.tick(gpu(0), gpu(1))
    assert run.pairs() == [("started", "lost", 1), ("ended", "lost", 1)]
    assert run.events[0].severity == "error" and "is lost" in run.events[0].text


def test_alert_kinds_become_event_kinds() -> None:
    run = Run()
    hot = gpu(0, temp_c=82, mem_used_bytes=79 * 2**30, mem_temp_c=93,
              info=replace(gpu(0).info, temp_mem_max_c=95))
    run.tick(gpu(0))
    run.tick(hot)
    assert sorted(e.kind for e in run.events) == ["memory_full", "memory_temperature",
                                                  "temperature"]
    by_kind = {e.kind: e for e in run.events}
    assert by_kind["temperature"].values == {"temp_c": 82, "temp_slowdown_c": 85}
    assert by_kind["memory_temperature"].values == {"mem_temp_c": 93, "temp_mem_max_c": 95}
    assert by_kind["memory_full"].values["mem_pct"] == 98.8


def test_kinds_filter_sends_only_those() -> None:
    run = Run(kinds={"lost"})
    run.tick(gpu(0), gpu(1))
    run.tick(throttling(0), gpu(1, lost=True))
    run.tick(gpu(0), gpu(1))
    assert run.pairs() == [("started", "lost", 1), ("ended", "lost", 1)]


def test_an_alert_kind_from_a_later_feature_becomes_an_event_as_it_is() -> None:
    # A training-job alert: its own kind and values, no change to the event builder.
    snap = snapshot(0, [gpu(0)])
    alert = Alert(alert_key("job_slowdown", 0), 0, "job_slowdown", "warning",  # type: ignore[arg-type]
                  "GPU 0: job 4242 (train.py) is 31% slower since 14:02", snap.time,
                  values={"pid": 4242, "throughput_change_pct": -31.0})
    tracker = EventTracker()
    started = tracker.update(Frame(snap, alerts=(alert,), raised=(alert,)))
    later = snapshot(90, [gpu(0)])
    done = replace(alert, active=False, until=later.time)
    ended = tracker.update(Frame(later, cleared=(done,)))
    assert [(e.event, e.kind) for e in started + ended] == [("started", "job_slowdown"),
                                                            ("ended", "job_slowdown")]
    assert json.loads(started[0].to_json())["values"] == {"pid": 4242,
                                                          "throughput_change_pct": -31.0}
    assert ended[0].duration_s == 90.0
