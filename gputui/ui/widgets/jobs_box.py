"""The Jobs box: training jobs that report with gputui.track, beside the GPUs they run on.

One row per job: PID, name, its GPUs, samples/s with a sparkline of its recent history,
tokens/s, the median step time, and how it does against its own median (slowed while a
GPU it runs on throttled: the job_slowdown alert; slowed with calm GPUs: said here only).
Hidden while no job reports. The history is the view's: fed from every frame.
"""

from __future__ import annotations

from collections import deque

from rich.table import Table
from rich.text import Text
from textual.widgets import Static

from gputui.safe_text import printable
from gputui.telemetry.frame import Frame
from gputui.telemetry.job_alerts import JobState
from gputui.telemetry.model import JobReading, Snapshot
from gputui.telemetry.units import NA, fmt_per_s, fmt_step_time
from gputui.ui.widgets.sparkline import sparkline_rows

SPARK_POINTS = 24  # readings in a row's sparkline (one per tick)
MAX_JOBS_KEPT = 64  # histories of jobs no longer shown are dropped past this


def gpus_text(j: JobReading) -> str:
    return ",".join(map(str, j.gpus)) if j.gpus else NA


def status_text(state: JobState | None) -> Text:
    if state is None or state.status == "learning":
        return Text("learning its pace", style="dim")
    pct = "" if state.change_pct is None else f"{state.change_pct:+.0f} %"
    if state.status == "slowdown":
        return Text(f"⚠ {pct}: {state.words}", style="bold red")
    if state.status == "slowed":
        return Text(f"{pct}: {state.words}", style="yellow")
    return Text(f"ok {pct}".strip())


class JobsBox(Static):
    DEFAULT_CSS = """
    JobsBox {
        height: auto;
        max-height: 12;
        border: round $primary 60%;
        border-title-style: bold;
        padding: 0 1;
    }
    """

    def __init__(self, **kwargs: object) -> None:
        super().__init__("", **kwargs)  # type: ignore[arg-type]
        self.border_title = "Jobs"
        self.display = False
        self._history: dict[int, deque[float | None]] = {}
        self._shown: object = None

    def take(self, frame: Frame) -> None:
        """Every frame (drawn or not) goes into the sparklines' history."""
        if frame.reset:
            self._history.clear()
        for snap in (*frame.catch_up, frame.snapshot):
            self._take(snap)

    def _take(self, snap: Snapshot) -> None:
        for j in snap.jobs:
            h = self._history.get(j.pid)
            if h is None:
                h = self._history[j.pid] = deque(maxlen=SPARK_POINTS)
            h.append(j.samples_per_s if j.samples_per_s is not None else j.tokens_per_s)
        if len(self._history) > MAX_JOBS_KEPT:
            live = {j.pid for j in snap.jobs}
            for pid in [p for p in self._history if p not in live]:
                del self._history[pid]

    def show(self, frame: Frame) -> None:
        jobs = frame.snapshot.jobs
        states = {s.pid: s for s in frame.jobs}
        key = (jobs, frame.jobs)
        if key == self._shown:
            return
        self._shown = key
        self.display = bool(jobs)
        if not jobs:
            return
        self.update(self.render_jobs(jobs, states))

    def render_jobs(self, jobs: tuple[JobReading, ...], states: dict[int, JobState]) -> Table:
        t = Table(box=None, expand=True, padding=(0, 1), show_edge=False)
        t.add_column("PID", justify="right", no_wrap=True)
        t.add_column("NAME", no_wrap=True, max_width=24, overflow="ellipsis")
        t.add_column("GPU", no_wrap=True)
        t.add_column("SAMPLES/S", justify="right", no_wrap=True)
        t.add_column("HISTORY", no_wrap=True, width=SPARK_POINTS)
        t.add_column("TOKENS/S", justify="right", no_wrap=True)
        t.add_column("STEP p50", justify="right", no_wrap=True)
        t.add_column("STATUS", ratio=1, overflow="fold")
        for j in jobs:
            values = list(self._history.get(j.pid, ()))
            known = [v for v in values if v is not None]
            spark = sparkline_rows(values, max(known) if known else None)[0]
            t.add_row(str(j.pid), Text(printable(j.name)), gpus_text(j),
                      fmt_per_s(j.samples_per_s), Text(spark, style="cyan"),
                      fmt_per_s(j.tokens_per_s), fmt_step_time(j.step_time_s),
                      status_text(states.get(j.pid)))
        return t
