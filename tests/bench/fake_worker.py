"""A stand-in for `python -m gputui.bench.worker`, driven by env FAKE_WORKER_MODE.

It speaks the real event protocol (through gputui.bench.events) so runner tests can
exercise situations the real worker cannot be asked for: garbage on stdout, a
SIGTERM-deaf process, a grandchild holding the pipe, events after a crash.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

from gputui.bench import events

T0 = time.monotonic()


def emit(event: events.Event) -> None:
    print(events.encode(event, time.monotonic() - T0), flush=True)


def result_doc(spec: dict, status: str = "ok", steps: int = 3) -> dict:
    return {
        "benchmark": spec["benchmark"], "model": spec.get("model"), "device": "cpu",
        "device_name": "Fake CPU", "precision": "fp32", "batch_size": 2, "status": status,
        "throughput": {"median": 100.0, "mean": 100.0, "unit": "images/s", "p10": 90.0,
                       "p90": 110.0},
        "latency_ms": None, "phases_ms": None,
        "step_time_ms": {"p50": 20.0, "p90": 22.0, "p99": 25.0, "median": 20.0},
        "peak_memory_bytes": 1000, "energy_j_per_sample": None, "avg_power_w": None,
        "settings": {"batch_size": 2}, "env": {"torch": "fake"}, "steps": steps,
        "samples": steps * 2, "points": [], "error": None, "extra": {},
    }


def started(spec: dict) -> None:
    emit(events.Started(os.getpid(), spec["benchmark"], spec, {"device": "cpu",
                                                               "device_name": "Fake CPU"}))


def progress(step: int) -> None:
    # Batch 2, one step per window: the window's samples and the loop's total so far.
    emit(events.Progress(step=step, of=None, elapsed_s=step * 0.1, duration_s=None,
                         throughput=50.0 + step, unit="images/s", window_s=0.1,
                         samples=2, total_samples=step * 2))


def main() -> int:
    spec = json.loads(sys.argv[sys.argv.index("--spec-json") + 1])
    mode = os.environ.get("FAKE_WORKER_MODE", "ok")
    if mode == "garbage":
        print("Some library banner", flush=True)
        started(spec)
        print("{not json", flush=True)
        print('{"event": "progress"}', flush=True)  # not a valid event: fields missing
        print("[1, 2, 3]", flush=True)
        emit(events.Warmup(1, 1))
        print("", flush=True)
        progress(1)
        sys.stdout.buffer.write(b"\xff\xfe binary junk\n")
        sys.stdout.flush()
        emit(events.ResultReady(result_doc(spec)))
        return 0
    if mode == "crash":
        started(spec)
        progress(1)
        for i in range(80):
            print(f"stderr line {i}", file=sys.stderr, flush=True)
        print("RuntimeError: something broke in the fake worker", file=sys.stderr, flush=True)
        return 3
    if mode == "oom":
        started(spec)
        emit(events.error("oom", "CUDA out of memory at batch size 512", batch_size=512,
                          suggestion="try --batch-size 256"))
        return 1
    if mode == "term_partial":
        # Cooperative cancel as the protocol describes: stop, send a cancelled result.
        stop = {"flag": False}
        signal.signal(signal.SIGTERM, lambda *_: stop.__setitem__("flag", True))
        started(spec)
        step = 0
        while not stop["flag"]:
            step += 1
            progress(step)
            time.sleep(0.05)
        emit(events.ResultReady(result_doc(spec, status="cancelled", steps=step)))
        return 0
    if mode == "deaf":
        # Ignores SIGTERM and never reports: only SIGKILL ends it.
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        started(spec)
        progress(1)
        while True:
            time.sleep(0.1)
    if mode == "windows_then_hang":
        # Five windows of the timed loop, then a hang that ignores SIGTERM: only the
        # runner's time limit (and SIGKILL) ends it, with no result from the worker.
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        started(spec)
        for step in range(1, 6):
            progress(step)
        while True:
            time.sleep(0.1)
    if mode == "cuda_timed":
        # A CUDA run as the runner sees it: a GPU found by UUID (NVML index 0), then a
        # timed loop of ~1.5 s with real progress times, then the result.
        emit(events.Started(os.getpid(), spec["benchmark"], spec,
                            {"device": "cuda:0", "device_name": "NVIDIA A100-SXM4-80GB",
                             "compute_capability": "8.0", "nvml": {"nvml_index": 0}}))
        t0 = time.monotonic()
        for step in range(1, 11):
            time.sleep(0.15)
            emit(events.Progress(step=step, of=None, elapsed_s=time.monotonic() - t0,
                                 duration_s=None, throughput=100.0, unit="images/s",
                                 window_s=0.15, samples=2, total_samples=step * 2))
        doc = result_doc(spec)
        doc["device"] = "cuda:0"
        doc.update(json.loads(os.environ.get("FAKE_RESULT_PATCH", "{}")))
        emit(events.ResultReady(doc))
        return 0
    if mode == "grandchild":
        # A child that inherits stdout and outlives the worker: the pipe stays open.
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
        print(f"grandchild {child.pid}", file=sys.stderr, flush=True)
        started(spec)
        emit(events.ResultReady(result_doc(spec)))
        return 0
    started(spec)
    for step in (1, 2, 3):
        progress(step)
    doc = result_doc(spec)
    # A test may dress the result as another device or settings (a CUDA run, say).
    doc.update(json.loads(os.environ.get("FAKE_RESULT_PATCH", "{}")))
    emit(events.ResultReady(doc))
    return 0


if __name__ == "__main__":
    sys.exit(main())
