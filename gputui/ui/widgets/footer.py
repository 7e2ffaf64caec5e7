"""A footer that shows whole keys only.

Textual's Footer lays its keys out in one row and lets the last ones run under the
command-palette key, so a narrow terminal shows "t Them▏". This one leaves out every key
from the first that would not fit whole (they are all in `?` help). The screen's own
bindings come first in the row, so they are the ones kept.
"""

from __future__ import annotations

from collections.abc import Iterable

from textual.widget import Widget
from textual.widgets import Footer

from gputui.ui.textual_adapter import FooterKey


def key_width(key: FooterKey) -> int:
    """Cells a key takes in the (non-compact) footer: " k Label " — a space each side
    of the key, and one after the label."""
    label = f"{key.description} " if key.description else ""
    return 1 + len(key.key_display) + 1 + len(label)


class FittedFooter(Footer):
    def compose(self) -> Iterable[Widget]:  # type: ignore[override]
        items = list(super().compose())
        width = self.size.width or self.app.size.width
        palette = [w for w in items if isinstance(w, FooterKey)
                   and w.has_class("-command-palette")]
        room = width - sum(key_width(p) + 1 for p in palette)  # +1: its "▏" edge
        used = 0
        cut = False
        self.shown_keys: list[str] = []
        for item in items:
            if isinstance(item, FooterKey) and item not in palette:
                used += key_width(item)
                cut = cut or used > room
                if cut:
                    continue
                self.shown_keys.append(item.key)
            yield item

    def on_resize(self) -> None:
        self.call_after_refresh(self.recompose)
