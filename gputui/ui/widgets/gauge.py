"""A one-line gauge: label, bar, value text. Drawn with render_line in four segments."""

from __future__ import annotations

from typing import ClassVar

from rich.segment import Segment
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
            self.set_class(severity == "warning", "-warning")
            self.set_class(severity == "error", "-error")
            self.refresh()
            return
        repaint_changed(self, [old], [new], top=(self.size.height - 1) // 2)

    def _plain(self, fraction: float | None, value: str) -> str:
        """The characters render_line draws on the gauge's line."""
        width = self.size.width
        label = self.label.ljust(self.label_width)[: self.label_width]
        bar_w = width - len(label) - max(len(value), self.value_width) - 1
        if bar_w < 3:
            return f"{label}{value}"[:width].ljust(width)
        filled, empty = bar_text(fraction, bar_w)
        return label + filled + empty + " " + value.rjust(width - len(label) - bar_w - 1)

    def render_line(self, y: int) -> Strip:
        width = self.size.width
        # Taller than a line (beside a tall sparkline): drawn on the middle row.
        if y != (self.size.height - 1) // 2 or width <= 0:
            return Strip.blank(width, self.rich_style)
        label = self.label.ljust(self.label_width)[: self.label_width]
        value = self.value_text
        bar_w = width - len(label) - max(len(value), self.value_width) - 1
        if bar_w < 3:  # too narrow for a bar: label and value only
            text = f"{label}{value}"[:width].ljust(width)
            return Strip([Segment(text, self.get_component_rich_style("gauge--value"))], width)
        filled, empty = bar_text(self.fraction, bar_w)
        value = " " + value.rjust(width - len(label) - bar_w - 1)
        segments = [
            Segment(label, self.get_component_rich_style("gauge--label")),
            Segment(filled, self.get_component_rich_style("gauge--fill")),
            Segment(empty, self.get_component_rich_style("gauge--empty")),
            Segment(value, self.get_component_rich_style("gauge--value")),
        ]
        return Strip([s for s in segments if s.text], width)
