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
                          "cuda_visible_devices": "0,1", "energy_j": None, "power_w": None,
                          "energy_per_step_j": None, "energy_per_sample_j": None,
                          "energy_per_token_j": None, "energy_estimate": None,
                          "energy_by_gpu": []}]
    assert snapshot_from_dict(d).jobs == (JOB,)
    # A job with energy, ended: both lists keep every figure.
    from dataclasses import replace

    spent = replace(JOB, energy_j=1234.5, power_w=250.0, energy_per_step_j=25.0,
                    energy_per_sample_j=0.5, energy_per_token_j=None, energy_estimate=True,
                    energy_by_gpu=((0, 1000.0), (1, 234.5)))
    d2 = snapshot_to_dict(snapshot(0, [gpu(0)], jobs=(spent,), jobs_ended=(spent,)))
    assert d2["jobs"][0]["energy_by_gpu"] == [{"gpu": 0, "energy_j": 1000.0},
                                              {"gpu": 1, "energy_j": 234.5}]
    back = snapshot_from_dict(d2)
    assert back.jobs == (spent,) and back.jobs_ended == (spent,)
    d2["jobs"][0]["energy_by_gpu"][0]["energy_j"] = "lots"
    with pytest.raises(SchemaError, match=r"jobs\[0\]\.energy_by_gpu\[0\]\.energy_j"):
        snapshot_from_dict(d2)
    d["jobs"][0]["samples_per_s"] = "fast"
    with pytest.raises(SchemaError, match=r"jobs\[0\]\.samples_per_s"):
        snapshot_from_dict(d)
    del d["jobs"]  # a recording from before jobs existed
    assert snapshot_from_dict(d).jobs == ()
