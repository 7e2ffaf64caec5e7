"""A one-line gauge: label, bar, value text. Drawn with render_line in four segments.

`gauge_parts` lays the line out; the Gauge widget and the GPU panel (which draws its
gauges itself, in its own styles) both draw from it."""

from __future__ import annotations

from typing import ClassVar

from rich.segment import Segment
from rich.style import Style
from textual.strip import Strip
from textual.widget import Widget

from gputui.ui.widgets.partial import repaint_changed

EIGHTHS = " ▏▎▍▌▋▊▉█"


def bar_text(fraction: float | None, width: int) -> tuple[str, str]:
    """(filled, empty) strings for a bar of `width` cells; partial cells in eighths."""
    if width <= 0:
        return "", ""
    if fraction is None:
        return "", "·" * width
    fraction = min(1.0, max(0.0, fraction))
    eighths = round(fraction * width * 8)
    full, part = divmod(eighths, 8)
    filled = "█" * full + (EIGHTHS[part] if part else "")
    # The empty part uses a different glyph, not just a different colour, so the
    # fill level reads on a monochrome terminal too.
    return filled, "░" * (width - len(filled))


GAUGE_ROLES = ("label", "fill", "empty", "value")  # the parts of a gauge's line


def gauge_parts(label: str, label_width: int, value_width: int, fraction: float | None,
                value: str, width: int) -> list[tuple[str, str]]:
    """The gauge's line, `width` cells, as (text, role) parts (roles: GAUGE_ROLES), empty
    parts left out: `LABEL ██████░░░░ value`, or label and value only when too narrow."""
    label = label.ljust(label_width)[:label_width]
    bar_w = width - len(label) - max(len(value), value_width) - 1
    if bar_w < 3:  # too narrow for a bar: label and value only
        return [(f"{label}{value}"[:width].ljust(width), "value")]
    filled, empty = bar_text(fraction, bar_w)
    value = " " + value.rjust(width - len(label) - bar_w - 1)
    parts = [(label, "label"), (filled, "fill"), (empty, "empty"), (value, "value")]
    return [p for p in parts if p[0]]


class Gauge(Widget):
    """`LABEL ██████░░░░ value`; severity classes -warning / -error recolour the bar."""

    COMPONENT_CLASSES: ClassVar[set[str]] = {
        "gauge--label", "gauge--fill", "gauge--empty", "gauge--value",
    }

    DEFAULT_CSS = """
    Gauge {
        height: 1;
    }
    Gauge > .gauge--label { color: $text-muted; text-style: bold; }
    Gauge > .gauge--fill { color: $primary; }
    Gauge > .gauge--empty { color: $foreground 25%; }
    Gauge > .gauge--value { color: $foreground; }
    Gauge.-warning > .gauge--fill { color: $warning; }
    Gauge.-warning > .gauge--value { color: $warning; text-style: bold; }
    Gauge.-error > .gauge--fill { color: $error; }
    Gauge.-error > .gauge--value { color: $error; text-style: bold; }
    """

    def __init__(self, label: str, *, label_width: int = 5, value_width: int = 12,
                 id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self.label = label
        self.label_width = label_width
        self.value_width = value_width
        self.fraction: float | None = None
        self.value_text = "N/A"
        self.severity: str | None = None
        self._styles: dict[str, Style] = {}  # per role, until the CSS or the class changes

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._styles.clear()

    def _role_style(self, role: str) -> Style:
        """A part's style, looked up once: Textual forgets its own copy at every refresh,
        and looking it up again was most of what drawing a gauge cost."""
        style = self._styles.get(role)
        if style is None:
            style = self._styles[role] = self.get_component_rich_style(f"gauge--{role}")
        return style

    def set(self, fraction: float | None, text: str, severity: str | None = None) -> None:
        """Update; a repaint happens only when something visible changed."""
        if (fraction, text, severity) == (self.fraction, self.value_text, self.severity):
            return
        old, new = self._plain(self.fraction, self.value_text), self._plain(fraction, text)
        self.fraction, self.value_text = fraction, text
        # RAM used moves by bytes every tick: no repaint unless a cell would change.
        if severity == self.severity and old == new:
            return
        if severity != self.severity:
            self.severity = severity
            self._styles.clear()
            self.set_class(severity == "warning", "-warning")
            self.set_class(severity == "error", "-error")
            self.refresh()
            return
        repaint_changed(self, [old], [new], top=(self.size.height - 1) // 2)

    def _plain(self, fraction: float | None, value: str) -> str:
        """The characters render_line draws on the gauge's line."""
        parts = gauge_parts(self.label, self.label_width, self.value_width, fraction, value,
                            self.size.width)
        return "".join(text for text, _role in parts)

    def render_line(self, y: int) -> Strip:
        width = self.size.width
        # Taller than a line (beside a tall sparkline): drawn on the middle row.
        if y != (self.size.height - 1) // 2 or width <= 0:
            return Strip.blank(width, self.rich_style)
        parts = gauge_parts(self.label, self.label_width, self.value_width, self.fraction,
                            self.value_text, width)
        return Strip([Segment(text, self._role_style(role)) for text, role in parts], width)
