"""Benchmark runs one after another, headless: start, cancel, queue, and save.

The CLI and the TUI both drive a RunQueue; neither writes results itself. The rules about
what is saved live here: every finished run is saved atomically under the results dir
(and to its `output` path when one was asked for), except a run the worker rejected as
invalid settings (nothing ran, so there is nothing to keep).

Callbacks run on the runner's threads, never on the caller's: `on_event(planned, event)`
for each worker event, `on_finished(finished)` once the result is final and saved (the
file write happens on that thread too, never on a UI event loop). A TUI turns them into
posted messages.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from gputui.bench import events, results_store
from gputui.bench.request import RunRequest
from gputui.bench.result import Result
from gputui.bench.runner import DEFAULT_GRACE_S, DEFAULT_TIMEOUT_S, BenchRun
from gputui.bench.telemetry_port import Telemetry
from gputui.errors import GputuiError


@dataclass(frozen=True)
class Planned:
    """A validated run request waiting to run (or running), with where its result goes."""

    request: RunRequest
    label: str
    id: str = field(default_factory=results_store.new_id)
    timeout_s: float | None = DEFAULT_TIMEOUT_S
    output: Path | None = None  # a copy of the result, written atomically too


@dataclass(frozen=True)
class Finished:
    planned: Planned
    result: Result
    path: Path | None  # where the result was saved; None when it was not
    save_error: str | None = None

    @property
    def invalid(self) -> bool:
        """The worker found the settings impossible here: nothing ran, nothing saved."""
        return self.result.status == "failed" and self.result.error is not None and \
            self.result.error.kind == "invalid"


EventHook = Callable[[Planned, events.Event], None]
FinishedHook = Callable[[Finished], None]
StartedHook = Callable[[Planned, BenchRun], None]
# Called with the final result before it is saved (on the runner's thread): a front-end
# may add what only it knows (the TUI: throttle attribution from its sampler).
AnnotateHook = Callable[[Planned, Result], Result]


@dataclass(frozen=True, slots=True)
class RunOptions:
    """What every run the queue starts gets beyond its request: telemetry to share (the
    monitor's sampler: NVML is not opened twice), and, for tests, the worker's command
    and environment."""

    sampler: Telemetry | None = None
    worker_cmd: Sequence[str] | None = None
    env: Mapping[str, str] | None = None


def should_save(result: Result) -> bool:
    return not (result.status == "failed" and result.error is not None
                and result.error.kind == "invalid")


def save(planned: Planned, result: Result) -> Finished:
    if not should_save(result):
        return Finished(planned, result, None)
    try:
        path = results_store.save(result)
    except (OSError, GputuiError) as exc:
        return Finished(planned, result, None, f"cannot save result {result.id}: "
                                               f"{getattr(exc, 'strerror', None) or exc}")
    if planned.output is not None:
        try:
            results_store.write_atomic(planned.output, results_store.dumps(result))
        except OSError as exc:
            return Finished(planned, result, path, f"result {result.id} saved, but cannot "
                                                   f"write {planned.output}: "
                                                   f"{exc.strerror or exc}")
    return Finished(planned, result, path)


class RunQueue:
    """One run at a time; the next starts when the previous one is saved."""

    def __init__(
        self,
        *,
        on_event: EventHook | None = None,
        on_finished: FinishedHook | None = None,
        on_started: StartedHook | None = None,
        annotate: AnnotateHook | None = None,
        auto_advance: bool = True,
        grace_s: float = DEFAULT_GRACE_S,
        run_options: RunOptions | None = None,
    ) -> None:
        self.on_event = on_event
        self.on_finished = on_finished
        self.on_started = on_started
        self.annotate = annotate
        # False: the next run starts only when the owner calls advance(), on its own
        # thread. A TUI does that on its main thread, where the runner can arm
        # PR_SET_PDEATHSIG (the worker then dies with the app even if it is SIGKILLed).
        self.auto_advance = auto_advance
        self.grace_s = grace_s
        self.run_options = run_options or RunOptions()
        self._lock = threading.Lock()
        self._pending: list[Planned] = []
        self._current: tuple[Planned, BenchRun] | None = None
        self._idle = threading.Event()
        self._idle.set()
        self._closed = False
        self.last: Finished | None = None

    # ------------------------------------------------------------------ state

    @property
    def pending(self) -> list[Planned]:
        with self._lock:
            return list(self._pending)

    @property
    def current(self) -> tuple[Planned, BenchRun] | None:
        with self._lock:
            return self._current

    @property
    def busy(self) -> bool:
        return not self._idle.is_set()

    # ------------------------------------------------------------------ commands

    def submit(self, planned: Planned) -> int:
        """Queue a run; it starts now if nothing runs. Returns its place (0: running)."""
        with self._lock:
            if self._closed:
                raise GputuiError("the benchmark queue is closed")
            self._pending.append(planned)
            place = len(self._pending) - (0 if self._current is None else -1) - 1
        self._start_next()
        return place

    def advance(self) -> None:
        """Start the next waiting run if none runs (see auto_advance)."""
        self._start_next()

    def remove(self, index: int) -> Planned | None:
        with self._lock:
            if 0 <= index < len(self._pending):
                return self._pending.pop(index)
        return None

    def clear(self) -> int:
        with self._lock:
            n = len(self._pending)
            self._pending.clear()
        return n

    def cancel(self) -> bool:
        """Cancel the running benchmark (its partial result is saved). False if none."""
        cur = self.current
        if cur is None:
            return False
        cur[1].cancel()
        return True

    def kill(self) -> None:
        cur = self.current
        if cur is not None:
            cur[1].kill()

    def wait(self, timeout: float | None = None) -> bool:
        """True once nothing runs and nothing waits."""
        return self._idle.wait(timeout)

    def shutdown(self, grace_s: float = 1.0, save_wait_s: float = 5.0) -> None:
        """Drop the queue and stop the running benchmark (SIGTERM, then SIGKILL), then
        wait (bounded) until its partial result is saved. Blocking: not on a UI loop."""
        with self._lock:
            self._closed = True
            self._pending.clear()
            cur = self._current
        if cur is None:
            return
        run = cur[1]
        run.cancel()
        if not run.wait(grace_s):
            run.kill()
            run.wait(grace_s)
        self._idle.wait(save_wait_s)

    # ------------------------------------------------------------------ internals

    def _start_next(self) -> None:
        with self._lock:
            if self._current is not None or not self._pending or self._closed:
                if self._current is None and not self._pending:
                    self._idle.set()
                return
            planned = self._pending.pop(0)
            self._idle.clear()
            o = self.run_options
            run = BenchRun(
                planned.request, result_id=planned.id, timeout_s=planned.timeout_s,
                grace_s=self.grace_s,
                on_event=lambda ev, p=planned: self._event(p, ev),
                on_done=lambda res, p=planned: self._done(p, res),
                sampler=o.sampler, worker_cmd=o.worker_cmd, env=o.env)
            self._current = (planned, run)
        if self.on_started is not None:
            with contextlib.suppress(Exception):
                self.on_started(planned, run)
        run.start()

    def _event(self, planned: Planned, event: events.Event) -> None:
        if self.on_event is not None:
            self.on_event(planned, event)

    def _done(self, planned: Planned, result: Result) -> None:
        if self.annotate is not None:
            with contextlib.suppress(Exception):  # a front-end's extra never loses a run
                result = self.annotate(planned, result)
        finished = save(planned, result)
        self.last = finished
        with self._lock:
            self._current = None
        try:
            if self.on_finished is not None:
                self.on_finished(finished)
        finally:
            if self.auto_advance or self._closed:
                self._start_next()
            elif not self.pending:
                self._idle.set()
