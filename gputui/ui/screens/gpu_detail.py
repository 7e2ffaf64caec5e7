"""`i`: one GPU in detail: everything NVML gave for it that its panel has no room for
(identity, clocks and power against their limits, temperatures with the HBM limit, PCIe,
NVLink per link, ECC / row remapping / retired pages, GPM profiling, MIG devices).

The boxes are mounted once and updated in place from each frame the app posts
(`SnapshotShown`); `n`/`p` move to the next/previous GPU. A stale GPU's values are the
last good reading: the title says so, as the panel does.
"""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import ItemGrid, VerticalScroll
from textual.screen import Screen
from textual.widgets import Static

from gputui.safe_text import printable
from gputui.telemetry.model import GpuSample, Snapshot
from gputui.ui.messages import DetailFieldsWanted, SnapshotShown
from gputui.ui.widgets.footer import KeyFooter
from gputui.ui.widgets.gpu_facts import FactsBox, sections
from gputui.ui.widgets.mig_view import MigTable

MIN_BOX_WIDTH = 58  # cells: borders, a label column and "71°C (slowdown 85°C, shutdown 92°C)"


def title_text(g: GpuSample | None, index: int) -> Text:
    if g is None:
        return Text(f"GPU {index} · no reading yet  (esc: back)")
    text = Text(f"GPU {index} · {printable(g.info.name)}")
    if g.lost:
        text.append("  ✖ LOST", style="bold red")
    elif g.stale:
        age = "" if g.stale_s is None else f" {g.stale_s:.0f} s"
        text.append(f"  ⚠ STALE: values{age} old", style="bold yellow")
    text.append("  (esc: back · n/p: next/previous GPU)", style="dim")
    return text


class GpuDetailScreen(Screen[None]):
    DEFAULT_CSS = """
    GpuDetailScreen { layout: vertical; }
    GpuDetailScreen > #detail-title { height: 1; padding: 0 1; background: $primary 30%;
                                      text-style: bold; }
    GpuDetailScreen ItemGrid { height: auto; grid-gutter: 0 1; }
    GpuDetailScreen #identity-slot { display: none; }
    GpuDetailScreen #mig { border: round $primary 60%; border-title-style: bold;
                           padding: 0 1; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,i", "app.pop_screen", "Back"),
        Binding("n", "gpu(1)", "Next GPU"),
        Binding("p", "gpu(-1)", "Previous GPU"),
        Binding("q", "app.quit", "Quit"),
    ]

    def __init__(self, snapshot: Snapshot | None, gpu_index: int = 0) -> None:
        super().__init__()
        self.snapshot = snapshot
        self.gpu_index = gpu_index
        self._title: Text | None = None
        self._asked_from = 0  # the first snapshot read with the detail fields (seq)

    def sample(self) -> GpuSample | None:
        if self.snapshot is None:
            return None
        return next((g for g in self.snapshot.gpus if g.index == self.gpu_index), None)

    def compose(self) -> ComposeResult:
        g = self.sample()
        yield Static(title_text(g, self.gpu_index), id="detail-title")
        with VerticalScroll(id="detail-body"):
            # Identity (a 40-character UUID) gets the whole width; the other boxes share
            # it two by two where they fit.
            yield Static(id="identity-slot")
            yield ItemGrid(min_column_width=MIN_BOX_WIDTH)
            yield from self.compose_mig()
        yield KeyFooter()

    def compose_mig(self) -> ComposeResult:
        """Where the MIG devices go: gputui.ui.widgets.mig_view's table (hidden without
        MIG mode), fed with the same sample in `show`."""
        table = MigTable(id="mig")
        table.border_title = "MIG devices"
        yield table

    def on_mount(self) -> None:
        # The fields only this screen shows are read only while it is open: from the
        # tick after next at the latest (the next may have started already).
        self.app.post_message(DetailFieldsWanted(True))
        self._asked_from = (self.snapshot.seq + 2) if self.snapshot is not None else 0
        self.show()

    def on_unmount(self) -> None:
        self.app.post_message(DetailFieldsWanted(False))

    def on_snapshot_shown(self, message: SnapshotShown) -> None:
        self.snapshot = message.snapshot
        self.show()

    def show(self) -> None:
        """Update every box in place from `snapshot` (a box whose rows did not change is
        left alone). The boxes are mounted once, when the first reading is there."""
        g = self.sample()
        title = title_text(g, self.gpu_index)
        if title != self._title:
            self._title = title
            self.query_one("#detail-title", Static).update(title)
        if g is None or self.snapshot is None:
            return
        boxes = {b.section.key: b for b in self.query(FactsBox)}
        grid = self.query_one(ItemGrid)
        asked = self.snapshot.seq >= self._asked_from
        for section in sections(g, self.snapshot.system, asked=asked):
            box = boxes.get(section.key)
            if box is not None:
                box.show(section)
            elif section.key == "identity":  # the first reading: mounted once
                self.mount(FactsBox(section), after=self.query_one("#identity-slot"))
            else:
                grid.mount(FactsBox(section))
        self.query_one(MigTable).update_sample(g)

    def action_gpu(self, step: int) -> None:
        if self.snapshot is None or not self.snapshot.gpus:
            return
        indices = [g.index for g in self.snapshot.gpus]
        i = indices.index(self.gpu_index) if self.gpu_index in indices else 0
        self.gpu_index = indices[(i + step) % len(indices)]
        self.show()
