"""The Jobs box: training jobs that report with gputui.track, beside the GPUs they run on.

One row per job: PID, name, its GPUs, samples/s with a sparkline of its recent history,
tokens/s, the median step time, its energy where GPU energy reached it (W, J, J/step,
J/sample, J/token from gputui.telemetry.energy; "~" marks an estimate: a GPU shared with
other processes), and how it does against its own median (slowed while a GPU it runs on
throttled: the job_slowdown alert; slowed with calm GPUs: said here only). A job that
ended stays, dimmed, for ENDED_SHOWN_S with its totals: its end-of-run line. Hidden while
no job reports. The history is the view's: fed from every frame.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable

from rich.table import Table
from rich.text import Text
from textual.widgets import Static

from gputui.safe_text import printable
from gputui.telemetry.frame import Frame
from gputui.telemetry.job_alerts import JobState
from gputui.telemetry.model import JobReading, Snapshot
from gputui.telemetry.units import NA, fmt_j, fmt_j_per, fmt_per_s, fmt_step_time, fmt_w
from gputui.ui.widgets.sparkline import sparkline_rows

SPARK_POINTS = 24  # readings in a row's sparkline (one per tick)
WIDE_COLUMNS = 120  # below this the box drops tokens/s and shortens the sparkline
NARROW_SPARK = 8
MAX_JOBS_KEPT = 64  # histories of jobs no longer shown are dropped past this
ENDED_SHOWN_S = 120.0  # an ended job's row stays this long (snapshot time), dimmed
MAX_ENDED_SHOWN = 8


def energy_text(value: float | None, j: JobReading,
                fmt: Callable[[float | None], str] = fmt_j) -> str:
    """One of a job's energy figures: "~" marks an estimate, N/A where none reached it."""
    if value is None:
        return NA
    return ("~" if j.energy_estimate else "") + fmt(value)


def gpus_text(j: JobReading) -> str:
    return ",".join(map(str, j.gpus)) if j.gpus else NA


def status_text(state: JobState | None, *, short: bool = False) -> Text:
    if state is None or state.status == "learning":
        return Text("learning" if short else "learning its pace", style="dim")
    pct = "" if state.change_pct is None else f"{state.change_pct:+.0f} %"
    if state.status == "slowdown":
        words = state.words.removeprefix("job slowed while ") if short else state.words
        return Text(f"⚠ {pct}: {words}", style="bold red")
    if state.status == "slowed":
        words = "GPUs fine: input pipeline?" if short else state.words
        return Text(f"{pct}: {words}", style="yellow")
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
        self._last: tuple[tuple[JobReading, ...], dict[int, JobState]] = ((), {})
        self._ended: dict[int, tuple[JobReading, float]] = {}  # pid → (last reading, when)
        self._now = 0.0
        self._height: int | None = None  # lines of the table shown, at its width

    def take(self, frame: Frame) -> None:
        """Every frame (drawn or not) goes into the sparklines' history."""
        if frame.reset:
            self._history.clear()
            self._ended.clear()
        for snap in (*frame.catch_up, frame.snapshot):
            self._take(snap)

    def _take(self, snap: Snapshot) -> None:
        self._now = snap.time.timestamp()
        for j in snap.jobs_ended:
            self._ended[j.pid] = (j, self._now)
        for pid in [pid for pid, (_, at) in self._ended.items()
                    if self._now - at > ENDED_SHOWN_S or any(j.pid == pid for j in snap.jobs)]:
            del self._ended[pid]
        while len(self._ended) > MAX_ENDED_SHOWN:
            del self._ended[next(iter(self._ended))]
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
        ended = tuple(j for j, _ in self._ended.values())
        jobs = frame.snapshot.jobs + ended
        states = {s.pid: s for s in frame.jobs}
        key = (jobs, frame.jobs)
        if key == self._shown:
            return
        self._shown = key
        self.display = bool(jobs)
        self._last = (jobs, states)
        if jobs:
            self._draw(self.render_jobs(jobs, states, self.app.size.width))

    def on_resize(self) -> None:
        jobs, states = self._last
        if jobs:
            self._height = None  # a new width: measured again
            self._draw(self.render_jobs(jobs, states, self.app.size.width))

    def _draw(self, table: Table) -> None:
        """Show `table`; the screen is laid out again only when the box's height changes.
        A job's figures move every tick, and a layout pass each time (Static.update's
        default) would cost more than everything else the tick draws."""
        width = self.content_region.width or self.app.size.width
        console = self.app.console
        height = len(console.render_lines(table, console.options.update_width(width),
                                          pad=False))
        self.update(table, layout=height != self._height)
        self._height = height

    def render_jobs(self, jobs: tuple[JobReading, ...], states: dict[int, JobState],
                    width: int = WIDE_COLUMNS) -> Table:
        """The rows; on a narrow terminal without tokens/s and with a shorter sparkline
        and status, so that the PID and status are never cut."""
        wide = width >= WIDE_COLUMNS
        points = SPARK_POINTS if wide else NARROW_SPARK
        ended = {j.pid for j, _ in self._ended.values()}
        # Energy columns only where GPU energy reached some job; narrow: W and J/step.
        energy = any(j.energy_j is not None for j in jobs)
        t = Table(box=None, expand=True, padding=(0, 1), show_edge=False)
        t.add_column("PID", justify="right", no_wrap=True, min_width=5)
        t.add_column("NAME", no_wrap=True, max_width=24 if wide else 14, overflow="ellipsis")
        t.add_column("GPU", no_wrap=True)
        t.add_column("SAMPLES/S", justify="right", no_wrap=True)
        t.add_column("HISTORY", no_wrap=True, width=points)
        if wide:
            t.add_column("TOKENS/S", justify="right", no_wrap=True)
        t.add_column("STEP p50", justify="right", no_wrap=True)
        if energy:
            t.add_column("POWER", justify="right", no_wrap=True)
            if wide:
                t.add_column("ENERGY", justify="right", no_wrap=True)
            t.add_column("J/STEP", justify="right", no_wrap=True)
            if wide:
                t.add_column("J/SAMPLE", justify="right", no_wrap=True)
                t.add_column("J/TOKEN", justify="right", no_wrap=True)
        t.add_column("STATUS", ratio=1, overflow="fold", min_width=12)
        for j in jobs:
            history = list(self._history.get(j.pid, ()))
            # One scale for the whole history kept, however much of it fits.
            known = [v for v in history if v is not None]
            spark = sparkline_rows(history[-points:], max(known) if known else None)[0]
            cells: list[str | Text] = [
                str(j.pid), Text(printable(j.name)), gpus_text(j),
                fmt_per_s(j.samples_per_s), Text(spark, style="cyan")]
            if wide:
                cells.append(fmt_per_s(j.tokens_per_s))
            cells.append(fmt_step_time(j.step_time_s))
            if energy:
                cells.append(energy_text(j.power_w, j, fmt_w))
                if wide:
                    cells.append(energy_text(j.energy_j, j, fmt_j))
                cells.append(energy_text(j.energy_per_step_j, j, fmt_j_per))
                if wide:
                    cells.append(energy_text(j.energy_per_sample_j, j, fmt_j_per))
                    cells.append(energy_text(j.energy_per_token_j, j, fmt_j_per))
            if j.pid in ended:
                cells.append(Text(f"ended at step {j.step:,}", style="dim"))
                t.add_row(*cells, style="dim")
            else:
                cells.append(status_text(states.get(j.pid), short=not wide))
                t.add_row(*cells)
        return t
