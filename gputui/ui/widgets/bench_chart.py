"""Benchmark pane drawings: throughput over time and the sweep's throughput against p90
latency (textual-plotext line charts with labelled axes and units), and the per-phase
split of a training step (a cheap `render_line` bar).

Each chart is handed its data (`set_data` / `set_points`) and redraws only when it
changed; what it was handed stays readable (`series`, `curve`) for tests and callers.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from rich.segment import Segment
from rich.text import Text
from textual.geometry import Size
from textual.strip import Strip
from textual.widget import Widget
from textual_plotext import PlotextPlot

from gputui.bench.fmt import fmt_phase_ms
from gputui.safe_text import printable

THROTTLE_MARK = "▲"  # a second cue besides colour, for monochrome terminals


@dataclass(frozen=True, slots=True)
class ThroughputSeries:
    """What the throughput chart draws: one point per progress window."""

    x_s: tuple[float, ...]  # end of each window, seconds into the timed loop
    throughput: tuple[float, ...]
    throttled: tuple[bool, ...]  # the window overlapped a throttle episode
    unit: str
    refs: tuple[float, ...]  # headline figures drawn as a line (and inside the scale)


def window_ends(window_s: Sequence[float]) -> list[float]:
    """Seconds into the timed loop at the end of each window (their running sum)."""
    out: list[float] = []
    total = 0.0
    for w in window_s:
        total += max(0.0, float(w))
        out.append(round(total, 3))
    return out


class ThroughputChart(PlotextPlot):
    """Throughput per progress window over the timed loop, on the band the windows and
    the headline span (the headline drawn as a horizontal line); windows that
    overlapped a throttle episode are marked ▲ in the error colour."""

    DEFAULT_CSS = """
    ThroughputChart { height: 7; }
    """

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self.series = ThroughputSeries((), (), (), "", ())
        self.vmax: float | None = None
        self.empty_text = "waiting for the first window…"
        self._seconds_axis = False
        self._key: tuple[object, ...] | None = None

    def set_data(self, values: Sequence[float], flags: Sequence[bool],
                 refs: Sequence[float | None] = (),
                 empty_text: str = "waiting for the first window…",
                 x_s: Sequence[float] | None = None, unit: str = "") -> None:
        """`x_s`: each window's end in seconds into the timed loop (else 1, 2, 3… as
        window numbers); `refs`: the headline figures shown next to the chart: the
        scale includes them so no headline number is above every point."""
        key = (tuple(values), tuple(flags), tuple(refs), empty_text,
               None if x_s is None else tuple(x_s), unit)
        if key == self._key:
            return
        self._key = key
        flags = [*flags[: len(values)], *([False] * (len(values) - len(flags)))]
        xs = list(x_s) if x_s is not None and len(x_s) == len(values) \
            else [float(i + 1) for i in range(len(values))]
        extra = tuple(float(r) for r in refs if r is not None and r > 0)
        self.series = ThroughputSeries(tuple(xs), tuple(float(v) for v in values),
                                       tuple(flags), printable(unit), extra)
        self._seconds_axis = x_s is not None
        self.empty_text = empty_text
        self.vmax = max([*self.series.throughput, *extra]) if values else None
        self._draw()

    @property
    def throttled_columns(self) -> int:
        """How many windows are drawn marked as throttled."""
        return sum(self.series.throttled)

    def _draw(self) -> None:
        plt = self.plt
        plt.clear_data()
        plt.clear_figure()
        s = self.series
        # No title row (the pane is short at 80×24): the axes carry what and which unit,
        # on the labels row under the plot.
        plt.ylabel(f"throughput ({s.unit or 'samples/s'})")
        plt.xlabel("s into the timed loop" if self._seconds_axis else "window")
        if self.vmax is not None:
            plt.plot(list(s.x_s), list(s.throughput), marker="braille", color="cyan")
            marked = [(x, y) for x, y, f in zip(s.x_s, s.throughput, s.throttled,
                                                strict=True) if f]
            if marked:
                plt.scatter([x for x, _ in marked], [y for _, y in marked],
                            marker=THROTTLE_MARK, color="red")
            for ref in s.refs:
                plt.hline(ref, "green")
            # The band the windows and the headline span, not 0..max: in a few rows a
            # 5 % wobble would otherwise be one flat line (the digits give the level).
            lo = min([*s.throughput, *s.refs])
            pad = max((self.vmax - lo) * 0.1, self.vmax * 0.01)
            plt.ylim(max(0.0, lo - pad), self.vmax + pad)
        self.refresh()

    def render(self) -> Any:
        if self.vmax is None:  # no frame around nothing: say what is awaited
            return Text(self.empty_text, style="dim")
        return super().render()


@dataclass(frozen=True, slots=True)
class SweepCurve:
    """What the sweep chart draws: one point per batch size that was measured."""

    batch: tuple[int | None, ...]
    p90_ms: tuple[float, ...]
    throughput: tuple[float, ...]
    unit: str
    latency_label: str  # which latency the x axis is


def sweep_curve(points: Sequence[Any]) -> SweepCurve:
    """Throughput against p90 latency from sweep points (events.Point): a request
    latency where the kind measured one, else the batch's step time. Failed points and
    points without both figures are left out."""
    batch: list[int | None] = []
    lat: list[float] = []
    tps: list[float] = []
    unit = ""
    step_time = tpot = False
    for p in points:
        if not getattr(p, "ok", False) or p.throughput is None:
            continue
        latency = p.latency_ms if isinstance(p.latency_ms, Mapping) else None
        p90 = latency.get("p90") if latency else None
        if p90 is None and p.get("tpot_ms_p90") is not None:
            # lm-infer: the time per output token against tokens/s of whole requests.
            p90, tpot = p.get("tpot_ms_p90"), True
        if p90 is None:
            st = p.get("step_time_ms")
            p90 = st.get("p90") if isinstance(st, Mapping) else None
            step_time = step_time or p90 is not None
        if not isinstance(p90, int | float):
            continue
        batch.append(p.batch_size)
        lat.append(float(p90))
        tps.append(float(p.throughput))
        unit = unit or printable(p.unit or "")
    label = ("p90 TPOT (ms)" if tpot else "p90 step time (ms)" if step_time
             else "p90 latency (ms)")
    return SweepCurve(tuple(batch), tuple(lat), tuple(tps), unit, label)


class SweepChart(PlotextPlot):
    """A sweep's throughput against p90 latency, one labelled point per batch size:
    where a bigger batch stops buying throughput and only adds latency."""

    DEFAULT_CSS = """
    SweepChart { height: 14; display: none; }  /* shown once a sweep has points */
    """

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self.curve = SweepCurve((), (), (), "", "p90 latency (ms)")

    def set_points(self, points: Sequence[Any]) -> None:
        curve = sweep_curve(points)
        self.display = bool(curve.throughput)
        if curve == self.curve:
            return
        self.curve = curve
        plt = self.plt
        plt.clear_data()
        plt.clear_figure()
        plt.title(f"sweep: throughput ({curve.unit or 'samples/s'}) vs {curve.latency_label}")
        plt.xlabel(curve.latency_label)
        if curve.throughput:
            plt.plot(list(curve.p90_ms), list(curve.throughput), marker="braille",
                     color="cyan")
            for b, x, y in zip(curve.batch, curve.p90_ms, curve.throughput, strict=True):
                if b is not None:
                    plt.text(f"b{b}", x=x, y=y, color="yellow")
            plt.ylim(0, max(curve.throughput) * 1.1)
        self.refresh()


PHASE_GLYPHS: Mapping[str, str] = {
    # Different glyphs as well as colours, so the split reads without colour too.
    "data": "░", "h2d": "▒", "forward": "█", "backward": "▓", "optimizer": "▚",
}


def phase_cells(phases_ms: Mapping[str, float], width: int) -> list[tuple[str, int]]:
    """(phase, cells) in order, proportional to time; largest remainders fill the bar."""
    items = [(k, max(0.0, float(v))) for k, v in phases_ms.items() if k in PHASE_GLYPHS]
    total = sum(v for _, v in items)
    if total <= 0 or width <= 0:
        return [(k, 0) for k, _ in items]
    exact = [(k, v * width / total) for k, v in items]
    cells = {k: int(x) for k, x in exact}
    left = width - sum(cells.values())
    for k, _x in sorted(exact, key=lambda kx: kx[1] - int(kx[1]), reverse=True)[:left]:
        cells[k] += 1
    return [(k, cells[k]) for k, _ in items]


class PhaseBar(Widget):
    """One bar split into the phases of a training step, and a legend with ms per step."""

    COMPONENT_CLASSES: ClassVar[set[str]] = {
        "phase--data", "phase--h2d", "phase--forward", "phase--backward", "phase--optimizer",
        "phase--legend",
    }
    DEFAULT_CSS = """
    PhaseBar { height: auto; }
    PhaseBar > .phase--data { color: $warning; }
    PhaseBar > .phase--h2d { color: $error; }
    PhaseBar > .phase--forward { color: $primary; }
    PhaseBar > .phase--backward { color: $secondary; }
    PhaseBar > .phase--optimizer { color: $success; }
    PhaseBar > .phase--legend { color: $text-muted; }
    """

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self.phases_ms: dict[str, float] = {}
        self.empty_text = "phase split: after the first timed steps"

    def set_phases(self, phases_ms: Mapping[str, float] | None,
                   empty_text: str = "phase split: after the first timed steps") -> None:
        phases = dict(phases_ms or {})
        if phases != self.phases_ms or empty_text != self.empty_text:
            self.phases_ms = phases
            self.empty_text = empty_text
            self.refresh(layout=True)  # the legend may need another line

    def legend_text(self) -> str:
        total = sum(self.phases_ms.values())
        # Every figure carries its unit: the legend is often cut at the right edge.
        parts = [f"{PHASE_GLYPHS[k]} {k} {fmt_phase_ms(v)}" for k, v in self.phases_ms.items()
                 if k in PHASE_GLYPHS]
        return f"step {fmt_phase_ms(total)}: " + "  ".join(parts)

    def render_line(self, y: int) -> Strip:
        width = self.size.width
        legend_style = self.get_component_rich_style("phase--legend")
        if not self.phases_ms:
            text = self.empty_text if y == 0 else ""
            return Strip([Segment(text[:width].ljust(width), legend_style)], width)
        if y == 0:
            segs = [Segment(PHASE_GLYPHS[k] * n, self.get_component_rich_style(f"phase--{k}"))
                    for k, n in phase_cells(self.phases_ms, width) if n]
            return Strip(segs, width).extend_cell_length(width)
        lines = self._legend_lines(width)
        if 1 <= y <= len(lines):
            return Strip(lines[y - 1]).crop(0, width).extend_cell_length(width)
        return Strip.blank(width, self.rich_style)

    def _legend_lines(self, width: int) -> list[list[Segment]]:
        """The legend flowed onto as many lines as it needs: a phase is never cut."""
        legend_style = self.get_component_rich_style("phase--legend")
        total = sum(self.phases_ms.values())
        items = [[Segment(f"step {fmt_phase_ms(total)}: ", legend_style)]]
        for k, v in self.phases_ms.items():
            if k in PHASE_GLYPHS:
                items.append([Segment(f"{PHASE_GLYPHS[k]} ",
                                      self.get_component_rich_style(f"phase--{k}")),
                              Segment(f"{k} {fmt_phase_ms(v)}  ", legend_style)])
        lines: list[list[Segment]] = [[]]
        used = 0
        for item in items:
            n = sum(seg.cell_length for seg in item)
            if used and used + n > max(width, 1):
                lines.append([])
                used = 0
            lines[-1].extend(item)
            used += n
        return lines

    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        return 1 + (len(self._legend_lines(width)) if self.phases_ms else 0)
