"""Benchmarks started from the TUI: the queue, the run in progress, what it has shown so far.

One BenchSession per app (`GputuiApp.bench`, made on first use), not per screen: a run
goes on while the user is back on the monitor, and the bench screen shows it again when
reopened. The app hands the session what it needs when it makes it: where to post
messages and toasts, and how to get its latest frame and its sampler (both change while
the app runs). The session reads nothing else of the app.

The runs themselves belong to a headless RunQueue (gputui.bench.run_queue), which starts,
cancels and saves them. Its callbacks run on the runner's threads and only post messages
(RunEvent, RunFinished) to the app, never waiting for the UI; the app hands them back to
this session on the event loop (`apply_event`, `apply_finished`), and the session posts
BenchChanged to the screens showing it. All state the screens read changes on the loop.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from gputui.bench import events, stats
from gputui.bench.attribution import Attribution, ThroughputPoint, attribute, in_episode
from gputui.bench.extras import AttributionNote
from gputui.bench.request import RunRequest
from gputui.bench.result import ErrorInfo, Result
from gputui.bench.run_queue import Finished, Planned, RunOptions, RunQueue
from gputui.bench.runner import (
    DEFAULT_GRACE_S,
    DEFAULT_TIMEOUT_S,
    BenchRun,
    worker_nvml_index,
)
from gputui.telemetry.throttle import ThrottleEpisode
from gputui.ui.bench_messages import BenchChanged, RunEvent, RunFinished

if TYPE_CHECKING:
    from textual.message import Message
    from textual.message_pump import MessagePump

    from gputui.telemetry.frame import Frame
    from gputui.telemetry.sampler import Sampler

FINISHED_KEPT = 20
SHUTDOWN_GRACE_S = 1.0  # at exit: SIGTERM, this long for a partial result, then SIGKILL

__all__ = ["BenchSession", "LiveRun", "Planned", "request_label"]


def request_label(r: RunRequest) -> str:
    parts = [str(r.benchmark)]
    if r.model:
        parts.append(str(r.model))
    parts.append(f"· {r.device or 'auto'} · {r.precision or 'fp32'}")
    if r.batch_size:
        parts.append(f"· batch {r.batch_size}")
    if r.mode:
        parts.append(f"· {r.mode}")
    # deepbench's lists where chosen; a default goes unsaid, as every other setting's.
    lists = [text for value, text in ((r.op, r.op), (r.problem_set, f"{r.problem_set} set"),
                                      (r.shape_set, f"{r.shape_set} shapes")) if value]
    if lists:
        parts.append("· " + " · ".join(lists))
    flags = [name for name, on in (("sweep", r.sweep), ("channels-last", r.channels_last),
                                   ("compile", r.compile), ("profile", r.profile)) if on]
    if (r.nproc or 1) > 1:
        flags.append(f"nproc {r.nproc}")
    if r.threads:
        flags.append(f"threads {r.threads}")
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


def run_episodes(episodes: Sequence[ThrottleEpisode], gpu_index: int | None, start: datetime,
                 end: datetime) -> list[ThrottleEpisode]:
    """The throttle episodes on this GPU that overlapped [start, end]."""
    if gpu_index is None:
        return []
    return [ep for ep in episodes
            if ep.gpu_index == gpu_index and ep.start <= end and (ep.end or end) >= start]


@dataclass
class LiveRun:
    """What the screen shows about one run. Changed on the event loop only (except
    `thread_points`/`thread_gpu`, written by the runner's thread before it posts)."""

    planned: Planned
    run: BenchRun | None = None  # set when the queue starts it
    started_wall: datetime = field(default_factory=lambda: datetime.now(UTC))
    finished_wall: datetime | None = None
    stage: str = "queued"  # queued, starting, loading, warmup, running, cancelling, done
    device: str | None = None
    device_name: str | None = None
    gpu_index: int | None = None
    # The model as the worker runs it: a request may leave it to the device (lm-*).
    model: str | None = None
    warmup: tuple[int, int] | None = None
    progress: events.Progress | None = None
    points: list[ThroughputPoint] = field(default_factory=list)
    step_ms: list[float] = field(default_factory=list)
    unit: str = ""
    phases_ms: dict[str, float] | None = None
    sweep_points: list[events.Point] = field(default_factory=list)
    error_event: events.Failed | None = None
    result: Result | None = None
    finished: Finished | None = None
    attributions: list[Attribution] = field(default_factory=list)
    gpu_mem_max: int | None = None  # device memory used, max seen by the monitor (GPU runs)
    thread_points: list[ThroughputPoint] = field(default_factory=list)
    thread_gpu: int | None = None
    thread_attributions: list[Attribution] = field(default_factory=list)

    @property
    def id(self) -> str:
        return self.planned.id

    @property
    def request(self) -> RunRequest:
        return self.planned.request

    @property
    def done(self) -> bool:
        return self.result is not None

    @property
    def status(self) -> str:
        return self.result.status if self.result is not None else self.stage

    @property
    def saved(self) -> bool:
        return self.finished is not None and self.finished.path is not None

    @property
    def fraction(self) -> float | None:
        """Progress 0..1 of the timed part, None while unknown."""
        if self.result is not None:
            return 1.0 if self.result.status == "ok" else None
        p = self.progress
        if p is None:
            return 0.0 if self.stage in ("warmup", "loading", "starting", "queued") else None
        if p.of:
            return min(1.0, p.step / p.of)
        if p.duration_s:
            return min(1.0, p.elapsed_s / p.duration_s)
        return None

    @property
    def current(self) -> float | None:
        """The last progress window's rate ("now")."""
        return self.points[-1].throughput if self.points else None

    @property
    def stopped_fraction(self) -> float:
        """Where a run that did not finish ok stopped, 0..1: steps done of the planned
        steps, or seconds elapsed of the planned duration."""
        p = self.progress
        if p is None:
            return 0.0
        if p.of:
            return min(1.0, p.step / p.of)
        if p.duration_s:
            return min(1.0, p.elapsed_s / p.duration_s)
        return 0.0

    @property
    def headline(self) -> float | None:
        """The one throughput the run is known by: samples ÷ seconds of the timed loop
        (stats.HEADLINE_DEFINITION) — the result's, or so far from the last window."""
        if self.result is not None:
            return self.result.headline
        p = self.progress
        if p is None or p.total_samples is None:
            return None
        return stats.rate(p.total_samples, p.elapsed_s)

    @property
    def error(self) -> ErrorInfo | None:
        return self.result.error if self.result is not None else None

    def throttled_flags(self, episodes: list[ThrottleEpisode], now: datetime) -> list[bool]:
        """Per progress window: did it overlap an episode (the attribution's rule)?"""
        if not episodes:
            return [False] * len(self.points)
        return [any(in_episode(p, ep, now) for ep in episodes) for p in self.points]


class BenchSession:
    """The runs of one app. Public methods are called on the event loop.

    `post`: the app's thread-safe `post_message` (run events and ends go to the app, which
    hands them back on the loop); `notify`: its toasts; `latest_frame` and `sampler`: the
    app's latest frame and sampler when asked (None before the first), read on the loop
    and on the runner's threads.
    """

    def __init__(self, *, post: Callable[[Message], object], notify: Callable[..., object],
                 latest_frame: Callable[[], Frame | None],
                 sampler: Callable[[], Sampler | None]) -> None:
        self._post_to_app = post
        self._notify = notify
        self._latest_frame = latest_frame
        self._sampler = sampler
        # Settable by tests (a fake worker) and by callers that want other limits.
        self.worker_cmd: list[str] | None = None
        self.env: dict[str, str] | None = None
        self.timeout_s: float | None = DEFAULT_TIMEOUT_S
        self.grace_s: float = DEFAULT_GRACE_S
        self.runs = RunQueue(on_event=self._event_thread, on_finished=self._finished_thread,
                             annotate=self._annotate_thread, on_started=self._started_any,
                             auto_advance=False)
        self.lives: dict[str, LiveRun] = {}
        self.current: LiveRun | None = None
        self.last: LiveRun | None = None
        self.finished_runs: list[LiveRun] = []
        self.form: dict[str, Any] = {}  # the form as last left, restored on reopening
        self._screens: list[MessagePump] = []

    # --- who shows the session ---------------------------------------------------------------

    def subscribe(self, target: MessagePump) -> None:
        if target not in self._screens:
            self._screens.append(target)

    def unsubscribe(self, target: MessagePump) -> None:
        if target in self._screens:
            self._screens.remove(target)

    def _changed(self, what: str) -> None:
        for target in list(self._screens):
            target.post_message(BenchChanged(what))

    def _episodes(self) -> Sequence[ThrottleEpisode]:
        """Every throttle episode the monitor knows, from its latest (immutable) frame:
        the UI reads what the frames carry, never the sampler itself."""
        frame = self._latest_frame()
        return frame.episodes if frame is not None else ()

    @property
    def queue(self) -> list[Planned]:
        return self.runs.pending

    @property
    def shown(self) -> LiveRun | None:
        """The run the live pane shows: the one in progress, else the last one."""
        return self.current or self.last

    def header_text(self) -> str | None:
        """What the monitor's header says while a run is in progress: "cnn-train 42%"."""
        live = self.current
        if live is None or live.finished:
            return None
        if live.stage == "cancelling":
            return f"{live.request.benchmark} cancelling"
        frac = live.fraction
        name = live.request.benchmark
        return name if frac is None else f"{name} {100 * frac:.0f}%"

    def episodes_for(self, live: LiveRun) -> list[ThrottleEpisode]:
        end = live.finished_wall or datetime.now(UTC)
        return run_episodes(self._episodes(), live.gpu_index, live.started_wall, end)

    # --- commands ----------------------------------------------------------------------------

    def submit(self, request: RunRequest) -> int:
        """Queue a validated request; returns how many runs are ahead of it (0: started
        now)."""
        self.runs.grace_s = self.grace_s
        # The monitor's sampler as it is now (replay or a reopened NVML replace it).
        self.runs.run_options = RunOptions(sampler=self._sampler(),
                                           worker_cmd=self.worker_cmd, env=self.env)
        planned = Planned(request, request_label(request), timeout_s=self.timeout_s)
        live = LiveRun(planned)
        self.lives[planned.id] = live
        ahead = self.runs.submit(planned)
        self._sync_current()
        self._changed("queue")
        return ahead

    def remove_queued(self, index: int) -> Planned | None:
        """Drop one waiting run (0 = next to start); None if there is no such entry."""
        planned = self.runs.remove(index)
        if planned is not None:
            self.lives.pop(planned.id, None)
            self._changed("queue")
        return planned

    def clear_queue(self) -> int:
        for planned in self.runs.pending:
            self.lives.pop(planned.id, None)
        n = self.runs.clear()
        self._changed("queue")
        return n

    def cancel(self) -> bool:
        """SIGTERM the current run now, SIGKILL after the grace period."""
        live = self.current
        if live is None or live.done or not self.runs.cancel():
            return False
        live.stage = "cancelling"
        self._changed("live")
        return True

    def _sync_current(self) -> None:
        """The run the queue has started is the current one (it may have just begun)."""
        cur = self.runs.current
        live = self.lives.get(cur[0].id) if cur is not None else None
        if live is not None and live is not self.current and not live.done:
            live.stage = "starting"
            live.started_wall = datetime.now(UTC)
            self.current = live
            self._changed("start")

    # --- runner threads: stamp, compute, post ---------------------------------------------------

    def _post(self, message: RunEvent | RunFinished) -> None:
        # post_message is thread-safe and never waits for the loop; a closed app drops it.
        self._post_to_app(message)

    def _started_any(self, planned: Planned, run: BenchRun) -> None:
        # On the loop (submit, advance): a reference only, set before the run starts.
        live = self.lives.get(planned.id)
        if live is not None:
            live.run = run

    def _event_thread(self, planned: Planned, event: events.Event) -> None:
        # Stamped when received here, not when shown: the loop may be busy for a moment,
        # and the attribution compares these times with the sampler's episodes.
        received = datetime.now(UTC)
        point = None
        live = self.lives.get(planned.id)
        if isinstance(event, events.Progress) and event.throughput > 0:
            point = ThroughputPoint(received, float(event.window_s), float(event.throughput))
            if live is not None:
                live.thread_points.append(point)
        if isinstance(event, events.Started) and live is not None:
            live.thread_gpu = gpu_of(event.env.get("device") or planned.request.device,
                                     event.env)
        self._post(RunEvent(planned.id, event, point))

    def _annotate_thread(self, planned: Planned, result: Result) -> Result:
        """Before saving: which throttle episodes slowed the run (from our sampler)."""
        live = self.lives.get(planned.id)
        if live is None:
            return result
        ended = datetime.now(UTC)
        episodes = run_episodes(self._episodes(), live.thread_gpu, live.started_wall, ended)
        attributions = attribute(list(live.thread_points), episodes, run_end=ended)
        live.thread_attributions = attributions
        if not attributions:
            return result
        notes = tuple(AttributionNote(text=a.text(result.unit), drop_pct=a.drop_pct,
                                      inside=a.inside, outside=a.outside,
                                      episode=a.episode.to_dict(now=ended))
                      for a in attributions)
        return replace(result, extra=replace(result.extra, throttle_attribution=notes))

    def _finished_thread(self, finished: Finished) -> None:
        self._post(RunFinished(finished, datetime.now(UTC)))

    # --- on the event loop (the app hands the messages over) -----------------------------------

    def apply_event(self, message: RunEvent) -> None:
        live = self.lives.get(message.run_id)
        if live is None:
            return
        if self.current is not live and not live.done:
            self.current = live
        event = message.event
        if isinstance(event, events.Started):
            live.device = str(event.env.get("device") or live.request.device or "")
            live.device_name = event.env.get("device_name")
            live.gpu_index = gpu_of(live.device, event.env)
            model = event.spec.get("model")
            live.model = str(model) if model else live.request.model
            live.stage = "loading"
        elif isinstance(event, events.Warmup):
            live.warmup = (event.step, event.of)
            live.stage = "warmup"
        elif isinstance(event, events.Progress):
            prev = live.progress
            live.progress = event
            live.unit = event.unit or live.unit
            steps = event.step - (prev.step if prev is not None else 0)
            if steps > 0 and event.window_s > 0:
                live.step_ms.append(1000.0 * event.window_s / steps)
            if message.point is not None:
                live.points.append(message.point)
            if live.stage != "cancelling":
                live.stage = "running"
        elif isinstance(event, events.Phase):
            live.phases_ms = {k: float(v) for k, v in event.phases_ms.items()
                              if k in events.PHASES and isinstance(v, int | float)}
        elif isinstance(event, events.Point):
            live.sweep_points.append(event)
        elif isinstance(event, events.Failed):
            live.error_event = event
        self._changed("live")

    def apply_finished(self, message: RunFinished) -> None:
        finished = message.finished
        live = self.lives.pop(finished.planned.id, None)
        if live is None:
            return
        live.result = finished.result
        live.finished = finished
        live.attributions = live.thread_attributions
        live.finished_wall = message.ended
        live.stage = "done"
        if not live.unit:
            live.unit = finished.result.unit
        if self.current is live:
            self.current = None
        self.last = live
        self.finished_runs.append(live)
        del self.finished_runs[:-FINISHED_KEPT]  # each keeps its points: bound the memory
        self._toast(live)
        self._changed("done")
        # The next run starts here, on the main thread (see RunQueue.auto_advance).
        self.runs.advance()
        self._sync_current()

    def _toast(self, live: LiveRun) -> None:
        from gputui.bench.fmt import fmt_throughput

        result, finished = live.result, live.finished
        assert result is not None and finished is not None
        what = live.planned.label
        # Labels and messages come from settings and the worker: never markup.
        if result.status == "ok":
            self._notify(f"{what}: {fmt_throughput(result.throughput)}",
                         title="Benchmark done", timeout=6, markup=False)
        elif result.status == "cancelled":
            self._notify(f"{what}: cancelled (partial result kept)",
                         title="Benchmark cancelled", severity="warning", timeout=6,
                         markup=False)
        else:
            err = result.error
            self._notify(f"{what}: {err.kind if err else 'error'}: "
                         f"{err.message if err else ''}",
                         title="Benchmark failed", severity="error", timeout=10,
                         markup=False)
        if finished.save_error:
            self._notify(f"result not saved: {finished.save_error}", severity="error",
                         timeout=10, markup=False)

    # --- exit ------------------------------------------------------------------------------

    def shutdown(self, grace_s: float = SHUTDOWN_GRACE_S) -> None:
        """Blocking (call it off the event loop): no worker outlives the app, and a
        cancelled run's partial result is on disk before we go."""
        self.runs.shutdown(grace_s)

