"""One-line header: host, versions, the snapshot's time, interval, alerts (or replay state).

What it shows is a pure function of the latest frame and a few facts of the app
(`header_info`); the widget only draws it.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime
from typing import TYPE_CHECKING, ClassVar

from rich.style import Style
from rich.text import Text
from textual.app import ComposeResult
from textual.geometry import Size
from textual.widget import Widget

from gputui.safe_text import printable
from gputui.telemetry.units import fmt_duration
from gputui.ui.widgets.partial import repaint_changed

if TYPE_CHECKING:
    from gputui.telemetry.frame import Frame
    from gputui.ui.replay_control import ReplayPosition


@dataclass(frozen=True, slots=True)
class HeaderInfo:
    """What the header line shows."""

    hostname: str = ""
    driver: str | None = None
    cuda: str | None = None
    amd_driver: str | None = None  # amdgpu's version, on a box with AMD GPUs
    time: datetime | None = None  # the snapshot's time, never now(): stable screenshots
    interval_s: float = 1.0
    alerts: int = 0
    errors: int = 0
    skipped_ticks: int = 0
    replay: str | None = None  # recording file name, in replay mode
    playing: bool = False
    speed: float = 1.0
    elapsed_s: float = 0.0
    duration_s: float = 0.0
    bench: str | None = None  # a benchmark in progress: "cnn-train 42%"
    stale: int = 0  # GPUs whose driver calls did not answer this tick


def header_info(frame: Frame | None, *, interval_s: float, bench: str | None = None,
                replay: ReplayPosition | None = None) -> HeaderInfo:
    """The header for `frame` (None: before the first reading), read every `interval_s`
    (a replay's: the recording's), with the benchmark in progress ("cnn-train 42%") and
    where a replay is, if any."""
    snap = frame.snapshot if frame is not None else None
    active = frame.alerts if frame is not None else ()
    info = HeaderInfo(
        hostname=snap.host.hostname if snap else "",
        driver=snap.system.driver_version if snap else None,
        cuda=snap.system.cuda_driver_version if snap else None,
        amd_driver=snap.system.amd_driver_version if snap else None,
        time=snap.time if snap else None,
        interval_s=interval_s,
        alerts=len(active),
        errors=sum(a.severity == "error" for a in active),
        skipped_ticks=snap.skipped_ticks if snap else 0,
        stale=len(frame.stale_gpus) if frame is not None else 0,
        bench=bench,
    )
    if replay is None:
        return info
    return replace(info, replay=replay.name, playing=replay.playing, speed=replay.speed,
                   elapsed_s=replay.elapsed_s, duration_s=replay.duration_s)


def _interval(s: float) -> str:
    return f"{s:g}s"


class _Part(Widget):
    """One side of the header; its own widget, repainted only when its text changed."""

    DEFAULT_CSS = """
    _Part { height: 1; width: 1fr; }
    _Part.-right { width: auto; }
    """

    def __init__(self, *, classes: str | None = None) -> None:
        super().__init__(classes=classes)
        self.text = Text(no_wrap=True, end="")

    def set_text(self, text: Text) -> None:
        if text == self.text:
            return
        grew = text.cell_len != self.text.cell_len
        old, self.text = self.text, text
        if grew:  # only the auto-width right side needs a layout pass
            self.refresh(layout=self.has_class("-right"))
        else:
            repaint_changed(self, [old], [text])

    def get_content_width(self, container: Size, viewport: Size) -> int:
        return self.text.cell_len

    def render(self) -> Text:
        return self.text


class AppHeader(Widget):
    COMPONENT_CLASSES: ClassVar[set[str]] = {
        "header--title", "header--muted", "header--warning", "header--error", "header--ok",
    }
    DEFAULT_CSS = """
    AppHeader {
        dock: top; height: 1; layout: horizontal; background: $panel; color: $foreground;
    }
    AppHeader > .header--title { color: $accent; text-style: bold; }
    AppHeader > .header--muted { color: $text-muted; }
    AppHeader > .header--warning { color: $warning; text-style: bold; }
    AppHeader > .header--error { color: $error; text-style: bold; }
    AppHeader > .header--ok { color: $success; }
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.info = HeaderInfo()
        self._left = _Part()
        self._right = _Part(classes="-right")

    def compose(self) -> ComposeResult:
        yield self._left
        yield self._right

    def on_mount(self) -> None:
        self._draw()

    def set_info(self, info: HeaderInfo) -> None:
        if info != self.info:
            self.info = info
            self._draw()

    def on_app_theme_changed(self) -> None:  # pragma: no cover - styles are re-read
        self._draw()

    def notify_style_update(self) -> None:
        super().notify_style_update()
        if self.is_mounted:
            self._draw()

    def _style(self, name: str) -> Style:
        return self.get_component_rich_style(f"header--{name}")

    def on_resize(self) -> None:
        self._draw()

    def _draw(self) -> None:
        left, right = self.texts()
        width = self.size.width
        if width and left.cell_len + right.cell_len > width:
            # Narrow (80 columns during a benchmark): the right side drops its least
            # useful words first, so the driver/CUDA versions on the left stay whole.
            left, right = self.texts(compact=True)
        left.overflow = "ellipsis"  # narrow terminal: the time and alerts matter more
        self._right.set_text(right)
        self._left.set_text(left)

    def texts(self, compact: bool = False) -> tuple[Text, Text]:
        """(left, right) of the header line for the current info; `compact` leaves out
        the refresh interval and shortens the benchmark and alert words."""
        i = self.info
        left = Text(no_wrap=True, end="")
        left.append(" gputui", self._style("title"))
        if i.replay:
            left.append(" REPLAY ", self._style("warning"))
            left.append(printable(i.replay), self._style("muted"))
        if i.hostname:
            left.append(f"  {printable(i.hostname)}")
        # NVIDIA's versions, unless the box has only AMD GPUs (then amdgpu's alone).
        drv = "" if i.amd_driver and not i.driver else (
            f"  driver {printable(i.driver or 'N/A')}  CUDA {printable(i.cuda or 'N/A')}")
        if i.amd_driver:
            drv += f"  amdgpu {printable(i.amd_driver)}"
        left.append(drv, self._style("muted"))

        right = Text(no_wrap=True, end="")
        right.append(" ")  # at least one cell between the two sides
        if i.time is not None:
            stamp = i.time.astimezone()
            right.append(f"{stamp:%Y-%m-%d %H:%M:%S}" if i.replay else f"{stamp:%H:%M:%S}")
        if i.replay:
            state = "▶ playing" if i.playing else "⏸ paused"
            right.append(f"  {state} ×{i.speed:g}", self._style("ok" if i.playing else "warning"))
            right.append(f"  {fmt_duration(i.elapsed_s)}/{fmt_duration(i.duration_s)}",
                         self._style("muted"))
        elif not compact:
            right.append(f"  every {_interval(i.interval_s)}", self._style("muted"))
        if not i.replay and i.skipped_ticks:
            right.append(f"  {i.skipped_ticks} late", self._style("warning"))
        if i.bench:
            right.append(f"  ▶ {'' if compact else 'bench '}{i.bench}", self._style("title"))
        if i.stale:
            # A hung GPU is news at once, before its alert's grace time has passed.
            right.append(f"  ⏳ {i.stale} GPU{'s' if i.stale != 1 else ''} stale",
                         self._style("error"))
        if i.alerts:
            style = "error" if i.errors else "warning"
            sym = "✖" if i.errors else "⚠"
            right.append(f"  {sym} {i.alerts} alert{'s' if i.alerts != 1 else ''}",
                         self._style(style))
        elif not i.stale:
            right.append("  ✓ ok" if compact else "  ✓ no alerts", self._style("ok"))
        right.append(" ")
        return left, right
