"""Benchmarks started from the TUI: the queue, the run in progress, what it has shown so far.

One BenchSession per app (`bench_session(app)`), not per screen: a run goes on while the
user is back on the monitor, and the bench screen shows it again when reopened.

Threads: BenchRun calls `on_event`/`on_done` on its own threads. Those callbacks only
stamp the wall-clock time, build immutable points, save the finished result (a file write
with fsync: never on the event loop) and then hop onto the event loop with
`app.call_from_thread`; all state the screen reads is changed on the event loop only.
Nothing here waits for a process on the event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import statistics
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gputui.bench import results
from gputui.bench.attribution import Attribution, ThroughputPoint, attribute
from gputui.bench.attribution import _inside as _window_inside  # one rule for "throttled"
from gputui.bench.events import PHASES
from gputui.bench.runner import (
    DEFAULT_GRACE_S,
    DEFAULT_TIMEOUT_S,
    BenchRun,
    worker_nvml_index,
)
from gputui.errors import GputuiError
from gputui.telemetry.throttle import ThrottleEpisode

if TYPE_CHECKING:
    from textual.app import App

SESSION_ATTR = "_gputui_bench_session"
FINISHED_KEPT = 20
SHUTDOWN_GRACE_S = 1.0  # at exit: SIGTERM, this long for a partial result, then SIGKILL

View = Callable[[str], None]


@dataclass(frozen=True)
class Planned:
    """A validated spec waiting in the queue."""

    spec: Mapping[str, Any]
    label: str


def spec_label(spec: Mapping[str, Any]) -> str:
    parts = [str(spec.get("benchmark"))]
    if spec.get("model"):
        parts.append(str(spec["model"]))
    parts.append(f"· {spec.get('device') or 'auto'} · {spec.get('precision') or 'fp32'}")
    if spec.get("batch_size"):
        parts.append(f"· batch {spec['batch_size']}")
    if spec.get("mode"):
        parts.append(f"· {spec['mode']}")
    flags = [name for name, key in (("sweep", "sweep"), ("channels-last", "channels_last"),
                                    ("compile", "compile"), ("profile", "profile"))
             if spec.get(key)]
    if (spec.get("nproc") or 1) > 1:
        flags.append(f"nproc {spec['nproc']}")
    if spec.get("threads"):
        flags.append(f"threads {spec['threads']}")
    if flags:
        parts.append("· " + " ".join(flags))
    return " ".join(parts)


def gpu_of(device: str | None, env: Mapping[str, Any] | None = None) -> int | None:
    """The NVML index of the GPU a run uses, or None (CPU, or not known yet).

    The same rule as the runner's throttle watch (the worker's own answer, found by
    UUID), so the screen and the result talk about the same GPU; cuda:N is not NVML's N.
    """
    if not str(device or "").startswith(("cuda", "auto")):
        return None
    return worker_nvml_index(env or {})


def run_episodes(sampler: Any, gpu_index: int | None, start: datetime,
                 end: datetime) -> list[ThrottleEpisode]:
    """The sampler's throttle episodes on this GPU that overlapped [start, end]."""
    if sampler is None or gpu_index is None:
        return []
    try:
        episodes = sampler.episodes()
    except Exception:
        return []
    return [ep for ep in episodes
            if ep.gpu_index == gpu_index and ep.start <= end and (ep.end or end) >= start]


@dataclass
class LiveRun:
    """What the screen shows about one run. Changed on the event loop only."""

    planned: Planned
    id: str
    run: BenchRun | None = None
    started_wall: datetime = field(default_factory=lambda: datetime.now(UTC))
    finished_wall: datetime | None = None
    stage: str = "starting"  # starting, loading, warmup, running, cancelling, done
    device: str | None = None
    device_name: str | None = None
    gpu_index: int | None = None
    warmup: tuple[int, int] | None = None
    progress: dict[str, Any] | None = None
    points: list[ThroughputPoint] = field(default_factory=list)
    step_ms: list[float] = field(default_factory=list)
    unit: str = ""
    phases_ms: dict[str, float] | None = None
    sweep_points: list[dict[str, Any]] = field(default_factory=list)
    error_event: dict[str, Any] | None = None
    result: dict[str, Any] | None = None
    saved_path: Path | None = None
    save_error: str | None = None
    attributions: list[Attribution] = field(default_factory=list)
    stderr_tail: list[str] = field(default_factory=list)
    gpu_mem_max: int | None = None  # device memory used, max seen by the monitor (GPU runs)
    # Written by the runner's reader thread only; read by on_done after the reader ended.
    thread_points: list[ThroughputPoint] = field(default_factory=list)
    # Set once the result is saved (on the runner's thread): exit waits for this, not
    # only for the worker, so a cancelled run's partial result is on disk before we go.
    saved: threading.Event = field(default_factory=threading.Event)

    @property
    def spec(self) -> Mapping[str, Any]:
        return self.planned.spec

    @property
    def finished(self) -> bool:
        return self.result is not None

    @property
    def status(self) -> str:
        return str(self.result.get("status")) if self.result else self.stage

    @property
    def fraction(self) -> float | None:
        """Progress 0..1 of the timed part, None while unknown."""
        if self.result is not None:
            return 1.0 if self.result.get("status") == "ok" else None
        p = self.progress
        if not p:
            return 0.0 if self.stage in ("warmup", "loading", "starting") else None
        if p.get("of"):
            return min(1.0, float(p["step"]) / float(p["of"]))
        if p.get("duration_s"):
            return min(1.0, float(p["elapsed_s"]) / float(p["duration_s"]))
        return None

    @property
    def current(self) -> float | None:
        return self.points[-1].throughput if self.points else None

    @property
    def stopped_fraction(self) -> float:
        """Where a run that did not finish ok stopped, 0..1: steps done of the planned
        steps, or seconds elapsed of the planned duration."""
        p = self.progress or {}
        try:
            if p.get("of"):
                return min(1.0, float(p["step"]) / float(p["of"]))
            if p.get("duration_s"):
                return min(1.0, float(p.get("elapsed_s") or 0.0) / float(p["duration_s"]))
        except (TypeError, ValueError, ZeroDivisionError):
            return 0.0
        return 0.0

    @property
    def median(self) -> float | None:
        """The median of the progress windows' rates: the chart's own basis, during and
        after the run (the result's per-step median is another quantity)."""
        return statistics.median(p.throughput for p in self.points) if self.points else None

    @property
    def overall(self) -> float | None:
        """The finished run's overall rate: total samples ÷ wall time (throughput.mean)."""
        tp = (self.result or {}).get("throughput")
        value = tp.get("mean") if isinstance(tp, Mapping) else None
        return float(value) if isinstance(value, int | float) and value > 0 else None

    @property
    def error(self) -> dict[str, Any] | None:
        if self.result is not None and isinstance(self.result.get("error"), dict):
            return self.result["error"]
        return None

    def throttled_flags(self, episodes: list[ThrottleEpisode], now: datetime) -> list[bool]:
        """Per progress window: did it overlap an episode (the attribution's rule)?"""
        if not episodes:
            return [False] * len(self.points)
        return [any(_window_inside(p, ep, now) for ep in episodes) for p in self.points]


class BenchSession:
    """The queue and the current run of one app. Methods are called on the event loop."""

    def __init__(self, app: App[Any]) -> None:
        self.app = app
        # Settable by tests (a fake worker) and by callers that want other limits.
        self.worker_cmd: list[str] | None = None
        self.env: dict[str, str] | None = None
        self.timeout_s: float | None = DEFAULT_TIMEOUT_S
        self.grace_s: float = DEFAULT_GRACE_S
        self.queue: list[Planned] = []
        self.current: LiveRun | None = None
        self.last: LiveRun | None = None
        self.finished_runs: list[LiveRun] = []
        self.form: dict[str, Any] = {}  # the form as last left, restored on reopening
        self._views: list[View] = []
        self._closing = False
        self._loop_thread = threading.get_ident()

    # --- views -----------------------------------------------------------------------------

    def add_view(self, view: View) -> None:
        self._views.append(view)

    def remove_view(self, view: View) -> None:
        if view in self._views:
            self._views.remove(view)

    def _changed(self, what: str) -> None:
        for view in list(self._views):
            try:
                view(what)
            except Exception:  # a view being torn down must not stop the run's bookkeeping
                import logging

                logging.getLogger("gputui").exception("bench view update failed")
        hook = getattr(self.app, "bench_changed", None)  # the monitor's header
        if callable(hook):
            hook()

    @property
    def sampler(self) -> Any:
        return getattr(self.app, "sampler", None)

    @property
    def shown(self) -> LiveRun | None:
        """The run the live pane shows: the one in progress, else the last one."""
        return self.current or self.last

    def episodes_for(self, live: LiveRun) -> list[ThrottleEpisode]:
        end = live.finished_wall or datetime.now(UTC)
        return run_episodes(self.sampler, live.gpu_index, live.started_wall, end)

    # --- queue -----------------------------------------------------------------------------

    def submit(self, spec: Mapping[str, Any]) -> int:
        """Queue a validated spec; returns how many runs are ahead of it (0: started now)."""
        ahead = len(self.queue) + (self.current is not None)
        self.queue.append(Planned(dict(spec), spec_label(spec)))
        self._changed("queue")
        self._start_next()
        return ahead

    def remove_queued(self, index: int) -> Planned | None:
        """Drop one waiting run (0 = next to start); None if there is no such entry."""
        if not 0 <= index < len(self.queue):
            return None
        planned = self.queue.pop(index)
        self._changed("queue")
        return planned

    def clear_queue(self) -> int:
        n = len(self.queue)
        self.queue.clear()
        self._changed("queue")
        return n

    def cancel(self) -> bool:
        """SIGTERM the current run now, SIGKILL after the grace period (BenchRun.cancel)."""
        live = self.current
        if live is None or live.run is None or live.finished:
            return False
        live.run.cancel()  # a signal and a timer: returns at once
        live.stage = "cancelling"
        self._changed("live")
        return True

    def _start_next(self) -> None:
        if self.current is not None or not self.queue or self._closing:
            return
        planned = self.queue.pop(0)
        live = LiveRun(planned, results.new_id())
        run = BenchRun(
            planned.spec,
            on_event=lambda ev: self._event_thread(live, ev),
            on_done=lambda doc: self._done_thread(live, doc),
            timeout_s=self.timeout_s,
            grace_s=self.grace_s,
            worker_cmd=self.worker_cmd,
            env=self.env,
            result_id=live.id,
            sampler=self.sampler,  # the monitor's sampler: NVML is not opened twice
        )
        live.run = run
        self.current = live
        self._changed("start")
        # Popen is a fork + exec (milliseconds). On the event loop thread, which is the
        # main thread when the app runs for real, so the runner arms PDEATHSIG: the
        # worker dies with us even if we are SIGKILLed.
        run.start()

    # --- runner threads -> event loop ---------------------------------------------------------

    def _hop(self, fn: Callable[..., Any], *args: Any) -> None:
        if self._closing:
            return
        if threading.get_ident() == self._loop_thread:
            # A worker that failed to spawn finishes inside start(), on the loop itself.
            self.app.call_later(fn, *args)
            return
        with contextlib.suppress(RuntimeError):  # the app stopped: nothing left to show
            self.app.call_from_thread(fn, *args)

    def _event_thread(self, live: LiveRun, event: dict[str, Any]) -> None:
        # Stamped when received here, not when shown: the loop may be busy for a moment,
        # and the attribution compares these times with the sampler's episodes.
        received = datetime.now(UTC)
        point = None
        if event.get("event") == "progress":
            tp = event.get("throughput")
            window = event.get("window_s")
            if isinstance(tp, int | float) and tp > 0 and isinstance(window, int | float):
                point = ThroughputPoint(received, float(window), float(tp))
                live.thread_points.append(point)
        self._hop(self._on_event, live, event, point)

    def _done_thread(self, live: LiveRun, doc: dict[str, Any]) -> None:
        try:
            self._finish_thread(live, doc)
        finally:
            live.saved.set()  # even if saving failed: nobody waits forever

    def _finish_thread(self, live: LiveRun, doc: dict[str, Any]) -> None:
        ended = datetime.now(UTC)
        started = live.run.started_event if live.run is not None else None
        env = (started or {}).get("env") or {}
        gpu = gpu_of(env.get("device") or live.spec.get("device"), env)
        attributions = attribute(list(live.thread_points),
                                 run_episodes(self.sampler, gpu, live.started_wall, ended),
                                 run_end=ended)
        if attributions:
            unit = str((doc.get("throughput") or {}).get("unit") or "")
            extra = dict(doc.get("extra") or {})
            extra["throttle_attribution"] = [
                {"text": a.text(unit), "drop_pct": a.drop_pct, "inside": a.inside,
                 "outside": a.outside, "episode": a.episode.to_dict(now=ended)}
                for a in attributions]
            doc["extra"] = extra
        error = doc.get("error") if isinstance(doc.get("error"), dict) else None
        path: Path | None = None
        save_error: str | None = None
        # As the CLI: an "invalid" error means nothing ran (no CUDA here...): not kept.
        if not (doc.get("status") == "failed" and error and error.get("kind") == "invalid"):
            try:
                path = results.save(doc)
            except (OSError, GputuiError) as exc:
                save_error = str(exc)
        tail = live.run.stderr_tail if live.run is not None else []
        self._hop(self._on_done, live, doc, path, save_error, attributions, ended, tail)

    # --- on the event loop ------------------------------------------------------------------

    def _on_event(self, live: LiveRun, event: dict[str, Any],
                  point: ThroughputPoint | None) -> None:
        kind = event.get("event")
        if kind == "started":
            env = event.get("env") if isinstance(event.get("env"), dict) else {}
            live.device = str(env.get("device") or live.spec.get("device") or "")
            live.device_name = env.get("device_name")
            live.gpu_index = gpu_of(live.device, env)
            live.stage = "loading"
        elif kind == "warmup":
            live.warmup = (int(event["step"]), int(event["of"]))
            live.stage = "warmup"
        elif kind == "progress":
            prev = live.progress
            live.progress = event
            live.unit = str(event.get("unit") or live.unit)
            steps = int(event["step"]) - (int(prev["step"]) if prev else 0)
            if steps > 0 and float(event.get("window_s") or 0) > 0:
                live.step_ms.append(1000.0 * float(event["window_s"]) / steps)
            if point is not None:
                live.points.append(point)
            if live.stage != "cancelling":
                live.stage = "running"
        elif kind == "phase":
            phases = event.get("phases_ms") or {}
            live.phases_ms = {k: float(phases[k]) for k in PHASES
                              if isinstance(phases.get(k), int | float)}
        elif kind == "point":
            live.sweep_points.append(event)
        elif kind == "error":
            live.error_event = event
        self._changed("live")

    def _on_done(self, live: LiveRun, doc: dict[str, Any], path: Path | None,
                 save_error: str | None, attributions: list[Attribution], ended: datetime,
                 tail: list[str]) -> None:
        live.result = doc
        live.saved_path = path
        live.save_error = save_error
        live.attributions = attributions
        live.finished_wall = ended
        live.stderr_tail = tail
        live.stage = "done"
        if not live.unit:
            live.unit = results.throughput_of(doc)[1]
        if self.current is live:
            self.current = None
        self.last = live
        self.finished_runs.append(live)
        del self.finished_runs[:-FINISHED_KEPT]  # each keeps its points: bound the memory
        self._toast(live)
        self._changed("done")
        self._start_next()

    def _toast(self, live: LiveRun) -> None:
        doc = live.result or {}
        status = doc.get("status")
        what = live.planned.label
        if status == "ok":
            self.app.notify(f"{what}: {results.fmt_throughput(doc)}", title="Benchmark done",
                            timeout=6)
        elif status == "cancelled":
            self.app.notify(f"{what}: cancelled (partial result kept)",
                            title="Benchmark cancelled", severity="warning", timeout=6)
        else:
            err = live.error or {}
            self.app.notify(f"{what}: {err.get('kind', 'error')}: {err.get('message', '')}",
                            title="Benchmark failed", severity="error", timeout=10)
        if live.save_error:
            self.app.notify(f"result not saved: {live.save_error}", severity="error",
                            timeout=10)

    # --- exit ------------------------------------------------------------------------------

    def shutdown(self, grace_s: float = SHUTDOWN_GRACE_S) -> None:
        """Blocking (call it off the event loop): no worker outlives the app.

        SIGTERM first so a cooperative worker can still report (its partial result is
        saved as "cancelled" on the runner's thread), SIGKILL after `grace_s`.
        """
        self._closing = True
        self.queue.clear()
        live = self.current
        if live is None or live.run is None:
            return
        live.run.cancel()
        if not live.run.wait(grace_s):
            live.run.kill()
        live.saved.wait(5.0)


def bench_session(app: App[Any]) -> BenchSession:
    """The app's session, created on first use (on the event loop)."""
    session = getattr(app, SESSION_ATTR, None)
    if session is None:
        session = BenchSession(app)
        setattr(app, SESSION_ATTR, session)
    return session


async def stop_benchmarks(app: App[Any]) -> None:
    """For the app's unmount: cancel/kill any running benchmark without blocking the loop."""
    session = getattr(app, SESSION_ATTR, None)
    if session is not None:
        await asyncio.to_thread(session.shutdown)
