"""`a`: throttle episodes (closed and ongoing) and the alerts active now. A table row can be
wider than the terminal (an alert's message is a sentence): the selected row of the
focused table is shown in full, wrapped, under the tables."""

from __future__ import annotations

from datetime import datetime

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.screen import Screen
from textual.widgets import DataTable, Static

from gputui.safe_text import printable
from gputui.telemetry.alert import Alert
from gputui.telemetry.frame import Frame
from gputui.telemetry.throttle import ThrottleEpisode
from gputui.telemetry.units import NA, fmt_duration
from gputui.ui.messages import SnapshotShown
from gputui.ui.textual_adapter import bound_render_caches
from gputui.ui.widgets.footer import KeyFooter

# A job's throughput lags its GPU by the rate window: a slowdown raised this soon after a
# throttle episode ended still belongs to it.
JOB_LAG_S = 10.0


def job_cost(e: ThrottleEpisode, slowdowns: tuple[Alert, ...], now: datetime | None) -> str:
    """What the episode cost the jobs on its GPU: "train.py −34 % (~1,234 samples lost)"."""
    end = e.end or now
    parts = []
    for a in slowdowns:
        if a.gpu_index != e.gpu_index or a.since < e.start:
            continue
        if end is not None and (a.since - end).total_seconds() > JOB_LAG_S:
            continue
        v = a.values or {}
        pct = v.get("worst_change_pct", v.get("throughput_change_pct"))
        words = f"{printable(v.get('job', '?'))} {pct:+.0f} %" if isinstance(
            pct, int | float) else printable(v.get("job", "?"))
        lost = v.get("samples_lost")
        if isinstance(lost, int | float):
            words += f" (~{lost:,.0f} {v.get('unit', 'samples')} lost)"
        elif a.active:
            words += " (ongoing)"
        parts.append(words)
    return "; ".join(parts)


def alerts_of(frame: Frame | None) -> tuple[tuple[ThrottleEpisode, ...], list[Alert],
                                           datetime | None]:
    """What the screen shows of a frame: episodes, active alerts, and "now" for
    durations."""
    if frame is None:
        return (), [], None
    return frame.episodes, list(frame.alerts), frame.snapshot.time


def _clock(t: datetime) -> str:
    return f"{t.astimezone():%Y-%m-%d %H:%M:%S}"


class AlertsScreen(Screen[None]):
    DEFAULT_CSS = """
    AlertsScreen { layout: vertical; }
    AlertsScreen > .title { height: 1; padding: 0 1; background: $primary 30%;
                            text-style: bold; }
    AlertsScreen > DataTable { border: round $primary 60%; border-title-style: bold; }
    AlertsScreen > #episodes { height: 2fr; }
    AlertsScreen > #active { height: 1fr; }
    AlertsScreen > #detail { height: auto; max-height: 7; padding: 0 1;
                             border: round $accent; }
    AlertsScreen > DataTable:focus { border: heavy $accent; }
    """
    BINDINGS = [  # noqa: RUF012
        Binding("escape,a", "app.pop_screen", "Back"),
        Binding("q", "app.quit", "Quit"),
    ]

    def __init__(self, frame: Frame | None) -> None:
        super().__init__()
        self.frame = frame
        self._slowdowns: tuple[Alert, ...] = ()
        self._shown: tuple[object, ...] | None = None
        self._episode_rows: list[ThrottleEpisode] = []  # row i of each table → its item
        self._alert_rows: list[Alert] = []
        self._now: datetime | None = None

    def compose(self) -> ComposeResult:
        yield Static("Alerts and throttle episodes  (esc: back · tab: next table)",
                     classes="title")
        episodes: DataTable[str | Text] = DataTable(id="episodes", cursor_type="row",
                                                    zebra_stripes=True)
        episodes.border_title = "Throttle episodes"
        yield episodes
        active: DataTable[str | Text] = DataTable(id="active", cursor_type="row")
        active.border_title = "Active alerts"
        yield active
        detail = Static("", id="detail")
        detail.border_title = "Selected row, in full"
        yield detail
        yield KeyFooter()

    def on_mount(self) -> None:
        ep = self.query_one("#episodes", DataTable)
        for label in ("GPU", "REASONS", "START", "END", "DURATION", "PEAK TEMP", "MIN SM CLOCK",
                      "JOB COST"):
            ep.add_column(label, key=label)
        act = self.query_one("#active", DataTable)
        for label in ("SEVERITY", "GPU", "KIND", "SINCE", "MESSAGE"):
            act.add_column(label, key=label)
        ep.focus()
        self.show(*alerts_of(self.frame))

    def on_resize(self) -> None:
        # Rebuilt on every frame while an episode is ongoing: keep the caches small.
        for table in self.query(DataTable):
            bound_render_caches(table, table.size.height, len(table.columns))

    def on_snapshot_shown(self, message: SnapshotShown) -> None:
        if message.frame is not None:
            self.frame = message.frame
        self.show(*alerts_of(self.frame))

    def show(self, episodes: tuple[ThrottleEpisode, ...], alerts: list[Alert],
             now: datetime | None) -> None:
        """Fill both tables; rebuilt only when the content changed (durations tick)."""
        self._slowdowns = self.frame.job_slowdowns if self.frame is not None else ()
        key = (episodes, tuple(alerts), now if any(e.ongoing for e in episodes) else None,
               self._slowdowns)
        if key == self._shown:
            return
        self._shown = key
        ep = self.query_one("#episodes", DataTable)
        cursor = ep.cursor_row
        ep.clear()
        for e in reversed(episodes):  # newest first
            end: str | Text = Text("⚠ ongoing", style="bold") if e.end is None else _clock(e.end)
            ep.add_row(
                str(e.gpu_index),
                e.words,
                _clock(e.start),
                end,
                fmt_duration(e.duration_s(now)),
                NA if e.peak_temp_c is None else f"{e.peak_temp_c} °C",
                NA if e.min_clock_sm_mhz is None else f"{e.min_clock_sm_mhz} MHz",
                job_cost(e, self._slowdowns, now),
            )
        if not episodes:
            ep.add_row("", "no throttling seen since the monitor started", "", "", "", "", "",
                       "")
        ep.move_cursor(row=min(cursor, max(0, ep.row_count - 1)), animate=False)
        act = self.query_one("#active", DataTable)
        act.clear()
        for a in alerts:
            sym = "✖ error" if a.severity == "error" else "⚠ warning"
            act.add_row(sym, NA if a.gpu_index is None else str(a.gpu_index), a.kind,
                        _clock(a.since), printable(a.message))
        if not alerts:
            act.add_row("✓", "", "", "", "no active alerts")
        self._episode_rows = list(reversed(episodes))
        self._alert_rows = list(alerts)
        self._now = now
        self.show_detail()

    def on_data_table_row_highlighted(self) -> None:
        self.show_detail()

    def on_descendant_focus(self) -> None:
        self.show_detail()

    def show_detail(self) -> None:
        """The focused table's selected row, every word of it."""
        table = self.focused if isinstance(self.focused, DataTable) else None
        row = table.cursor_row if table is not None else 0
        if table is not None and table.id == "active":
            text = self._alert_text(row)
        else:
            text = self._episode_text(row)
        self.query_one("#detail", Static).update(Text(text))

    def _alert_text(self, row: int) -> str:
        if not 0 <= row < len(self._alert_rows):
            return "no active alerts"
        a = self._alert_rows[row]  # the message names the GPU ("GPU 1: ...")
        return (f"{'✖ error' if a.severity == 'error' else '⚠ warning'} · "
                f"{printable(a.kind)} · since {_clock(a.since)}\n{printable(a.message)}")

    def _episode_text(self, row: int) -> str:
        if not 0 <= row < len(self._episode_rows):
            return "no throttling seen since the monitor started"
        e = self._episode_rows[row]
        end = "ongoing" if e.end is None else _clock(e.end)
        peak = NA if e.peak_temp_c is None else f"{e.peak_temp_c} °C"
        low = NA if e.min_clock_sm_mhz is None else f"{e.min_clock_sm_mhz} MHz"
        cost = job_cost(e, self._slowdowns, self._now)
        return (f"GPU {e.gpu_index}: {e.words}\n{_clock(e.start)} → {end} "
                f"({fmt_duration(e.duration_s(self._now))}) · peak {peak} · "
                f"lowest SM clock {low}" + (f"\njobs slowed: {cost}" if cost else ""))
