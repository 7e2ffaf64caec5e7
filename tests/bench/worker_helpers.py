"""Run the benchmark worker as the runner does: a subprocess speaking JSON lines."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from typing import Any

from gputui.bench import events

TINY_CNN: dict[str, Any] = {"device": "cpu", "model": "resnet18", "image_size": 32,
                            "batch_size": 2, "steps": 3, "warmup": 1, "threads": 1}


@dataclass
class Run:
    rc: int
    events: list[dict[str, Any]]
    stderr: str

    def of(self, kind: str) -> list[dict[str, Any]]:
        return [e for e in self.events if e["event"] == kind]

    @property
    def result(self) -> dict[str, Any]:
        (ev,) = self.of("result")
        return ev["result"]

    @property
    def error(self) -> dict[str, Any]:
        (ev,) = self.of("error")
        return ev


def worker_cmd(spec: dict[str, Any]) -> list[str]:
    return [sys.executable, "-m", "gputui.bench.worker", "--spec-json", json.dumps(spec)]


def worker_env(hooks: bool = False) -> dict[str, str]:
    env = dict(os.environ)
    env.pop("GPUTUI_BENCH_TEST_HOOKS", None)
    if hooks:
        env["GPUTUI_BENCH_TEST_HOOKS"] = "1"
    return env


def run_worker(spec: dict[str, Any], *, hooks: bool = False, timeout: float = 240) -> Run:
    proc = subprocess.run(worker_cmd(spec), capture_output=True, text=True, timeout=timeout,
                          env=worker_env(hooks))
    lines = [ln for ln in proc.stdout.splitlines() if ln.strip()]
    evs = [events.decode(ln) for ln in lines]
    # The worker keeps stdout for events only: every line must be a valid event.
    assert all(e is not None for e in evs), (proc.stdout, proc.stderr)
    # The tests read the wire format: each decoded event back as its JSON object.
    return Run(proc.returncode, [wire(e) for e in evs if e is not None], proc.stderr)


def wire(ev: events.Event) -> dict[str, Any]:
    return {"event": ev.kind, "t": ev.t, **events.to_dict(ev)}


RESULT_FIELDS = (
    "id", "benchmark", "model", "device", "device_name", "precision", "batch_size", "status",
    "throughput", "latency_ms", "phases_ms", "step_time_ms", "peak_memory_bytes",
    "energy_j_per_sample", "avg_power_w", "throttle_episodes", "settings", "env",
    "started_at", "finished_at", "duration_s", "steps", "samples", "points", "error", "extra",
)


def check_ok(run: Run) -> dict[str, Any]:
    assert run.rc == 0, run.stderr[-3000:]
    assert run.events[0]["event"] == "started"
    assert run.events[-1]["event"] == "result"
    ts = [e["t"] for e in run.events]
    assert ts == sorted(ts)
    doc = run.result
    for f in RESULT_FIELDS:
        assert f in doc, f
    assert doc["status"] == "ok"
    assert doc["device"] == "cpu"
    assert doc["energy_j_per_sample"] is None  # no NVML device on CPU
    assert doc["error"] is None
    env = doc["env"]
    for f in ("torch", "torchvision", "python", "platform", "cpu", "device_name"):
        assert env[f], f
    s = doc["settings"]
    for f in ("precision", "threads", "tf32_matmul", "tf32_cudnn", "cudnn_benchmark",
              "channels_last", "compile", "timing"):
        assert f in s, f
    assert s["timing"] == "host_clock"
    return doc
