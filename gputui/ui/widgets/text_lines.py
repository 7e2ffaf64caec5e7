"""A few lines of plain text, redrawn only when they change.

Static.update() lays the whole screen out again at every call, even with the same text;
the fleet view's status lines are set at every refresh and mostly read the same. Here
setting the same text costs nothing, new text of as many lines costs one redraw of this
widget, and only a change in the number of lines asks for a layout. The text is shown as
written (never markup): callers pass what `printable` made of anything from outside.
"""

from __future__ import annotations

from rich.segment import Segment
from textual.strip import Strip
from textual.widget import Widget


class TextLines(Widget):
    DEFAULT_CSS = """
    TextLines { height: 1; }
    """

    def __init__(self, text: str = "", *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.text = ""
        self._lines: list[str] = []
        self.set(text)

    def set(self, text: str) -> None:
        if text == self.text:
            return
        lines = text.split("\n")
        if len(lines) != len(self._lines):
            self.styles.height = len(lines)
        self.text = text
        self._lines = lines
        self.refresh()

    def render_line(self, y: int) -> Strip:
        width = self.size.width
        line = self._lines[y] if y < len(self._lines) else ""
        return Strip([Segment(line[:width].ljust(width), self.rich_style)], width)
