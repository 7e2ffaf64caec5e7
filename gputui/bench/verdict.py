"""The runner's final verdict: one Result from what the worker said and how it ended.

The worker's own result wins when it sent one (ok, or cancelled with partial numbers).
Otherwise the run failed (or was cancelled) and the numbers come from the progress
windows seen so far: the total samples of the whole timed loop, over its seconds.
"""

from __future__ import annotations

import signal
from dataclasses import dataclass, field, replace

from gputui.bench import events, stats
from gputui.bench.request import RunRequest
from gputui.bench.result import DamagedResult, ErrorInfo, Result, ResultBuilder


@dataclass(frozen=True)
class RunFacts:
    """Everything the runner saw of one worker, at the end."""

    result_id: str
    request: RunRequest
    started_at: str
    finished_at: str
    elapsed_s: float | None
    started: events.Started | None = None
    last_progress: events.Progress | None = None
    window_rates: tuple[float, ...] = ()
    samples_seen: int = 0  # the windows' samples added up (for workers without totals)
    result: events.ResultReady | None = None
    error: events.Failed | None = None
    cancel_requested: bool = False
    timed_out: bool = False
    timeout_s: float | None = None
    returncode: int | None = None
    spawn_error: str | None = None
    stderr_tail: tuple[str, ...] = field(default_factory=tuple)


def _signal_name(signum: int) -> str:
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


def exit_words(returncode: int | None) -> str:
    if returncode is None:
        return "worker did not start"
    if returncode < 0:
        return f"worker was killed by {_signal_name(-returncode)} without reporting a result"
    return f"worker exited with code {returncode} without reporting a result"


def _worker_result(facts: RunFacts) -> Result | None:
    if facts.result is None:
        return None
    try:
        return Result.from_dict(facts.result.result)
    except DamagedResult:
        return None


def decide(facts: RunFacts) -> Result:
    worker = _worker_result(facts)
    b = (ResultBuilder.from_result(worker) if worker is not None
         else ResultBuilder.for_request(facts.result_id, facts.request))
    b.id = facts.result_id
    if facts.started is not None:
        env = dict(facts.started.env)
        if worker is None:
            b.env = env
        b.device_name = b.device_name or env.get("device_name")
        if env.get("device") and worker is None:
            b.device = str(env["device"])
    b.throttle_episodes = []
    b.started_at = b.started_at or facts.started_at
    b.finished_at = b.finished_at or facts.finished_at
    if b.duration_s is None and facts.elapsed_s is not None:
        b.duration_s = round(facts.elapsed_s, 3)
    if not b.settings:
        b.settings = {k: v for k, v in facts.request.to_dict().items() if k != "test_hook"}

    if facts.spawn_error is not None:
        b.fail(ErrorInfo("crash", f"cannot start worker: {facts.spawn_error}"))
    elif facts.timed_out:
        b.fail(ErrorInfo("timeout", f"time limit of {facts.timeout_s:g} s reached; "
                                    "worker stopped"))
        _fill_partial(b, facts)
    elif worker is not None:
        pass  # the worker's own verdict (ok, or cancelled with partial numbers)
    elif facts.error is not None:
        ev = facts.error
        b.fail(ErrorInfo(ev.error_kind or "crash", ev.message or "worker reported an error",
                         batch_size=ev.batch_size, suggestion=ev.suggestion))
        if ev.batch_size is not None:
            b.batch_size = ev.batch_size
    elif facts.cancel_requested:
        b.status = "cancelled"
        _fill_partial(b, facts)
    else:
        rc = facts.returncode
        b.fail(ErrorInfo("crash", exit_words(rc), exit_code=rc,
                         signal=_signal_name(-rc) if rc is not None and rc < 0 else None))
        _fill_partial(b, facts)
    if b.status == "failed" and b.error is not None and b.error.stderr_tail is None:
        b.error = replace(b.error, stderr_tail=tuple(facts.stderr_tail))
    _add_reference(b)
    return b.build()


def _add_reference(b: ResultBuilder) -> None:
    """extra.reference: the published result this run matches in every setting (model,
    precision, batch, image size, memory format, one GPU of that model), as a ratio.
    Decided here, once, for every result the runner keeps; no match, no comparison."""
    from gputui.bench.references import for_result

    b.extra = replace(b.extra, reference=None)
    if b.status != "ok":
        return
    ref = for_result(b.build())
    if ref is not None:
        b.extra = replace(b.extra, reference=ref.to_note())


def _fill_partial(b: ResultBuilder, facts: RunFacts) -> None:
    """Numbers from the progress windows seen so far, when the worker gave no result:
    the timed loop's total samples (not the last window's) over its seconds so far."""
    last = facts.last_progress
    if last is None:
        return
    total = last.total_samples if last.total_samples is not None else facts.samples_seen
    if b.throughput is None:
        b.throughput = stats.headline(total, last.elapsed_s, list(facts.window_rates),
                                      last.unit)
    if b.steps is None:
        b.steps = last.step
    if b.samples is None:
        b.samples = total

