"""`a`: throttle episodes (closed and ongoing) and the alerts active now."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Static

from gputui.telemetry.alerts import Alert
from gputui.telemetry.throttle import ThrottleEpisode
from gputui.telemetry.units import NA, fmt_duration
from gputui.ui.messages import SnapshotShown

AlertsSource = Callable[[], tuple[tuple[ThrottleEpisode, ...], list[Alert], datetime | None]]


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
    """
    BINDINGS = [  # noqa: RUF012
        Binding("escape,a", "app.pop_screen", "Back"),
        Binding("q", "app.quit", "Quit"),
    ]

    def __init__(self, source: AlertsSource) -> None:
        super().__init__()
        self.source = source
        self._shown: tuple[object, ...] | None = None

    def compose(self) -> ComposeResult:
        yield Static("Alerts and throttle episodes  (esc: back)", classes="title")
        episodes: DataTable[str | Text] = DataTable(id="episodes", cursor_type="row",
                                                    zebra_stripes=True)
        episodes.border_title = "Throttle episodes"
        yield episodes
        active: DataTable[str | Text] = DataTable(id="active", cursor_type="row")
        active.border_title = "Active alerts"
        yield active
        yield Footer()

    def on_mount(self) -> None:
        ep = self.query_one("#episodes", DataTable)
        for label in ("GPU", "REASONS", "START", "END", "DURATION", "PEAK TEMP", "MIN SM CLOCK"):
            ep.add_column(label, key=label)
        act = self.query_one("#active", DataTable)
        for label in ("SEVERITY", "GPU", "KIND", "SINCE", "MESSAGE"):
            act.add_column(label, key=label)
        ep.focus()
        self.show(*self.source())

    def on_snapshot_shown(self, message: SnapshotShown) -> None:
        self.show(*self.source())

    def show(self, episodes: tuple[ThrottleEpisode, ...], alerts: list[Alert],
             now: datetime | None) -> None:
        """Fill both tables; rebuilt only when the content changed (durations tick)."""
        key = (episodes, tuple(alerts), now if any(e.ongoing for e in episodes) else None)
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
            )
        if not episodes:
            ep.add_row("", "no throttling seen since the monitor started", "", "", "", "", "")
        ep.move_cursor(row=min(cursor, max(0, ep.row_count - 1)), animate=False)
        act = self.query_one("#active", DataTable)
        act.clear()
        for a in alerts:
            sym = "✖ error" if a.severity == "error" else "⚠ warning"
            act.add_row(sym, NA if a.gpu_index is None else str(a.gpu_index), a.kind,
                        _clock(a.since), a.message)
        if not alerts:
            act.add_row("✓", "", "", "", "no active alerts")
