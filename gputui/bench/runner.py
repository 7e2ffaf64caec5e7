"""Parent side of a benchmark: start the worker, stream its events, cancel, time out.

The benchmark always runs in a child process (`python -m gputui.bench.worker`), so a
crash, an OOM or a hung CUDA kernel never takes the monitor down. This module never
imports torch.

Two ways to drive a run:

* callbacks, for the TUI: ``BenchRun(spec, on_event=cb, on_done=done).start()``; both
  callbacks run on the runner's reader thread, so a Textual app wraps them in
  ``app.call_from_thread``. ``cancel()`` is safe from any thread.
* an iterator, for the CLI: ``for event in run.events(): ...``; when it ends,
  ``run.result`` holds the final result document.

Guarantees: the worker gets its own session/process group (a terminal Ctrl-C reaches
only the parent, which decides); cancel = SIGTERM to the group, SIGKILL after a grace
period; a time limit turns into a cancel and a failed result with error kind "timeout";
the group is killed when the parent exits (atexit, plus PR_SET_PDEATHSIG on Linux for
when the parent is killed outright).
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import queue
import signal
import statistics
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

from gputui.bench import results
from gputui.bench.catalog import SPEC_DEFAULTS, validate_spec
from gputui.bench.events import parse_event

Event = dict[str, Any]
EventCallback = Callable[[Event], None]
DoneCallback = Callable[[results.Result], None]

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


def make_spec(benchmark: str, **settings: Any) -> dict[str, Any]:
    """A validated worker spec with every contract key; None means "the default".

    Raises UsageError (one line) for anything the catalog rejects, before a worker starts.
    """
    unknown = set(settings) - set(SPEC_DEFAULTS) - {"params"}
    if unknown:
        raise TypeError(f"unknown spec keys: {', '.join(sorted(unknown))}")
    given = {k: v for k, v in settings.items() if v is not None}
    return validate_spec({**given, "benchmark": benchmark})


def worker_command(spec: Mapping[str, Any]) -> list[str]:
    return [sys.executable, "-m", "gputui.bench.worker", "--spec-json", json.dumps(dict(spec))]


# --------------------------------------------------------------------------- event parsing


def parse_line(line: str | bytes) -> Event | None:
    """One stdout line → a validated event, or None for anything that is not one.

    torch, CUDA and third-party code may print to stdout, and a malformed event is no
    better: such lines are counted and skipped rather than failing the run (a missing
    result is reported as such when the worker exits).
    """
    try:
        return parse_event(line)
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
        spec: Mapping[str, Any],
        *,
        on_event: EventCallback | None = None,
        on_done: DoneCallback | None = None,
        timeout_s: float | None = DEFAULT_TIMEOUT_S,
        grace_s: float = DEFAULT_GRACE_S,
        worker_cmd: Sequence[str] | None = None,
        env: Mapping[str, str] | None = None,
        result_id: str | None = None,
        telemetry: bool = True,
        sampler: Any | None = None,
    ) -> None:
        self.id = result_id or results.new_id()
        self.spec: dict[str, Any] = dict(spec)
        self.on_event = on_event
        self.on_done = on_done
        self.timeout_s = timeout_s
        self.grace_s = grace_s
        self.worker_cmd = list(worker_cmd) if worker_cmd is not None else None
        self.env = dict(env) if env is not None else None
        self.telemetry = telemetry
        self.sampler = sampler

        self.result: results.Result | None = None
        self.started_event: Event | None = None
        self.last_progress: Event | None = None
        self.error_event: Event | None = None
        self.result_event: Event | None = None
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
        self._progress_tp: list[float] = []
        self._started_at = ""
        self._t0 = 0.0
        self._watch: _ThrottleWatch | None = None

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
        if self.worker_cmd:
            cmd = [*self.worker_cmd, "--spec-json", json.dumps(self.spec)]
        else:
            cmd = worker_command(self.spec)
        env = dict(os.environ if self.env is None else self.env)
        # Events must arrive as they happen, not when a 4 KiB pipe buffer fills.
        env["PYTHONUNBUFFERED"] = "1"
        self._started_at = results.utc_now_iso()
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

    def run(self) -> results.Result:
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
        kind = event.get("event")
        if kind == "started":
            self.started_event = event
            self._start_watch(event)
        elif kind == "progress":
            self.last_progress = event
            tp = event.get("throughput")
            if isinstance(tp, int | float) and not isinstance(tp, bool) and tp > 0:
                self._progress_tp.append(float(tp))
        elif kind == "error":
            self.error_event = event
        elif kind == "result":
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
        doc = self._build_result(returncode, spawn_error)
        episodes = self._stop_watch()
        if episodes:
            doc["throttle_episodes"] = episodes
        with self._lock:
            self.result = doc
            self._state = RunState(doc["status"])
        self._done.set()
        self._queue.put(None)
        self._call(self.on_done, doc)

    def _build_result(self, returncode: int | None, spawn_error: str | None) -> results.Result:
        doc = results.empty_result(self.id, self.spec)
        if self.started_event is not None:
            env = self.started_event.get("env")
            if isinstance(env, dict):
                doc["env"] = env
                doc["device_name"] = env.get("device_name")
                if env.get("device"):
                    doc["device"] = env.get("device")
        worker_doc = (self.result_event or {}).get("result")
        if isinstance(worker_doc, dict):
            doc.update(worker_doc)
        doc["id"] = self.id
        doc["schema"] = results.SCHEMA_VERSION
        doc["throttle_episodes"] = []
        doc["started_at"] = doc.get("started_at") or self._started_at
        doc["finished_at"] = doc.get("finished_at") or results.utc_now_iso()
        if doc.get("duration_s") is None and self._t0:
            doc["duration_s"] = round(time.monotonic() - self._t0, 3)
        if not isinstance(doc.get("settings"), dict) or not doc["settings"]:
            doc["settings"] = {k: v for k, v in self.spec.items() if k != "test_hook"}

        tail = self.stderr_tail
        if spawn_error is not None:
            doc["status"] = "failed"
            doc["error"] = {"kind": "crash", "message": f"cannot start worker: {spawn_error}"}
        elif self._timed_out:
            doc["status"] = "failed"
            doc["error"] = {
                "kind": "timeout",
                "message": f"time limit of {self.timeout_s:g} s reached; worker stopped",
            }
            self._fill_partial(doc)
        elif isinstance(worker_doc, dict) and worker_doc.get("status") in results.STATUSES:
            pass  # the worker's own verdict (ok, or cancelled with partial numbers)
        elif isinstance(worker_doc, dict):
            doc["status"] = "cancelled" if self._cancel_requested else "ok"
        elif self.error_event is not None:
            ev = self.error_event
            doc["status"] = "failed"
            doc["error"] = {
                "kind": ev.get("kind") or "crash",
                "message": ev.get("message") or "worker reported an error",
                "batch_size": ev.get("batch_size"),
                "suggestion": ev.get("suggestion"),
            }
            if ev.get("batch_size") is not None:
                doc["batch_size"] = ev.get("batch_size")
        elif self._cancel_requested:
            doc["status"] = "cancelled"
            self._fill_partial(doc)
        elif returncode is None:
            doc["status"] = "failed"
            doc["error"] = {"kind": "crash", "message": _exit_words(None)}
        else:
            doc["status"] = "failed"
            doc["error"] = {"kind": "crash", "message": _exit_words(returncode)}
            doc["error"]["exit_code"] = returncode
            if returncode is not None and returncode < 0:
                doc["error"]["signal"] = _signal_name(-returncode)
            self._fill_partial(doc)
        if doc["status"] == "failed" and isinstance(doc.get("error"), dict):
            doc["error"].setdefault("stderr_tail", tail)
        return doc

    def _fill_partial(self, doc: results.Result) -> None:
        """Numbers from the progress windows seen so far, when the worker gave no result."""
        if doc.get("throughput") is None and self._progress_tp:
            tps = sorted(self._progress_tp)
            unit = str((self.last_progress or {}).get("unit") or "")
            doc["throughput"] = {
                "median": statistics.median(tps),
                "mean": statistics.fmean(tps),
                "unit": unit,
                "p10": _quantile(tps, 0.10),
                "p90": _quantile(tps, 0.90),
            }
        last = self.last_progress or {}
        if doc.get("steps") is None and isinstance(last.get("step"), int):
            doc["steps"] = last["step"]
        if doc.get("samples") is None and isinstance(last.get("samples"), int):
            doc["samples"] = last["samples"]

    # ----------------------------------------------------------------- telemetry

    def _start_watch(self, started: Event) -> None:
        if not self.telemetry:
            return
        env = started.get("env") if isinstance(started.get("env"), dict) else {}
        spec = started.get("spec") if isinstance(started.get("spec"), dict) else {}
        device = str(env.get("device") or spec.get("device") or self.spec.get("device") or "")
        if device in ("auto", "cuda") and ("compute_capability" in env or device == "cuda"):
            device = "cuda:0"  # auto picks the first CUDA GPU; the env says it found one
        if not device.startswith("cuda"):
            return
        # Several ranks use several GPUs: keep every GPU's episodes then.
        multi = int(spec.get("nproc") or self.spec.get("nproc") or 1) > 1
        gpu_index = None if multi else worker_nvml_index(env)
        self._watch = _ThrottleWatch.start(gpu_index, self.sampler)

    def _stop_watch(self) -> list[dict[str, Any]]:
        watch, self._watch = self._watch, None
        if watch is None:
            return []
        try:
            return watch.stop()
        except Exception:
            return []


def _quantile(sorted_values: list[float], q: float) -> float:
    if len(sorted_values) == 1:
        return sorted_values[0]
    pos = q * (len(sorted_values) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)


def _signal_name(signum: int) -> str:
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


def _exit_words(returncode: int | None) -> str:
    if returncode is None:
        return "worker did not start"
    if returncode < 0:
        return f"worker was killed by {_signal_name(-returncode)} without reporting a result"
    return f"worker exited with code {returncode} without reporting a result"


# --------------------------------------------------------------------------- throttle episodes


class _ThrottleWatch:
    """Samples NVML during a CUDA run and returns the throttle episodes that overlapped it.

    Everything is optional: no NVML, no telemetry module, or a device we cannot map gives
    no episodes, never an error. A caller that already runs a sampler (the TUI) passes
    it in, so NVML is not opened twice.
    """

    def __init__(self, sampler: Any, own: bool, gpu_index: int | None, start: datetime) -> None:
        self._sampler = sampler
        self._own = own
        self._gpu_index = gpu_index
        self._start = start

    @classmethod
    def start(cls, gpu_index: int | None, sampler: Any | None) -> _ThrottleWatch | None:
        """Watch NVML device `gpu_index` (None: keep every GPU's episodes)."""
        start = datetime.now(UTC)
        if sampler is not None:
            return cls(sampler, False, gpu_index, start)
        try:
            from gputui.telemetry.sampler import Sampler

            # Processes are the expensive NVML call and say nothing about throttling.
            own = Sampler.open(interval=0.5, process_every=1_000_000)
        except Exception:
            return None
        if getattr(own, "nvml", None) is None:
            with contextlib.suppress(Exception):
                own.close()
            return None
        try:
            own.start()
        except Exception:
            return None
        return cls(own, True, gpu_index, start)

    def stop(self) -> list[dict[str, Any]]:
        end = datetime.now(UTC)
        if self._own:
            with contextlib.suppress(Exception):
                self._sampler.tick()  # close an episode that ended since the last tick
            with contextlib.suppress(Exception):
                self._sampler.close()
        out = []
        for ep in self._sampler.episodes():
            ep_end = ep.end or end
            if ep.start <= end and ep_end >= self._start and (
                self._gpu_index is None or ep.gpu_index == self._gpu_index
            ):
                out.append(ep.to_dict(now=end))
        return out


def worker_nvml_index(env: Mapping[str, Any]) -> int | None:
    """The NVML index of the worker's GPU, as the worker found it by UUID.

    torch's cuda:N and NVML's index N are different numberings (CUDA_VISIBLE_DEVICES,
    CUDA_DEVICE_ORDER=FASTEST_FIRST by default, MIG), so the runner never guesses from
    the device string: without the worker's answer (no NVML, UUID not found) it keeps
    every GPU's episodes; each episode names its own gpu_index.
    """
    nvml = env.get("nvml")
    if not isinstance(nvml, Mapping):
        return None
    index = nvml.get("nvml_index")
    return index if isinstance(index, int) and not isinstance(index, bool) else None
