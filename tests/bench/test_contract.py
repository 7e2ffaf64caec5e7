"""The typed contract, torch-free: every event survives encode → decode unchanged, a Result
survives to_dict → from_dict unchanged, and the statistics every side shares."""

from __future__ import annotations

import json

import pytest

from gputui.bench import events, stats
from gputui.bench.request import RunRequest
from gputui.bench.result import DamagedResult, ErrorInfo, Result, ResultBuilder

EVENTS: list[events.Event] = [
    events.Started(pid=7, benchmark="cnn-train", spec={"batch_size": 2}, env={"torch": "x"}),
    events.Warmup(step=1, of=3),
    events.Progress(step=4, of=10, elapsed_s=1.5, duration_s=None, throughput=12.5,
                    unit="images/s", window_s=0.5, samples=8, total_samples=16),
    events.Phase(phases_ms={"forward": 1.0, "backward": 2.0}),
    events.Point(label="fp16", batch_size=None, throughput=250.0, unit="TFLOP/s",
                 extra={"dtype": "fp16", "pct_of_peak": 25.3}),
    events.Point(label="batch 64", batch_size=64, throughput=None, unit="images/s",
                 ok=False, error="out of memory"),
    events.ResultReady(result={"benchmark": "matmul", "status": "ok"}),
    events.error("oom", "CUDA out of\nmemory", batch_size=64, suggestion="try 32"),
]


@pytest.mark.parametrize("event", EVENTS, ids=lambda e: e.kind)
def test_every_event_round_trips(event: events.Event) -> None:
    line = events.encode(event, 2.25)
    body = json.loads(line)
    assert body["event"] == event.kind and body["v"] == events.VERSION and body["t"] == 2.25
    decoded = events.decode(line)
    assert decoded is not None
    assert type(decoded) is type(event)
    assert events.to_dict(decoded) == events.to_dict(event)
    assert decoded.t == 2.25


def test_error_messages_are_one_line() -> None:
    assert events.error("cuda", "a\n  b\tc").message == "a b c"
    with pytest.raises(ValueError):
        events.error("bogus", "x")


def test_result_round_trips_through_json() -> None:
    b = ResultBuilder.for_request("20260101-000000-000-aaaaaa",
                                  RunRequest("cnn-infer", model="resnet18", device="cpu",
                                             precision="fp32", batch_size=4))
    b.status = "cancelled"
    b.throughput = stats.headline(120, 3.0, [38.0, 40.0, 42.0], "images/s")
    b.step_time_ms = stats.spread([10.0, 11.0, 12.0])
    b.add_point(EVENTS[4])  # type: ignore[arg-type]
    b.add_counts(12, 120)
    b.settings["channels_last"] = False
    b.error = ErrorInfo("timeout", "time limit", stderr_tail=("a", "b"))
    result = b.build()
    again = Result.from_dict(json.loads(json.dumps(result.to_dict())))
    assert again == result
    assert again.headline == 40.0 and again.samples == 120 and again.steps == 12


def test_damaged_fields_are_named() -> None:
    with pytest.raises(DamagedResult, match="settings is not an object"):
        Result.from_dict({"benchmark": "x", "settings": 5})
    with pytest.raises(DamagedResult, match="status"):
        Result.from_dict({"benchmark": "x", "status": "great"})
    with pytest.raises(DamagedResult, match="points"):
        Result.from_dict({"benchmark": "x", "points": [{"label": 3}]})
    with pytest.raises(DamagedResult, match="newer"):
        Result.from_dict({"benchmark": "x", "schema": 99})


def test_the_headline_is_samples_over_seconds_with_window_spread() -> None:
    tp = stats.headline(300, 2.0, [100.0, 150.0, 200.0], "x/s")
    assert tp.value == 150.0 and tp.mean == tp.value
    assert (tp.p10, tp.median, tp.p90) == (110.0, 150.0, 190.0)
    assert tp.windows == 3 and tp.few and tp.definition == stats.HEADLINE_DEFINITION
    assert stats.headline(0, 2.0, [], "x/s").value is None  # nothing measured: no number
    assert stats.headline(10, 0.0, [5.0], "x/s").value is None


def test_schema_1_throughput_migrates_to_a_named_headline() -> None:
    old = stats.Throughput.from_dict({"median": 90.0, "mean": 80.0, "unit": "x/s"})
    assert old.value == 80.0 and old.definition == stats.HEADLINE_DEFINITION
    median_only = stats.Throughput.from_dict({"median": 90.0, "mean": None, "unit": "x/s"})
    assert median_only.value == 90.0 and "per-step" in median_only.definition


def test_few_values_are_marked() -> None:
    assert stats.percentile_note(20) == "from 20 values"
    assert stats.percentile_note(stats.FEW_VALUES) == ""
    assert stats.percentile_note(None) == ""
    s = stats.spread([float(i) for i in range(1, 101)])
    assert s is not None and s.n == 100 and not s.few and s.p50 == 50.5
