"""Running the suite: each of its benchmark runs through the run queue, one after another
(each in its own worker, saved in the results store like any run), then one suite record.

A failed run leaves its tests without a figure (the record is "incomplete") and the suite
goes on; a cancel stops it after the current run, and what ran is kept ("cancelled").
Torch-free.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from gputui.bench import results_store, suite
from gputui.bench.request import make_request
from gputui.bench.result import Result
from gputui.bench.run_queue import Planned, RunQueue
from gputui.bench.runner import DEFAULT_TIMEOUT_S
from gputui.bench.suite_record import SuiteRecord, SuiteState, TestOutcome, outcome_of
from gputui.bench.suite_score import SuiteReference, score
from gputui.errors import UsageError
from gputui.safe_text import printable

# Called after each benchmark run with (runs done, runs in all, the run, its outcomes).
OnRun = Callable[[int, int, suite.SuiteRun, list[TestOutcome]], None]


@dataclass(frozen=True)
class SuitePlan:
    device_class: suite.DeviceClass
    device: str  # cpu, cuda, cuda:N
    reference: SuiteReference | None
    timeout_s: float = DEFAULT_TIMEOUT_S


def plans(plan: SuitePlan) -> list[tuple[suite.SuiteRun, Planned]]:
    """Every run's validated request (UsageError before anything starts)."""
    out = []
    for run in suite.RUNS:
        request = make_request(run.benchmark, **suite.run_settings(run, plan.device_class,
                                                                  plan.device))
        out.append((run, Planned(request, f"suite {run.key}", timeout_s=plan.timeout_s)))
    return out


def run_suite(plan: SuitePlan, queue: RunQueue, on_run: OnRun | None = None,
              stop: Callable[[], bool] = lambda: False) -> SuiteRecord:
    """Run every test; `stop()` true after a run ends the suite there (a cancel)."""
    planned = plans(plan)
    suite_id = results_store.new_id()
    started_at = results_store.utc_now_iso()
    t0 = time.monotonic()
    results: list[Result] = []
    outcomes: list[TestOutcome] = []
    cancelled = False
    for i, (run, p) in enumerate(planned):
        queue.submit(p)
        queue.wait()
        finished = queue.last
        assert finished is not None
        result = finished.result
        if finished.invalid:
            # The worker found the settings impossible here (no CUDA, ...): bad usage, and
            # every other test would say the same.
            raise UsageError(printable((result.error.message if result.error else None)
                                       or "invalid benchmark settings"))
        results.append(result)
        got = [outcome_of(t, result, p.request.to_dict()) for t in suite.tests_of(run.key)]
        outcomes.extend(got)
        if on_run is not None:
            on_run(i + 1, len(planned), run, got)
        if result.status == "cancelled" or stop():
            cancelled = True
            break
    # In the suite's order (inference, training, compute), not the order the runs ran in.
    order = {t.id: i for i, t in enumerate(suite.TESTS)}
    outcomes.sort(key=lambda o: order[o.test])
    complete = len(outcomes) == len(suite.TESTS) and all(o.value is not None
                                                         for o in outcomes)
    status = "cancelled" if cancelled else "ok" if complete else "incomplete"
    figures = {o.test: o.value for o in outcomes}
    scores = (score(figures, suite.SUITE_VERSION, plan.device_class, plan.reference)
              if plan.reference is not None else None)
    named = next((r.device_name for r in results if r.device_name), None)
    device = next((r.device for r in results if r.device), plan.device)
    return SuiteRecord(
        id=suite_id, suite_version=suite.SUITE_VERSION, device_class=plan.device_class,
        device=device, device_name=named, status=status, started_at=started_at,
        finished_at=results_store.utc_now_iso(), wall_s=time.monotonic() - t0,
        outcomes=tuple(outcomes), scores=scores, state=SuiteState.of(results))
