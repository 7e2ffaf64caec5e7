"""Parent side of a benchmark: start the worker, stream its events, cancel, time out.

The benchmark always runs in a child process (`python -m gputui.bench.worker`), so a
crash, an OOM or a hung CUDA kernel never takes the monitor down. This module never
imports torch.

Two ways to drive a run:

* callbacks: ``BenchRun(request, on_event=cb, on_done=done).start()``; both callbacks run
  on the runner's reader thread (the run queue in `gputui.bench.run_queue` uses them;
  the TUI turns them into posted messages). ``cancel()`` is safe from any thread.
* an iterator: ``for event in run.events(): ...``; when it ends, ``run.result`` holds
  the final Result (`gputui.bench.verdict` decides it).

The run request (`gputui.bench.request.RunRequest`) crosses to the worker once, as the
JSON of its `--spec-json`. Events are typed (`gputui.bench.events`), decoded once as they
arrive.

Guarantees: the worker gets its own session/process group (a terminal Ctrl-C reaches
only the parent, which decides); cancel = SIGTERM to the group, SIGKILL after a grace
period; a time limit turns into a cancel and a failed result with error kind "timeout";
the group is killed when the parent exits (atexit, plus PR_SET_PDEATHSIG on Linux for
when the parent is killed outright).
"""

from __future__ import annotations

import atexit
import contextlib
import dataclasses
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

from gputui.bench import events, results_store
from gputui.bench.config import GpuConfig, read_gpu_config
from gputui.bench.ddp_topology import read_topology
from gputui.bench.request import RunRequest
from gputui.bench.result import Result, with_episodes
from gputui.bench.telemetry_port import Telemetry
from gputui.bench.throttle_watch import ThrottleWatch, worker_nvml_index
from gputui.bench.throttle_window import WINDOW_INTERVAL_S, TimedSpans, WindowRecorder, window_stats
from gputui.bench.verdict import RunFacts, decide
from gputui.telemetry.model import iso_utc

Event = events.Event
EventCallback = Callable[[Event], None]
DoneCallback = Callable[[Result], None]

__all__ = ["BenchRun", "RunState", "kill_all", "worker_nvml_index"]

DEFAULT_GRACE_S = 5.0
DEFAULT_TIMEOUT_S = 1800.0
STDERR_TAIL_LINES = 50
PROTOCOL_VERSION = 1


class RunState(StrEnum):
    PENDING = "pending"
    RUNNING = "running"
    CANCELLING = "cancelling"
    OK = "ok"
    CANCELLED = "cancelled"
    FAILED = "failed"

    @property
    def finished(self) -> bool:
        return self in (RunState.OK, RunState.CANCELLED, RunState.FAILED)


def worker_command(spec_json: str) -> list[str]:
    """The child's command line; `spec_json` is the request's one serialisation."""
    return [sys.executable, "-m", "gputui.bench.worker", "--spec-json", spec_json]


# --------------------------------------------------------------------------- event parsing


def parse_line(line: str | bytes) -> Event | None:
    """One stdout line → a typed event, or None for anything that is not one.

    torch, CUDA and third-party code may print to stdout, and a malformed event is no
    better: such lines are counted and skipped rather than failing the run (a missing
    result is reported as such when the worker exits).
    """
    try:
        return events.decode(line)
    except Exception:
        return None


# --------------------------------------------------------------------------- orphan control

_live_lock = threading.Lock()
_live: set[BenchRun] = set()


def kill_all(grace_s: float = 1.0) -> None:
    """Stop every worker this process started: for atexit and the CLI's signal handlers."""
    with _live_lock:
        runs = list(_live)
    for run in runs:
        run._signal_group(signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    for run in runs:
        proc = run._proc
        if proc is None:
            continue
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=max(0.0, deadline - time.monotonic()))
        run._signal_group(signal.SIGKILL)


atexit.register(kill_all)


def _pdeathsig_preexec() -> Callable[[], None] | None:
    """A preexec_fn that makes the kernel SIGKILL the worker when its parent dies.

    Resolved before fork so the child only makes one libc call. PDEATHSIG fires when
    the *thread* that forked exits, so it is only armed from the main thread (a TUI
    worker thread may end long before the benchmark does).
    """
    if not sys.platform.startswith("linux"):
        return None
    if threading.current_thread() is not threading.main_thread():
        return None
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        prctl = libc.prctl
    except (OSError, AttributeError):
        return None
    parent = os.getpid()
    pr_set_pdeathsig = 1

    def preexec() -> None:
        prctl(pr_set_pdeathsig, int(signal.SIGKILL), 0, 0, 0)
        if os.getppid() != parent:  # the parent died before prctl took effect
            os._exit(1)

    return preexec


# --------------------------------------------------------------------------- the run


class BenchRun:
    """One benchmark in a child process. Create, `start()`, then iterate or wait."""

    def __init__(
        self,
        request: RunRequest,
        *,
        on_event: EventCallback | None = None,
        on_done: DoneCallback | None = None,
        timeout_s: float | None = DEFAULT_TIMEOUT_S,
        grace_s: float = DEFAULT_GRACE_S,
        worker_cmd: Sequence[str] | None = None,
        env: Mapping[str, str] | None = None,
        result_id: str | None = None,
        telemetry: bool = True,
        sampler: Telemetry | None = None,
    ) -> None:
        self.id = result_id or results_store.new_id()
        self.request = request
        self.on_event = on_event
        self.on_done = on_done
        self.timeout_s = timeout_s
        self.grace_s = grace_s
        self.worker_cmd = list(worker_cmd) if worker_cmd is not None else None
        self.env = dict(env) if env is not None else None
        self.telemetry = telemetry
        self.sampler = sampler

        self.result: Result | None = None
        self.started_event: events.Started | None = None
        self.last_progress: events.Progress | None = None
        self.error_event: events.Failed | None = None
        self.result_event: events.ResultReady | None = None
        self.ignored_lines = 0
        self.callback_errors: list[str] = []

        self._state = RunState.PENDING
        self._lock = threading.Lock()
        self._done = threading.Event()
        self._stdout_done = threading.Event()
        self._queue: queue.Queue[Event | None] = queue.Queue()
        self._stderr_tail: deque[str] = deque(maxlen=STDERR_TAIL_LINES)
        self._proc: subprocess.Popen[bytes] | None = None
        self._pgid: int | None = None
        self._cancel_requested = False
        self._timed_out = False
        self._kill_timer: threading.Timer | None = None
        self._timeout_timer: threading.Timer | None = None
        self._threads: list[threading.Thread] = []
        self._window_rates: list[float] = []
        self._samples_seen = 0
        self._started_at = ""
        self._t0 = 0.0
        self._watch: ThrottleWatch | None = None
        self._spans = TimedSpans()  # when the worker's timed loops ran (parent clock)
        self._recorder: WindowRecorder | None = None
        self._window_watch: ThrottleWatch | None = None  # when the given sampler is slow
        self._gpu_index: int | None = None  # the worker's GPU, NVML numbering

    # ----------------------------------------------------------------- public API

    @property
    def state(self) -> RunState:
        return self._state

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc else None

    @property
    def stderr_tail(self) -> list[str]:
        return list(self._stderr_tail)

    @property
    def cancel_requested(self) -> bool:
        return self._cancel_requested

    def start(self) -> BenchRun:
        with self._lock:
            if self._state is not RunState.PENDING:
                raise RuntimeError("a BenchRun can be started once")
            self._state = RunState.RUNNING
        spec_json = self.request.to_json()
        if self.worker_cmd:
            cmd = [*self.worker_cmd, "--spec-json", spec_json]
        else:
            cmd = worker_command(spec_json)
        env = dict(os.environ if self.env is None else self.env)
        # Events must arrive as they happen, not when a 4 KiB pipe buffer fills.
        env["PYTHONUNBUFFERED"] = "1"
        self._started_at = iso_utc(datetime.now(UTC))
        self._t0 = time.monotonic()
        if self._cancel_requested:  # cancelled before it started: nothing to run
            self._finish(returncode=None)
            return self
        try:
            self._proc = subprocess.Popen(
                cmd,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=env,
                start_new_session=True,
                preexec_fn=_pdeathsig_preexec(),
                close_fds=True,
            )
        except OSError as exc:
            self._stderr_tail.append(f"cannot start worker: {exc}")
            self._finish(returncode=None, spawn_error=str(exc))
            return self
        self._pgid = self._proc.pid  # start_new_session: the worker leads its own group
        with _live_lock:
            _live.add(self)
        if self.timeout_s is not None:
            self._timeout_timer = threading.Timer(self.timeout_s, self._on_timeout)
            self._timeout_timer.daemon = True
            self._timeout_timer.start()
        for target, name in (
            (self._read_stdout, "stdout"), (self._read_stderr, "stderr"), (self._wait_exit, "wait")
        ):
            t = threading.Thread(target=target, name=f"bench-{name}-{self.id}", daemon=True)
            self._threads.append(t)
            t.start()
        return self

    def cancel(self, reason: str = "cancelled") -> None:
        """SIGTERM the worker's group now, SIGKILL it after the grace period."""
        with self._lock:
            if self._state.finished or self._state is RunState.PENDING:
                if self._state is RunState.PENDING:
                    self._cancel_requested = True
                return
            first = not self._cancel_requested
            self._cancel_requested = True
            self._state = RunState.CANCELLING
        if not first:
            return
        self._signal_group(signal.SIGTERM)
        self._kill_timer = threading.Timer(self.grace_s, self._signal_group, (signal.SIGKILL,))
        self._kill_timer.daemon = True
        self._kill_timer.start()

    def kill(self) -> None:
        """SIGKILL now (a second Ctrl-C): no partial numbers from the worker."""
        self._cancel_requested = True
        self._signal_group(signal.SIGKILL)

    def wait(self, timeout: float | None = None) -> bool:
        """True once the result is final."""
        return self._done.wait(timeout)

    def events(self) -> Iterator[Event]:
        """Every event in order, until the worker is gone and the result is final."""
        while True:
            item = self._queue.get()
            if item is None:
                self._queue.put(None)  # so a second iterator (or a late one) ends too
                return
            yield item

    def run(self) -> Result:
        """Start, wait, return the result: the simplest use (scripts, fidelity)."""
        self.start()
        self.wait()
        assert self.result is not None
        return self.result

    # ----------------------------------------------------------------- threads

    def _read_stdout(self) -> None:
        proc = self._proc
        assert proc is not None and proc.stdout is not None
        try:
            for raw in proc.stdout:
                event = parse_line(raw)
                if event is None:
                    if raw.strip():
                        self.ignored_lines += 1
                    continue
                self._handle(event)
        except (OSError, ValueError):
            pass  # the pipe broke because the worker was killed; its exit code says why
        finally:
            self._stdout_done.set()

    def _wait_exit(self) -> None:
        proc = self._proc
        assert proc is not None
        returncode = proc.wait()
        # A grandchild that inherited stdout (a distributed rank, a compile worker) would
        # keep the pipe open forever after the worker died: give the last events a moment,
        # then kill the rest of the group so the reader sees EOF.
        if not self._stdout_done.wait(2.0):
            self._signal_group(signal.SIGKILL)
            self._stdout_done.wait()
        for t in self._threads:
            if t is not threading.current_thread():
                t.join(timeout=2.0)
        self._finish(returncode=returncode)

    def _read_stderr(self) -> None:
        proc = self._proc
        assert proc is not None and proc.stderr is not None
        with contextlib.suppress(OSError, ValueError):
            for raw in proc.stderr:
                line = raw.decode("utf-8", errors="replace").rstrip("\n")
                if line:
                    self._stderr_tail.append(line)

    def _handle(self, event: Event) -> None:
        if isinstance(event, events.Started):
            self.started_event = event
            self._start_watch(event)
        elif isinstance(event, events.Progress):
            self.last_progress = event
            self._spans.progress(time.monotonic(), event.elapsed_s)
            self._samples_seen += event.samples
            if event.throughput > 0:
                self._window_rates.append(float(event.throughput))
        elif isinstance(event, events.Failed):
            self.error_event = event
        elif isinstance(event, events.ResultReady):
            self.result_event = event
        self._queue.put(event)
        self._call(self.on_event, event)

    def _call(self, callback: Callable[[Any], None] | None, arg: Any) -> None:
        if callback is None:
            return
        try:
            callback(arg)
        except Exception as exc:
            # A UI bug must not stop event streaming or leave the worker unsupervised.
            self.callback_errors.append(f"{type(exc).__name__}: {exc}")

    def _on_timeout(self) -> None:
        if self._state.finished:
            return
        self._timed_out = True
        self.cancel("timeout")

    def _signal_group(self, sig: signal.Signals) -> None:
        if self._pgid is None:
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self._pgid, sig)

    # ----------------------------------------------------------------- the result

    def _finish(self, returncode: int | None, spawn_error: str | None = None) -> None:
        for timer in (self._timeout_timer, self._kill_timer):
            if timer is not None:
                timer.cancel()
        # Grandchildren (distributed ranks, compile workers) share the group: reap them.
        # Then forget the group id: once empty, the kernel may hand that id out again.
        self._signal_group(signal.SIGKILL)
        self._pgid = None
        with _live_lock:
            _live.discard(self)
        result = decide(RunFacts(
            result_id=self.id, request=self.request, started_at=self._started_at,
            finished_at=iso_utc(datetime.now(UTC)),
            elapsed_s=time.monotonic() - self._t0 if self._t0 else None,
            started=self.started_event, last_progress=self.last_progress,
            window_rates=tuple(self._window_rates), samples_seen=self._samples_seen,
            result=self.result_event, error=self.error_event,
            cancel_requested=self._cancel_requested, timed_out=self._timed_out,
            timeout_s=self.timeout_s, returncode=returncode, spawn_error=spawn_error,
            stderr_tail=tuple(self._stderr_tail)))
        recorder = self._recorder
        # Read once, at the end, through the watcher's NVML: its reader threads have
        # opened the device by now (at the start it may still be opening).
        reader = self._window_watch or self._watch
        gpu_config = (read_gpu_config(reader.sampler.nvml, self._gpu_index)
                      if reader is not None else GpuConfig())
        episodes = self._stop_watch()
        if episodes:
            result = with_episodes(result, episodes)
        if recorder is not None:
            window = window_stats(recorder.readings(), self._spans.spans)
            if window is not None:
                result = dataclasses.replace(result, window=window)
        # A DDP run's GPUs, by the UUIDs its ranks reported: how each pair is connected.
        topo = (read_topology(reader.sampler.nvml, result.settings.get("rank_gpu_uuids"))
                if reader is not None else None)
        result = dataclasses.replace(result, config=dataclasses.replace(
            result.config, gpu=gpu_config, topology=topo))
        with self._lock:
            self.result = result
            self._state = RunState(result.status)
        self._done.set()
        self._queue.put(None)
        self._call(self.on_done, result)

    # ----------------------------------------------------------------- telemetry

    def _start_watch(self, started: events.Started) -> None:
        if not self.telemetry:
            return
        env, spec = started.env, started.spec
        device = str(env.get("device") or spec.get("device") or self.request.device or "")
        if device in ("auto", "cuda") and ("compute_capability" in env or device == "cuda"):
            device = "cuda:0"  # auto picks the first CUDA GPU; the env says it found one
        if not device.startswith("cuda"):
            return
        # Several ranks use several GPUs: keep every GPU's episodes then.
        multi = int(spec.get("nproc") or self.request.nproc or 1) > 1
        gpu_index = None if multi else worker_nvml_index(env)
        self._watch = ThrottleWatch.start(gpu_index, self.sampler)
        self._gpu_index = gpu_index
        source = self._watch
        if source is not None and self.sampler is not None \
                and self.sampler.interval > WINDOW_INTERVAL_S:
            # The window needs ≥ 2 Hz; a monitor sampling slower (the TUI's default 1 s)
            # gets a throttle-profile reader of our own for the run's length.
            self._window_watch = source = ThrottleWatch.start(gpu_index, None)
        if source is not None:
            recorder = WindowRecorder(gpu_index)
            source.listen(recorder)
            self._recorder = recorder

    def _stop_watch(self) -> list[dict[str, Any]]:
        watch, self._watch = self._watch, None
        window_watch, self._window_watch = self._window_watch, None
        if window_watch is not None:
            with contextlib.suppress(Exception):
                window_watch.stop()
        if watch is None:
            return []
        if self._recorder is not None:
            watch.unlisten(self._recorder)
        try:
            return watch.stop()
        except Exception:
            return []
