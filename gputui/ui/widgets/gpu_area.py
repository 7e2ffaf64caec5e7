"""The GPU area: every GPU as a full panel (`gpu_panel`) in a grid, or as compact rows
(`gpu_row`, imported with the first rows); only the kind shown is mounted and updated."""

from __future__ import annotations

from typing import TYPE_CHECKING

from textual.app import ComposeResult
from textual.await_complete import AwaitComplete
from textual.containers import Grid, Vertical, VerticalScroll
from textual.widget import AwaitMount, Widget

from gputui.telemetry.model import DeviceInfo
from gputui.ui.layout import GPU_AREA_MAX, Layout
from gputui.ui.widgets.gpu_panel import GpuPanel
from gputui.ui.widgets.gpu_view import GpuFrame

if TYPE_CHECKING:
    from gputui.ui.widgets.gpu_row import GpuRow, RowsHeader


class GpuArea(VerticalScroll):
    """All GPUs: a grid of panels, or compact rows; only the visible kind is updated.

    Panels that do not fit (forced with `c` in a small terminal) scroll: with the mouse,
    or with the keys once focused (Tab), which it only accepts while it can scroll.
    """

    # max-height: the layout chooser counts on it (GPU_AREA_MAX).
    DEFAULT_CSS = f"""
    GpuArea {{ height: auto; max-height: {round(GPU_AREA_MAX * 100)}%;
               scrollbar-size-vertical: 1; }}
    """ + """
    GpuArea:focus { scrollbar-color: $accent; scrollbar-background: $accent 30%; }
    GpuArea > #panels { layout: grid; grid-size: 1; grid-rows: auto; grid-gutter: 0 1;
                        height: auto; }
    GpuArea > #rows { height: auto; border-bottom: solid $primary 40%; }
    GpuArea.-compact > #panels { display: none; }
    GpuArea > #rows { display: none; }
    GpuArea.-compact > #rows { display: block; }
    """

    def allow_focus(self) -> bool:
        return self.max_scroll_y > 0

    def __init__(self, *, id: str | None = None, devices: tuple[DeviceInfo, ...] = (),
                 layout: Layout | None = None) -> None:
        """`devices` and their `layout`, when known before the screen is built: their
        widgets are composed with it (no mount, no second layout before the first
        paint); else `set_devices` mounts them later."""
        super().__init__(id=id)
        self.indices: tuple[int, ...] = ()
        self._infos: tuple[DeviceInfo, ...] = ()
        self._panels: dict[int, GpuPanel] = {}
        self._rows: dict[int, GpuRow] = {}
        self.compact = False
        self.columns = 1
        self.spark_rows = 1
        self.row_lines = 1
        self._header: RowsHeader | None = None  # over the rows, made with them
        if devices and layout is not None:
            self._infos = devices
            self.indices = tuple(i.index for i in devices)
            self.compact, self.columns = layout.compact, layout.columns
            self.spark_rows, self.row_lines = layout.spark_rows, layout.row_lines
            self.set_class(self.compact, "-compact")
            self._make_kind(self.compact)

    def compose(self) -> ComposeResult:
        grid = Grid(*self._panels.values(), id="panels")
        grid.styles.grid_size_columns = self.columns
        yield grid
        rows = [self._header, *self._rows.values()] if self._header else []
        yield Vertical(*rows, id="rows")

    async def set_devices(self, infos: tuple[DeviceInfo, ...]) -> None:
        """Mount widgets for these GPUs: only the kind shown now (panels or rows).

        The other kind is mounted when the layout first switches to it: 8 panels are
        ~200 widgets, and mounting what is not shown costs start-up time and frames.
        Call set_layout first, so the first frame already has the right kind.
        """
        indices = tuple(i.index for i in infos)
        if indices == self.indices:
            return
        panels = self.query_one("#panels", Grid)
        rows = self.query_one("#rows", Vertical)
        await panels.remove_children()
        await rows.remove_children()
        self._panels, self._rows, self._header = {}, {}, None
        self._infos = infos
        self.indices = indices
        await self._mount_kind(self.compact)

    def _mount_kind(self, compact: bool) -> AwaitComplete | AwaitMount:
        """Mount the rows (compact) or panels for the current GPUs, if not yet mounted."""
        made = self._make_kind(compact)
        if made and compact:
            return self.query_one("#rows", Vertical).mount_all(made)
        if made:
            return self.query_one("#panels", Grid).mount_all(made)
        return AwaitComplete.nothing()

    def _make_kind(self, compact: bool) -> list[Widget]:
        """Make the rows (compact) or panels for the current GPUs, if not made yet."""
        if compact and not self._rows and self._infos:
            # Imported with the first rows: most terminals never show them.
            from gputui.ui.widgets.gpu_row import GpuRow, RowsHeader

            self._header = RowsHeader(id="rows-header")
            self._rows = {i.index: GpuRow(i, id=f"row-{i.index}") for i in self._infos}
            for row in self._rows.values():
                row.set_lines(self.row_lines)
            return [self._header, *self._rows.values()]
        if not compact and not self._panels and self._infos:
            self._panels = {i.index: GpuPanel(i, id=f"gpu-{i.index}") for i in self._infos}
            for panel in self._panels.values():
                panel.set_spark_rows(self.spark_rows)
            return list(self._panels.values())
        return []

    def set_layout(self, compact: bool, columns: int, spark_rows: int = 1,
                   row_lines: int = 1) -> None:
        if spark_rows != self.spark_rows:
            self.spark_rows = spark_rows
            for panel in self._panels.values():
                panel.set_spark_rows(spark_rows)
        if row_lines != self.row_lines:
            self.row_lines = row_lines
            for row in self._rows.values():
                row.set_lines(row_lines)
        if compact != self.compact:
            self.compact = compact
            self.set_class(compact, "-compact")
            self._mount_kind(compact)  # not awaited: panels show their frame on mount
        if columns != self.columns:
            self.columns = columns
            self.query_one("#panels", Grid).styles.grid_size_columns = columns

    def update_frames(self, frames: list[GpuFrame]) -> None:
        widgets = self._rows if self.compact else self._panels
        if self.compact and frames and self._header is not None:
            self._header.set_seconds(frames[0].seconds)
        for f in frames:
            w = widgets.get(f.sample.index)
            if w is not None:
                w.update_frame(f)
