"""Two saved results side by side, with ratios B/A and every setting that differs."""

from __future__ import annotations

from typing import Any, ClassVar

from rich.style import Style
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import DataTable, Static

from gputui.bench.compare import compare
from gputui.bench.fmt import NA, fmt_bytes, fmt_num, fmt_ratio, plain
from gputui.bench.result import Result
from gputui.bench.result_text import throttled_mark
from gputui.safe_text import printable

NOISE = 0.02  # ratios within ±2 % of 1 are noise: not coloured as better or worse


class CompareScreen(ModalScreen[None]):
    """Two results side by side with ratios B/A (results.compare); esc closes."""

    DEFAULT_CSS = """
    CompareScreen { align: center middle; }
    CompareScreen > .cmp--better { color: $success; }
    CompareScreen > .cmp--worse { color: $error; }
    CompareScreen > .cmp--differs { color: $warning; text-style: bold; }
    CompareScreen > .cmp--same { color: $text-muted; }
    CompareScreen > Vertical { width: 96%; height: 90%; border: round $primary;
                               background: $surface; padding: 0 1; }
    CompareScreen #cmp-metrics { height: auto; max-height: 14; }
    CompareScreen #cmp-settings { height: 1fr; }
    CompareScreen .title { text-style: bold; }
    """
    COMPONENT_CLASSES: ClassVar[set[str]] = {"cmp--better", "cmp--worse", "cmp--differs",
                                              "cmp--same"}
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,q,c", "dismiss", "Close"),
    ]

    def __init__(self, a: Result, b: Result) -> None:
        super().__init__()
        self.cmp = compare(a, b)

    def compose(self) -> ComposeResult:
        a, b = self.cmp.a, self.cmp.b
        with Vertical() as box:
            box.border_title = "Compare results (esc closes)"
            yield Static(Text("\n".join(
                printable(f"{tag} = {r.id}  {r.benchmark} {r.model or ''} on "
                          f"{r.device_name or r.device}")
                + (f"  {throttled_mark(r)}" if throttled_mark(r) else "")
                for tag, r in (("A", a), ("B", b)))),
                classes="title")
            yield DataTable(id="cmp-metrics", cursor_type="row")
            yield DataTable(id="cmp-settings", cursor_type="row", zebra_stripes=True)

    def on_mount(self) -> None:
        metrics = self.query_one("#cmp-metrics", DataTable)
        for label in ("METRIC", "A", "B", "B/A"):
            metrics.add_column(label, key=label)
        for m in self.cmp.metrics:
            if m.a is None and m.b is None:
                continue

            def fmt(v: float | None, unit: str = m.unit) -> str:
                if unit == "bytes":
                    return fmt_bytes(v)
                return NA if v is None else f"{fmt_num(v)} {printable(unit)}"

            style = ratio_style(self, m.better, m.ratio)
            ratio = fmt_ratio(m.ratio) + (" within noise" if m.within_noise else "")
            metrics.add_row(Text(m.name), Text(fmt(m.a)), Text(fmt(m.b)),
                            Text(ratio, style=style))
        settings = self.query_one("#cmp-settings", DataTable)
        for label in ("SETTING", "A", "B"):
            settings.add_column(label, key=label)
        rows = sorted(self.cmp.settings, key=lambda s: not s.differs)
        # Long prose values (shapes, sync, ...) would push B off-screen: each value gets
        # half of what is left beside the names, cut with an ellipsis.
        name_w = max([len("SETTING"), *(len(s.name) for s in rows)])
        box_w = int(self.app.size.width * 0.96) - 4  # border and padding
        value_w = max(8, (box_w - name_w - 3 * 2 - 2) // 2)  # cell padding, scrollbar
        differs = self.get_component_rich_style("cmp--differs", partial=True)
        same = self.get_component_rich_style("cmp--same", partial=True)
        for s in rows:
            style = differs if s.differs else same
            settings.add_row(Text(printable(s.name), style=style),
                             Text(clip(plain(s.a), value_w), style=style),
                             Text(clip(plain(s.b), value_w), style=style))
        metrics.focus()


def clip(text: str, width: int) -> str:
    """At most `width` cells, with … when cut."""
    t = Text(text, no_wrap=True)
    t.truncate(max(1, width), overflow="ellipsis")
    return t.plain


def ratio_style(widget: Any, better: str | None, ratio: float | None) -> Style | str:
    """B/A colour from the theme: $success when B is better, $error when worse, plain
    within ±NOISE (run-to-run noise is not a difference)."""
    if better is None or ratio is None or abs(ratio - 1.0) <= NOISE:
        return ""
    return widget.get_component_rich_style(
        "cmp--better" if better == "b" else "cmp--worse", partial=True)
