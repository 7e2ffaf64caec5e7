"""The hosts of the fleet view: one line per host, drawn only where it is on screen.

A thousand hosts in Textual's DataTable cost ~270 ms of CPU per refresh (every row's
cells measured and laid out on `clear()` + `add_row()`, 2 s refresh: 13 % of a core).
This widget keeps the rows as the immutable summaries they are and formats a line only
when it is drawn, so a refresh costs what the screen shows, not what the fleet holds.
Once the user has moved the cursor it stays on its host when the rows move (problems-
first order changes as hosts recover); until then it stays on the top row, the most
urgent host. Enter posts `HostList.Chosen`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import ClassVar

from rich.segment import Segment
from rich.style import Style
from textual import events
from textual.binding import Binding, BindingType
from textual.geometry import Size
from textual.message import Message
from textual.scroll_view import ScrollView
from textual.strip import Strip

from gputui.fleet.host_table import NAME_WIDTH, HostColumn, cells, down_text, row_labels
from gputui.fleet.model import HostSummary, Problem

PROBLEM_STYLE = {
    Problem.DOWN: Style(color="red", bold=True),
    Problem.LOST: Style(color="red"),
    Problem.XID: Style(color="red"),
    Problem.THROTTLING: Style(color="magenta", bold=True),
    Problem.HOT: Style(color="yellow", bold=True),
    Problem.IDLE_HELD: Style(color="cyan"),
    Problem.ALERT: Style(color="yellow"),
    Problem.NONE: Style(),
}
CURSOR = Style(reverse=True)
ELLIPSIS = "…"


def fit(text: str, width: int, right: bool = False) -> str:
    if len(text) > width:
        return text[:max(0, width - 1)] + ELLIPSIS if width else ""
    return text.rjust(width) if right else text.ljust(width)


def line(s: HostSummary, label: str, columns: Sequence[HostColumn], name_width: int,
         now: datetime) -> str:
    """One host's line: its name, then its figures (or why it has none)."""
    down = down_text(s, now)
    head = fit(label, name_width)
    if down is not None:
        return f"{head} {down}"
    return head + "".join(" " + fit(text, c.width, c.right)
                          for c, text in zip(columns, cells(s, columns), strict=True))


def header(columns: Sequence[HostColumn], name_width: int) -> str:
    return fit("Host", name_width) + "".join(" " + fit(c.title, c.width, c.right)
                                             for c in columns)


class HostList(ScrollView, can_focus=True):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("up", "move(-1)", "Up", show=False),
        Binding("down", "move(1)", "Down", show=False),
        Binding("pageup", "page(-1)", "Page up", show=False),
        Binding("pagedown", "page(1)", "Page down", show=False),
        Binding("home", "first", "First", show=False),
        Binding("end", "last", "Last", show=False),
        Binding("enter", "choose", "Open host"),
    ]
    DEFAULT_CSS = """
    HostList { height: 1fr; }
    """

    @dataclass
    class Chosen(Message):
        """The user opened a host (Enter)."""

        target: str

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.rows: list[HostSummary] = []
        self.columns: tuple[HostColumn, ...] = ()
        self.name_width = 12
        self.cursor = 0
        self.moved = False  # the user moved the cursor: it follows its host from then on
        self._now = datetime.now(UTC)
        self._lines: dict[int, str] = {}  # formatted lines of the rows drawn so far
        self._labels: dict[str, str] = {}
        self._drawn: tuple[object, ...] = ()  # what the screen shows: unchanged, no redraw

    @property
    def current(self) -> HostSummary | None:
        return self.rows[self.cursor] if 0 <= self.cursor < len(self.rows) else None

    def set_rows(self, rows: list[HostSummary], columns: tuple[HostColumn, ...],
                 now: datetime) -> None:
        """Show `rows` (already filtered and ordered); the cursor keeps its host."""
        target = self.current.target if self.current else None
        self.rows = rows
        self.columns = columns
        self._now = now
        self._lines = {}
        self._labels = row_labels(rows)
        self.name_width = min(NAME_WIDTH, max(map(len, self._labels.values()), default=4))
        self.name_width = max(self.name_width, 4)
        index = next((i for i, s in enumerate(rows) if s.target == target), None)
        if not self.moved:
            self.cursor = 0
        elif index is not None:
            self.cursor = index
        self.cursor = max(0, min(self.cursor, len(rows) - 1))
        width = len(header(columns, self.name_width))
        self.virtual_size = Size(width, len(rows))
        self._keep_cursor_visible()
        self._refresh_if_changed()

    def _refresh_if_changed(self) -> None:
        """Redraw unless the lines on screen read as they did (most refreshes of a quiet
        fleet): formatting the visible lines costs less than Textual's redraw."""
        top = self.scroll_offset.y
        visible = range(top, min(len(self.rows), top + self.scrollable_content_region.height))
        drawn = (self.cursor, top, self.scroll_offset.x, len(self.rows),
                 *((self.line_text(i), self.rows[i].problem) for i in visible))
        if drawn != self._drawn:
            self._drawn = drawn
            self.refresh()

    def line_text(self, index: int) -> str:
        text = self._lines.get(index)
        if text is None:
            s = self.rows[index]
            text = self._lines[index] = line(s, self._labels[s.target], self.columns,
                                             self.name_width, self._now)
        return text

    def render_line(self, y: int) -> Strip:
        scroll_x, scroll_y = self.scroll_offset
        index = scroll_y + y
        width = self.size.width
        if index >= len(self.rows):
            return Strip.blank(width, self.rich_style)
        style = self.rich_style + PROBLEM_STYLE[self.rows[index].problem]
        if index == self.cursor:
            style += CURSOR
        text = self.line_text(index)[scroll_x:scroll_x + width]
        return Strip([Segment(text.ljust(width), style)], width)

    # --- moving -------------------------------------------------------------------------

    def _keep_cursor_visible(self) -> None:
        height = max(1, self.scrollable_content_region.height)
        top = self.scroll_offset.y
        if self.cursor < top:
            self.scroll_to(y=self.cursor, animate=False)
        elif self.cursor >= top + height:
            self.scroll_to(y=self.cursor - height + 1, animate=False)

    def _move_to(self, index: int) -> None:
        if not self.rows:
            return
        index = max(0, min(len(self.rows) - 1, index))
        self.moved = True
        if index != self.cursor:
            self.cursor = index
            self._keep_cursor_visible()
            self._drawn = ()
            self.refresh()

    def action_move(self, step: int) -> None:
        self._move_to(self.cursor + step)

    def action_page(self, pages: int) -> None:
        self._move_to(self.cursor + pages * max(1, self.scrollable_content_region.height))

    def action_first(self) -> None:
        self._move_to(0)

    def action_last(self) -> None:
        self._move_to(len(self.rows) - 1)

    def action_choose(self) -> None:
        if self.current is not None:
            self.post_message(self.Chosen(self.current.target))

    def on_click(self, event: events.Click) -> None:
        self._move_to(self.scroll_offset.y + event.y)
        if event.chain >= 2:
            self.action_choose()
