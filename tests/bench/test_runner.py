"""The parent side of a benchmark: event streaming, cancel, crash, hang, orphans.

The fake worker (tests/bench/fake_worker.py) covers situations the real worker cannot be
asked for; the real worker runs on CPU with tiny shapes where torch is installed.
"""

from __future__ import annotations

import importlib.util
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import psutil
import pytest

from gputui.bench import events, results_store, runner
from gputui.bench.request import RunRequest, make_request
from gputui.bench.result import Result
from gputui.bench.runner import BenchRun, RunState

FAKE = Path(__file__).with_name("fake_worker.py")
REPO = Path(__file__).resolve().parents[2]
HAS_TORCH = importlib.util.find_spec("torch") is not None
needs_torch = pytest.mark.skipif(not HAS_TORCH, reason="needs torch (the bench extra)")

# Generous upper bounds so a stuck run fails the test instead of hanging the suite.
WAIT_S = 120.0


@pytest.fixture(autouse=True)
def data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("GPUTUI_DATA_DIR", str(tmp_path))
    return tmp_path


def fake_run(mode: str, **kw: Any) -> BenchRun:
    env = {**os.environ, "FAKE_WORKER_MODE": mode, "PYTHONPATH": str(REPO)}
    spec = make_request("cnn-infer", device="cpu")
    return BenchRun(spec, worker_cmd=[sys.executable, str(FAKE)], env=env, **kw)


def real_spec(**kw: Any) -> RunRequest:
    base: dict[str, Any] = {"model": "resnet18", "device": "cpu", "image_size": 32,
                            "batch_size": 2, "steps": 3, "warmup": 1, "threads": 1}
    base.update(kw)
    return make_request("cnn-infer", **base)


def hooks_env() -> dict[str, str]:
    return {**os.environ, "GPUTUI_BENCH_TEST_HOOKS": "1"}


def wait_for(run: BenchRun, kind: str) -> None:
    for event in run.events():
        if event.kind == kind:
            return
    raise AssertionError(f"run ended before a {kind!r} event")


def assert_gone(pid: int) -> None:
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        try:
            proc = psutil.Process(pid)
            if proc.status() == psutil.STATUS_ZOMBIE:
                return  # dead; only the reaper's bookkeeping is left
        except psutil.NoSuchProcess:
            return
        time.sleep(0.05)
    raise AssertionError(f"process {pid} is still alive")


# --------------------------------------------------------------------------- fake worker


def test_events_stream_in_order_and_garbage_is_ignored() -> None:
    seen: list[str] = []
    done: list[Result] = []
    run = fake_run("garbage", on_event=lambda e: seen.append(e.kind), on_done=done.append)
    run.start()
    kinds = [e.kind for e in run.events()]
    assert kinds == ["started", "warmup", "progress", "result"]
    assert seen == kinds
    assert run.wait(WAIT_S)
    assert run.state is RunState.OK
    assert run.ignored_lines >= 4
    assert done == [run.result]
    assert run.result is not None
    doc = run.result.to_dict()
    assert doc["id"] == run.id and doc["status"] == "ok" and doc["error"] is None
    assert doc["throughput"]["median"] == 100.0
    assert doc["throttle_episodes"] == []
    assert doc["started_at"] and doc["finished_at"]


def test_every_event_carries_the_common_fields() -> None:
    run = fake_run("ok").start()
    seen = list(run.events())
    # The fake worker sends started, three progress windows and a result: none missing.
    assert [e.kind for e in seen] == ["started", "progress", "progress", "progress", "result"]
    assert all(isinstance(e.t, float) and e.t >= 0 for e in seen)
    assert [e.t for e in seen] == sorted(e.t for e in seen)


def test_callback_errors_do_not_stop_the_run() -> None:
    def boom(event: events.Event) -> None:
        raise ValueError("ui bug")

    run = fake_run("ok", on_event=boom)
    doc = run.run().to_dict()
    assert doc["status"] == "ok"
    assert run.callback_errors and "ui bug" in run.callback_errors[0]


def test_crash_without_result_is_failed_with_stderr_tail() -> None:
    run = fake_run("crash")
    doc = run.run().to_dict()
    assert run.state is RunState.FAILED
    err = doc["error"]
    assert err["kind"] == "crash" and err["exit_code"] == 3
    assert "code 3" in err["message"]
    tail = err["stderr_tail"]
    assert len(tail) == runner.STDERR_TAIL_LINES
    assert tail[-1].startswith("RuntimeError: something broke")
    # Partial numbers from the progress windows seen before the crash.
    assert doc["throughput"]["median"] == 51.0
    assert doc["samples"] == 2 and doc["steps"] == 1


def test_worker_error_event_is_reported_with_batch_and_suggestion() -> None:
    doc = fake_run("oom").run().to_dict()
    assert doc["status"] == "failed"
    assert doc["error"]["kind"] == "oom"
    assert doc["error"]["batch_size"] == 512
    assert doc["error"]["suggestion"] == "try --batch-size 256"


def test_cancel_cooperative_worker_gives_its_partial_result() -> None:
    run = fake_run("term_partial").start()
    wait_for(run, "progress")
    run.cancel()
    assert run.wait(WAIT_S)
    assert run.state is RunState.CANCELLED
    assert run.result is not None and run.result.status == "cancelled"
    assert run.result.steps is not None and run.result.steps >= 1
    assert run.pid is not None
    assert_gone(run.pid)


def test_cancel_sigterm_deaf_worker_is_killed_after_grace() -> None:
    run = fake_run("deaf", grace_s=0.2).start()
    wait_for(run, "progress")
    run.cancel()
    assert run.wait(WAIT_S)
    assert run.result is not None
    doc = run.result.to_dict()
    assert doc["status"] == "cancelled"
    assert doc["throughput"]["median"] == 51.0  # from the progress events
    assert run.pid is not None
    assert_gone(run.pid)


def test_timeout_kills_a_hung_worker() -> None:
    run = fake_run("deaf", timeout_s=1.0, grace_s=0.2).start()
    assert run.wait(WAIT_S)
    assert run.result is not None
    doc = run.result.to_dict()
    assert doc["status"] == "failed"
    assert doc["error"]["kind"] == "timeout"
    assert run.pid is not None
    assert_gone(run.pid)


def test_grandchild_holding_stdout_is_reaped() -> None:
    run = fake_run("grandchild")
    doc = run.run()
    assert doc.status == "ok"
    line = next(x for x in run.stderr_tail if x.startswith("grandchild "))
    assert_gone(int(line.split()[1]))


def test_cancel_before_start_runs_nothing() -> None:
    run = fake_run("ok")
    run.cancel()
    run.start()
    assert run.wait(WAIT_S)
    doc = run.result
    assert doc is not None and doc.status == "cancelled"
    assert run.pid is None
    assert list(run.events()) == []


def test_worker_that_cannot_start_is_a_failed_result() -> None:
    run = BenchRun(make_request("cnn-infer", device="cpu"), worker_cmd=["/nonexistent/worker"])
    doc = run.run().to_dict()
    assert doc["status"] == "failed" and doc["error"]["kind"] == "crash"
    assert "cannot start worker" in doc["error"]["message"]


def test_kill_all_stops_every_live_worker() -> None:
    run = fake_run("deaf").start()
    wait_for(run, "progress")
    runner.kill_all(grace_s=0.2)
    assert run.wait(WAIT_S)
    assert run.pid is not None
    assert_gone(run.pid)


def test_worker_dies_with_its_parent(tmp_path: Path) -> None:
    # The parent is SIGKILLed: no atexit runs, so only PR_SET_PDEATHSIG can save us.
    script = tmp_path / "parent.py"
    script.write_text(textwrap.dedent(f"""
        import os, sys, time
        sys.path.insert(0, {str(REPO)!r})
        from gputui.bench.request import make_request
        from gputui.bench.runner import BenchRun
        env = dict(os.environ, FAKE_WORKER_MODE="deaf", PYTHONPATH={str(REPO)!r})
        run = BenchRun(make_request("cnn-infer", device="cpu"),
                       worker_cmd=[sys.executable, {str(FAKE)!r}], env=env).start()
        for event in run.events():
            if event.kind == "progress":
                break
        print(run.pid, flush=True)
        time.sleep(600)
    """))
    parent = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True)
    try:
        assert parent.stdout is not None
        worker_pid = int(parent.stdout.readline())
        assert psutil.pid_exists(worker_pid)
        parent.send_signal(signal.SIGKILL)
        parent.wait(WAIT_S)
        if not sys.platform.startswith("linux"):
            os.killpg(worker_pid, signal.SIGKILL)  # no PDEATHSIG elsewhere
        assert_gone(worker_pid)
    finally:
        if parent.poll() is None:
            parent.kill()


def test_make_request_rejects_bad_input() -> None:
    from gputui.errors import UsageError

    with pytest.raises(UsageError, match="unknown benchmark"):
        make_request("nope")
    with pytest.raises(UsageError, match="unknown model"):
        make_request("cnn-train", model="resnet9000")
    with pytest.raises(UsageError, match="fp16"):
        make_request("cnn-train", device="cpu", precision="fp16")
    with pytest.raises(UsageError):
        make_request("cnn-train", batch_size=0)
    with pytest.raises(TypeError):
        make_request("cnn-train", bogus=1)


def test_parse_line_ignores_non_events() -> None:
    assert runner.parse_line("hello") is None
    assert runner.parse_line('{"event": "progress"}') is None
    assert runner.parse_line(b"\xff\xfe") is None
    ok = runner.parse_line('{"event":"warmup","t":0.1,"v":1,"step":1,"of":2}')
    assert isinstance(ok, events.Warmup) and ok.step == 1 and ok.of == 2


# --------------------------------------------------------------------------- real worker


@needs_torch
def test_real_worker_cpu_tiny_run() -> None:
    run = BenchRun(real_spec())
    run.start()
    kinds = [e.kind for e in run.events()]
    assert kinds[0] == "started"
    assert kinds[-1] == "result"
    assert "progress" in kinds
    first_progress = kinds.index("progress")
    assert all(k == "warmup" for k in kinds[1:first_progress] if k != "phase")
    assert run.result is not None
    doc = run.result.to_dict()
    assert doc["status"] == "ok", doc.get("error")
    assert doc["benchmark"] == "cnn-infer" and doc["model"] == "resnet18"
    assert doc["throughput"]["median"] > 0
    assert doc["throttle_episodes"] == []  # a CPU run never samples NVML
    path = results_store.save(run.result)
    assert results_store.load(doc["id"]) == results_store.load_path(path) == run.result


@needs_torch
def test_real_worker_cancel_gives_a_cancelled_result() -> None:
    run = BenchRun(real_spec(steps=None, duration_s=600.0), grace_s=5.0).start()
    wait_for(run, "progress")
    run.cancel()
    assert run.wait(WAIT_S)
    doc = run.result
    assert doc is not None and doc.status == "cancelled", doc.error
    results_store.save(doc)
    assert [d.id for d in results_store.history().results] == [doc.id]
    assert run.pid is not None
    assert_gone(run.pid)


@needs_torch
@pytest.mark.parametrize("hook", ["crash", "exit"])
def test_real_worker_crash_hooks_fail_with_stderr(hook: str) -> None:
    run = BenchRun(real_spec(test_hook=hook), env=hooks_env())
    doc = run.run().to_dict()
    assert doc["status"] == "failed"
    assert doc["error"]["kind"] == "crash"
    assert isinstance(doc["error"]["stderr_tail"], list)


@needs_torch
def test_real_worker_hang_hook_times_out_and_leaves_no_process() -> None:
    run = BenchRun(real_spec(test_hook="hang"), env=hooks_env(), timeout_s=5.0, grace_s=0.5)
    run.start()
    assert run.wait(WAIT_S)
    doc = run.result
    assert doc is not None and doc.status == "failed"
    assert doc.error is not None and doc.error.kind == "timeout"
    assert run.pid is not None
    assert_gone(run.pid)


# --------------------------------------------------------------------------- throttle episodes


class _FakeSampler:
    """The telemetry a run reads (gputui.bench.telemetry_port.Telemetry): throttle
    episodes given by the test, ticking at 2 Hz (no reader of the run's own), no NVML."""

    interval = 0.5
    nvml = None

    def __init__(self, episodes: list[Any]) -> None:
        self._episodes = episodes
        self.listeners: list[Any] = []

    def episodes(self) -> list[Any]:
        return list(self._episodes)

    def subscribe(self, fn: Any) -> None:
        self.listeners.append(fn)

    def unsubscribe(self, fn: Any) -> None:
        self.listeners.remove(fn)

    def tick(self) -> Any:
        raise AssertionError("a shared sampler is never ticked by a run")

    def start(self, first_in: float = 0.0) -> None:
        raise AssertionError("a shared sampler is never started by a run")

    def close(self) -> None:
        raise AssertionError("a shared sampler is never closed by a run")


def _episode(gpu: int, start: Any) -> Any:
    from datetime import timedelta

    from gputui.telemetry.throttle import ThrottleEpisode

    # Ongoing since before the run: it overlaps whenever the watch stops (no race with
    # a start stamped a few ms into the future).
    return ThrottleEpisode(gpu_index=gpu, gpu_uuid=f"GPU-{gpu}", mask=0x20,
                           start=start - timedelta(seconds=1), end=None,
                           peak_temp_c=90, min_clock_sm_mhz=900, clock_sm_before_mhz=1800)


def _started(env: dict[str, Any], nproc: int = 1) -> events.Started:
    return events.Started(pid=1, benchmark="cnn-train",
                          spec={"device": "cuda:0", "nproc": nproc}, env=env, t=0.1)


def test_throttle_episodes_follow_the_workers_nvml_index() -> None:
    # torch's cuda:0 is NVML GPU 1 here (CUDA orders fastest first, NVML by PCI bus):
    # only the worker, which matched the UUID, knows.
    from datetime import UTC, datetime

    now = datetime.now(UTC)
    sampler = _FakeSampler([_episode(0, now), _episode(1, now)])
    run = BenchRun(make_request("cnn-train", device="cuda:0"), sampler=sampler)
    run._handle(_started({"device": "cuda:0", "compute_capability": "8.0",
                          "nvml": {"nvml_index": 1, "uuid": "GPU-1"}}))
    episodes = run._stop_watch()
    assert [e["gpu"] for e in episodes] == [1]

    # No NVML answer from the worker: keep every GPU's episodes rather than guess.
    run = BenchRun(make_request("cnn-train", device="cuda:0"), sampler=sampler)
    run._handle(_started({"device": "cuda:0", "compute_capability": "8.0"}))
    assert sorted(e["gpu"] for e in run._stop_watch()) == [0, 1]

    # DDP uses one GPU per rank: every GPU's episodes count.
    run = BenchRun(make_request("cnn-train", device="cuda:0", nproc=2), sampler=sampler)
    run._handle(_started({"device": "cuda:0", "nvml": {"nvml_index": 1}}, nproc=2))
    assert sorted(e["gpu"] for e in run._stop_watch()) == [0, 1]

    # A CPU run never watches.
    run = BenchRun(make_request("cnn-train", device="cpu"), sampler=sampler)
    run._handle(_started({"device": "cpu"}))
    assert run._stop_watch() == []
    assert runner.worker_nvml_index({"nvml": {"nvml_index": True}}) is None
