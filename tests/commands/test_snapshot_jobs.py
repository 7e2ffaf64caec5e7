"""Jobs in `gputui snapshot` (tables) and in the snapshot schema (JSON, recordings)."""

from __future__ import annotations

import io
from datetime import timedelta

import pytest
from rich.console import Console

from gputui.commands.snapshot_view import render_snapshot
from gputui.telemetry.model import JobReading
from gputui.telemetry.schema import SchemaError, snapshot_from_dict, snapshot_to_dict
from tests.factories import T0, gpu, snapshot

JOB = JobReading(pid=5150, name="train_gpt.py", gpus=(0, 1), step=1200, samples=38400,
                 tokens=0, samples_per_s=318.25, tokens_per_s=None, step_time_s=0.1006,
                 updated=T0 + timedelta(seconds=3), cuda_visible_devices="0,1")


def test_the_table_lists_each_job_with_its_rates() -> None:
    out = io.StringIO()
    console = Console(file=out, width=160, color_system=None)
    for item in render_snapshot(snapshot(0, [gpu(0), gpu(1)], jobs=(JOB,)), 160):
        console.print(item)
    row = next(line for line in out.getvalue().splitlines() if "train_gpt.py" in line)
    for cell in ("5150", "0,1", "1200", "318", "N/A", "101 ms"):
        assert cell in row


def test_jobs_round_trip_through_the_schema() -> None:
    d = snapshot_to_dict(snapshot(0, [gpu(0)], jobs=(JOB,)))
    assert d["jobs"] == [{"pid": 5150, "name": "train_gpt.py", "gpus": [0, 1], "step": 1200,
                          "samples": 38400, "tokens": 0, "samples_per_s": 318.25,
                          "tokens_per_s": None, "step_time_s": 0.1006,
                          "updated": "2026-11-21T14:02:14.000Z",
                          "cuda_visible_devices": "0,1"}]
    assert snapshot_from_dict(d).jobs == (JOB,)
    d["jobs"][0]["samples_per_s"] = "fast"
    with pytest.raises(SchemaError, match=r"jobs\[0\]\.samples_per_s"):
        snapshot_from_dict(d)
    del d["jobs"]  # a recording from before jobs existed
    assert snapshot_from_dict(d).jobs == ()
