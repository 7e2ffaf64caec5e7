"""The key footer: one line, whole keys only, drawn by one widget.

Textual's Footer is a container of one widget per key, recomposed whenever the
bindings change (every focus change) and on every resize; on the monitor that was ~20
widgets to style, lay out and mount, and a visible part of the time to the first frame
(docs/performance.md). It also lets the last keys run under the command-palette key, so
a narrow terminal shows "t Them▏". This footer draws the same line itself — each key
as " k Label ", the palette key at the right edge — and leaves out every key from the
first that would not fit whole (they are all in `?` help). The screen's own bindings
come first in the row, so they are the ones kept. A key can be clicked, as in Textual's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from rich.segment import Segment
from rich.style import Style
from textual import events
from textual.screen import Screen
from textual.strip import Strip
from textual.widget import Widget

EDGE = "▏"  # between the keys and the palette key, as Textual draws it


@dataclass(frozen=True)
class FooterKey:
    """One key as the footer shows it."""

    key: str  # the binding's key ("question_mark"): what a click presses
    display: str  # how it is shown ("?")
    description: str
    enabled: bool

    @property
    def width(self) -> int:
        """Cells it takes: " k Label " (a space each side of the key, one after the
        label)."""
        label = f"{self.description} " if self.description else ""
        return 1 + len(self.display) + 1 + len(label)


class KeyFooter(Widget, can_focus=False):
    ALLOW_SELECT = False
    COMPONENT_CLASSES: ClassVar[set[str]] = {
        "footer-key--key", "footer-key--description", "footer-key--item",
        "footer-key--edge", "footer-key--hover"}
    # The colours and styles of Textual's Footer and FooterKey, from the same variables.
    DEFAULT_CSS = """
    KeyFooter {
        dock: bottom;
        height: 1;
        color: $footer-foreground;
        background: $footer-background;
    }
    KeyFooter > .footer-key--item { background: $footer-item-background; }
    KeyFooter > .footer-key--key {
        color: $footer-key-foreground;
        background: $footer-key-background;
        text-style: bold;
    }
    KeyFooter > .footer-key--description {
        color: $footer-description-foreground;
        background: $footer-description-background;
    }
    KeyFooter > .footer-key--edge { color: $foreground 20%; }
    KeyFooter > .footer-key--hover {
        color: $footer-key-foreground;
        background: $block-hover-background;
    }
    """

    def __init__(self) -> None:
        super().__init__()
        self.shown_keys: list[str] = []  # the keys on the line now (tests read this)
        self._spans: list[tuple[int, int, FooterKey]] = []  # (start, end, key) on the line
        self._hover: str | None = None

    def on_mount(self) -> None:
        self.screen.bindings_updated_signal.subscribe(self, self._bindings_changed)

    def on_unmount(self) -> None:
        self.screen.bindings_updated_signal.unsubscribe(self)

    def _bindings_changed(self, screen: Screen[object]) -> None:
        self.refresh()

    def keys(self) -> tuple[list[FooterKey], FooterKey | None]:
        """The screen's shown bindings (one per action, the first), and the palette's."""
        active = self.screen.active_bindings
        keys: list[FooterKey] = []
        actions: set[str] = set()
        for _node, binding, enabled, _tooltip in active.values():
            if binding.show and binding.action not in actions:
                actions.add(binding.action)
                keys.append(FooterKey(binding.key, self.app.get_key_display(binding),
                                      binding.description, enabled))
        palette = None
        if self.app.ENABLE_COMMAND_PALETTE:
            found = active.get(self.app.COMMAND_PALETTE_BINDING)
            if found is not None:
                palette = FooterKey(found.binding.key,
                                    self.app.get_key_display(found.binding),
                                    found.binding.description, found.enabled)
        return keys, palette

    def render_line(self, y: int) -> Strip:
        width = self.size.width
        base = self.rich_style
        keys, palette = self.keys()
        tail: list[Segment] = []
        room = width
        if palette is not None:
            room -= palette.width + 1  # +1: its edge
            tail = [Segment(EDGE, self._style("footer-key--edge", base)),
                    *self._parts(palette, base, palette=True), Segment(" ", base)]
        segments: list[Segment] = []
        self._spans = []
        self.shown_keys = []
        used = 0
        for key in keys:
            if used + key.width > room:
                break  # this one and every later one: whole keys only
            segments.extend(self._parts(key, base))
            self._spans.append((used, used + key.width, key))
            self.shown_keys.append(key.key)
            used += key.width
        if palette is not None:  # at the right edge; `room` left it space
            tail_width = sum(s.cell_length for s in tail)
            segments.append(Segment(" " * (width - tail_width - used), base))
            start = width - tail_width + 1
            self._spans.append((start, start + len(palette.display) + 1 +
                                len(palette.description), palette))
            segments.extend(tail)
        return Strip(segments).adjust_cell_length(width, base)

    def _parts(self, key: FooterKey, base: Style, *, palette: bool = False) -> list[Segment]:
        """" k " and "Label " in their styles; the palette key as "^p" and " palette"."""
        item = self._style("footer-key--hover" if key.key == self._hover else
                           "footer-key--item", base)
        dim = Style(dim=True) if not key.enabled else Style()
        key_style = item + self.get_component_rich_style("footer-key--key") + dim
        text_style = item + self.get_component_rich_style("footer-key--description") + dim
        if palette:
            return [Segment(key.display, key_style), Segment(f" {key.description}", text_style)]
        parts = [Segment(f" {key.display} ", key_style)]
        if key.description:
            parts.append(Segment(f"{key.description} ", text_style))
        return parts

    def _style(self, component: str, base: Style) -> Style:
        return base + self.get_component_rich_style(component)

    def _key_at(self, x: int) -> FooterKey | None:
        return next((key for start, end, key in self._spans if start <= x < end), None)

    def on_mouse_move(self, event: events.MouseMove) -> None:
        key = self._key_at(event.x)
        hover = key.key if key is not None else None
        if hover != self._hover:
            self._hover = hover
            self.refresh()

    def on_leave(self, event: events.Leave) -> None:
        if self._hover is not None:
            self._hover = None
            self.refresh()

    def on_mouse_down(self, event: events.MouseDown) -> None:
        key = self._key_at(event.x)
        if key is None:
            return
        if key.enabled:
            self.app.simulate_key(key.key)
        else:
            self.app.bell()
