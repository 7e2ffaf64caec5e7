"""`gputui watch`'s rows with pods and energy, from hand-made snapshots: a GPU whose
processes are all in one pod carries that pod (as dcgm-exporter labels it); a shared GPU
does not; a job that ended prints its end-of-run line, its name escaped."""

from __future__ import annotations

import csv
import io
import json

from gputui.commands.watch import CSV_COLUMNS, _csv_line, _ended_lines, _jsonl_line, _rows
from gputui.telemetry.model import GpuEnergy, GpuProcess, JobReading
from tests.factories import gpu, snapshot


def in_pod(pid: int, gpu_index: int, pod: str, container: str = "trainer") -> GpuProcess:
    return GpuProcess(gpu_index, pid, 2**30, pod=pod, namespace="ml", pod_uid=f"uid-{pod}",
                      container=container, container_id="c" * 64, power_w=100.0,
                      energy_j=500.0, energy_method="exclusive", energy_estimate=False)


def test_rows_name_the_one_pod_of_a_gpu_and_list_its_processes() -> None:
    procs = (in_pod(1, 0, "llama-0"), in_pod(2, 0, "llama-0", container="sidecar"),
             in_pod(3, 1, "a"), GpuProcess(1, 4, 2**20))  # GPU 1: a pod and a host process
    snap = snapshot(0, [gpu(0), gpu(1)], processes=procs,
                    gpu_energy=(GpuEnergy(0, 1000.0, 100.0, 0.0, 50.0),))
    r0, r1 = _rows(snap)
    assert (r0["pod"], r0["namespace"], r0["container"]) == ("llama-0", "ml", None)
    assert r1["pod"] is None
    doc = json.loads(_jsonl_line(snap, r0))
    assert [p["pid"] for p in doc["processes"]] == [1, 2]
    assert doc["processes"][0]["pod"] == "llama-0" and doc["energy_seen_j"] == 1000.0
    row = next(csv.DictReader(io.StringIO(",".join(CSV_COLUMNS) + "\n" + _csv_line(r0))))
    assert (row["pod"], row["energy_idle_j"], row["idle_power_w"]) == ("llama-0", "100.0", "50.0")


def test_an_ended_job_prints_its_end_of_run_line_escaped() -> None:
    ended = JobReading(pid=5150, name="evil\x1b[2J", gpus=(0,), step=1234, samples=0,
                       tokens=0, samples_per_s=None, tokens_per_s=None, step_time_s=0.1,
                       updated=None, energy_j=56_700.0, power_w=460.0,
                       energy_per_step_j=46.0, energy_estimate=True)
    text = _ended_lines(snapshot(0, [gpu(0)], jobs_ended=(ended,)))
    assert text.endswith("job evil\\x1b[2J (PID 5150) ended at step 1,234: 56.7kJ, "
                         "46 J/step (estimate)\n")
    assert "\x1b" not in text
