"""The run in progress (or the last one): progress, the throughput now and the headline,
a chart of every progress window with throttled windows marked, latency or the per-phase
split, memory, energy, a deepbench run's tables per op, the error of a failed run, and the
tested GPU's live telemetry.

The headline is the one number a run is known by everywhere (CLI, history, compare):
samples ÷ seconds of the timed loop (gputui.bench.stats). Strings from the worker or a
result are shown as Text (never markup) with control characters escaped.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any

from rich.style import Style
from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.widgets import Digits, Label, ProgressBar, Static

from gputui.bench import catalog, stats
from gputui.bench.attribution import attribute
from gputui.bench.fmt import (
    NA,
    fmt_big,
    fmt_bytes,
    fmt_eta,
    fmt_ms,
    fmt_num,
    fmt_percentiles,
    remaining_s,
)
from gputui.bench.result_text import fmt_headline
from gputui.safe_text import printable
from gputui.telemetry.model import Snapshot
from gputui.telemetry.throttle import ThrottleEpisode
from gputui.telemetry.units import fmt_duration
from gputui.ui.bench_session import LiveRun
from gputui.ui.widgets.bench_chart import PhaseBar, SweepChart, ThroughputChart, window_ends
from gputui.ui.widgets.bench_deepbench import DeepbenchTables

STDERR_LINES_SHOWN = 8
CARETS = re.compile(r"^[\s^~]*\^[\s^~]*$")  # traceback markers under a source line
NO_WINDOWS = "no timed windows (run failed)"
HEADLINE_LABEL = "throughput (samples ÷ timed s)"


def stderr_lines(tail: Any, message: str = "") -> list[str]:
    """The last lines of the worker's stderr worth reading: no caret-only marker lines
    (`^^^^`), not the error message again (the pane's first line), at most
    STDERR_LINES_SHOWN."""
    if not isinstance(tail, list | tuple):
        return []
    msg = message.strip()
    out = [printable(str(line).rstrip()) for line in tail
           if str(line).strip() and not CARETS.match(str(line))
           and not (msg and str(line).strip() == msg)]
    return out[-STDERR_LINES_SHOWN:]


def time_line(live: LiveRun, now: datetime) -> str:
    """"elapsed 42s · ETA 18s" while it runs (the CLI's progress line says the same),
    "took 1m00s" once done. Elapsed counts from the worker's start; the ETA is the rest of
    the timed loop (fmt.remaining_s), unknown until it has begun."""
    end = live.finished_wall if live.done and live.finished_wall is not None else now
    elapsed = fmt_duration((end - live.started_wall).total_seconds())
    if live.done:
        return f"took {elapsed}"
    if live.stage == "queued":
        return ""
    p = live.progress
    if p is None:
        return f"elapsed {elapsed} · ETA after the warm-up"
    return f"elapsed {elapsed} · " + fmt_eta(remaining_s(p.step, p.of, p.elapsed_s,
                                                          p.duration_s))


def live_flops_lines(live: LiveRun) -> list[str]:
    """lm-train while it runs: model TFLOP/s at the live rate from the published formula
    (MFU needs the device's peak, which the result brings)."""
    request = live.request
    if request.benchmark != "lm-train" or not live.points:
        return []
    from gputui.bench import flops
    from gputui.bench.lm_shapes import SHAPES, shape_of

    model = live.model or request.model or ""
    if model not in SHAPES:
        return []
    rate = live.points[-1].throughput
    per = flops.lm_train_per_token(shape_of(model, request.seq_len))
    return [f"model FLOPs: ≈ {fmt_num(per * rate / 1e12)} TFLOP/s at the current "
            "rate (6N + 12·L·d·T per token; MFU at the end)"] if rate else []


def status_styles(widget: Any) -> dict[str, Style]:
    """ok / cancelled / failed → the theme's $success / $warning / $error (the screen's
    `status--*` component classes), so every theme, high contrast included, applies."""
    return {status: widget.get_component_rich_style(f"status--{status}", partial=True)
            for status in ("ok", "cancelled", "failed")}


class LiveRunView(VerticalScroll):
    """The right pane of the bench screen: `show(...)` draws one LiveRun."""

    def compose(self) -> ComposeResult:
        yield Static("", id="live-title")
        yield Static("", id="live-error")
        with Horizontal(id="live-progress-row"):  # one row: the pane is short at 80×24
            yield ProgressBar(total=100, show_eta=False, id="live-progress")
            yield Static("", id="live-time")
        # One big number: the headline. The last window's rate is a small line beside it,
        # so the eye never has two big figures to choose from.
        yield Label(HEADLINE_LABEL, id="tp-label")
        with Horizontal(id="live-numbers"):
            yield Digits("-", id="tp-headline")
            with Vertical(id="tp-side"):
                yield Static("", id="tp-unit")
                yield Static("", id="tp-now")
        yield ThroughputChart(id="chart")
        yield SweepChart(id="sweep-chart")
        yield Static("", id="callout")
        yield Static("", id="live-stats")
        yield DeepbenchTables(id="deepbench")
        yield PhaseBar(id="phases")
        yield Static("", id="telemetry")

    def on_mount(self) -> None:
        self.border_title = "Run"

    def show_nothing(self) -> None:
        self.query_one("#live-title", Static).update(
            Text("No benchmark yet: pick one on the left, adjust the settings, press Enter."))
        self.query_one("#live-time", Static).update("")
        self.query_one("#live-progress", ProgressBar).update(total=100, progress=0)
        self.query_one("#telemetry", Static).update("")
        self.query_one(DeepbenchTables).show_result(None)

    def show(self, live: LiveRun, episodes: list[ThrottleEpisode], now: datetime,
             snap: Snapshot | None, ongoing: Any) -> None:
        self.query_one("#live-title", Static).update(self._title(live))
        bar = self.query_one("#live-progress", ProgressBar)
        frac = live.fraction
        if frac is None and live.done:
            # Cancelled or failed: the bar stays where the run stopped (steps or seconds).
            bar.update(total=100, progress=100 * live.stopped_fraction)
        elif frac is None:
            bar.update(total=None)
        else:
            bar.update(total=100, progress=100 * frac)
        headline = live.headline
        # A probe's windows count calls or steps, its result TFLOP/s or GB/s (matmul,
        # deepbench, …): the big number is the result's, so it reads in the result's unit,
        # and is drawn on the windows' chart only where the two units are one.
        unit = live.result.unit if live.result is not None and live.result.unit else live.unit
        one_unit = not live.unit or unit == live.unit
        self.query_one("#live-time", Static).update(Text(time_line(live, now)))
        self.query_one("#tp-headline", Digits).update(fmt_big(headline))
        self.query_one("#tp-unit", Static).update(Text(printable(unit or "")))
        current = None if live.done else live.current
        self.query_one("#tp-now", Static).update(
            Text("" if current is None else f"last window {fmt_num(current)}"))
        failed = live.done and live.status == "failed"
        self.query_one(ThroughputChart).set_data(
            [p.throughput for p in live.points], live.throttled_flags(episodes, now),
            refs=(headline,) if one_unit else (),
            empty_text=(NO_WINDOWS if failed else "no timed windows" if live.done
                        else "waiting for the first window…"),
            x_s=window_ends([p.window_s for p in live.points]), unit=live.unit or "")
        self.query_one(SweepChart).set_points(
            live.sweep_points or (list(live.result.points) if live.result else []))
        self._callout(live, episodes, now)
        self.query_one("#live-stats", Static).update(self._stats(live))
        self.query_one(DeepbenchTables).show_result(live.result)
        phases = self.query_one(PhaseBar)
        phases.display = catalog.get(live.request.benchmark).kind == "train"
        phases.set_phases(live.phases_ms or (live.result.phases_ms if live.result else None),
                          empty_text=("phase split: " + NO_WINDOWS) if failed
                          else "phase split: none measured" if live.done
                          else "phase split: after the first timed steps")
        self._error_pane(live)
        self._telemetry(live, snap, ongoing)

    def _title(self, live: LiveRun) -> Text:
        where = printable(live.device_name or live.device or "")
        head = printable(live.planned.label) + (f"  on {where}" if where else "")
        if not live.done:
            stage = {"queued": "waiting…", "starting": "starting the worker…",
                     "loading": "building the model…",
                     "cancelling": "cancelling…"}.get(live.stage, "")
            p = live.progress
            if live.stage == "warmup" and live.warmup:
                stage = f"warm-up {live.warmup[0]}/{live.warmup[1]}"
            elif live.stage == "running" and p is not None:
                if p.of:
                    stage = f"step {p.step}/{p.of}"
                elif p.duration_s:
                    stage = f"{p.elapsed_s:.0f}/{p.duration_s:.0f} s"
                else:
                    stage = f"step {p.step}, {p.elapsed_s:.0f} s"
            return Text.assemble(("▶ ", "bold"), head, ("  — " + stage, "dim"))
        result = live.result
        assert result is not None
        saved = f" · saved {printable(result.id)}" if live.saved else " · not saved"
        styles = status_styles(self.screen)
        bold = Style(bold=True)
        if result.status == "ok":
            # The same headline as the big digits, the CLI and history.
            return Text.assemble(("✓ ", styles["ok"] + bold), head,
                                 (f"  — ok, {fmt_headline(result)}{saved}", "dim"))
        if result.status == "cancelled":
            return Text.assemble(("■ ", styles["cancelled"] + bold), head,
                                 (f"  — cancelled (partial result){saved}", "dim"))
        return Text.assemble(("✖ ", styles["failed"] + bold), head, (f"  — failed{saved}", "dim"))

    def _callout(self, live: LiveRun, episodes: list[ThrottleEpisode], now: datetime) -> None:
        callout = self.query_one("#callout", Static)
        attributions = live.attributions if live.done else attribute(
            live.points, episodes, run_end=now)
        result = live.result if live.done else None
        if attributions:
            callout.set_class(False, "-ok")
            callout.update(Text("\n".join(f"⚠ {a.text(printable(live.unit))}"
                                          for a in attributions)))
        elif result is not None and result.window is not None and result.throttled:
            # The runner's own readings of the timed window say so, whatever the
            # monitor's episode log caught.
            callout.set_class(False, "-ok")
            callout.update(f"⚠ throttled {(result.window.throttled_fraction or 0) * 100:.0f} %"
                           " of the timed window: the number reflects the cap, not the GPU")
        elif live.gpu_index is not None and live.points:
            callout.set_class(True, "-ok")
            callout.update("✓ no throttling on this GPU during the run")
        else:
            callout.update("")

    def _stats(self, live: LiveRun) -> Text:
        result = live.result
        bench = catalog.get(live.request.benchmark)
        lines: list[str] = []
        tp = result.throughput if result is not None else None
        if tp is not None and tp.value is not None:
            lines.append(f"windows: median {fmt_num(tp.median)}  p10 {fmt_num(tp.p10)}"
                         f"  p90 {fmt_num(tp.p90)}"
                         + (f" ({stats.percentile_note(tp.windows)})" if tp.few else ""))
        if result is not None:
            if result.latency_ms is not None:
                lines.append("latency  " + fmt_percentiles(result.latency_ms))
            if result.step_time_ms is not None:
                lines.append("step time  " + fmt_percentiles(result.step_time_ms))
            if result.latency_ms is None and result.step_time_ms is None:
                lines.append(f"step time  {NA} (" + (NO_WINDOWS if live.status == "failed"
                                                     else "no timed windows") + ")")
        elif bench.kind == "infer" and live.step_ms:
            xs = live.step_ms
            lines.append(f"per batch ≈ p50 {fmt_ms(stats.percentile(xs, 50))}  "
                         f"p90 {fmt_ms(stats.percentile(xs, 90))}  "
                         f"p99 {fmt_ms(stats.percentile(xs, 99))}  (from progress windows)")
        elif bench.kind == "infer":
            lines.append(f"latency  {NA} until the first timed window")
        if result is not None:
            from gputui.bench.lm_view import flops_rows, llm_rows

            lines += [f"{label}: {words}" for label, words in flops_rows(result)
                      + llm_rows(result)]
        else:
            lines += live_flops_lines(live)
        if result is not None:
            mem = fmt_bytes(result.peak_memory_bytes)
        else:
            gpu_max = live.gpu_mem_max
            mem = (f"GPU memory used ≤ {fmt_bytes(gpu_max)} so far (all processes)"
                   if gpu_max else "known at the end")
        energy = result.energy_j_per_sample if result is not None else None
        energy_text = NA if energy is None else f"{energy:.4g} J"
        power = result.avg_power_w if result is not None else None
        power_text = "" if power is None else f"  avg power {power:.0f} W"
        lines.append(f"peak memory {mem}  energy/sample {energy_text}{power_text}")
        if result is not None:
            from gputui.bench.clock_window import window_text
            from gputui.bench.references import for_result

            data = result.settings.get("data")
            if data in ("device", "host"):
                lines.append("input data: " + ("synthetic, made on the device"
                                               if data == "device" else
                                               "pinned host buffers, copied each step"))
            from gputui.bench.fmt import fmt_trials
            from gputui.bench.result_text import throttled_mark
            from gputui.bench.throttle_window import window_words

            trials = fmt_trials(result.throughput)
            if trials:
                lines.append(f"repeats: {trials}")
            ref = for_result(result)
            if ref is not None:
                lines.append(f"vs published: {ref.text}")
            window = window_words(result.window)
            if window:
                mark = throttled_mark(result)
                lines.append(f"GPU over timed window: {window}" + (f"  {mark}" if mark else ""))
            during = window_text(result.extra.gpu_window) if result.window is None else None
            if during:
                lines.append(f"GPU during run: {during}")
            from gputui.bench.ddp_topology import topology_words

            topo = topology_words(result.config.topology)
            if topo:
                lines.append(f"GPU topology: {topo}")
        points = live.sweep_points or (list(result.points) if result is not None else [])
        for p in points:
            lines.append(f"  {p.label_text}: " + (p.value_text if p.ok else f"✖ {p.value_text}"))
        return Text("\n".join(lines))

    def _error_pane(self, live: LiveRun) -> None:
        pane = self.query_one("#live-error", Static)
        err = live.error
        if err is None or live.status != "failed":
            pane.set_class(False, "-shown")
            return
        lines = [printable(f"✖ {err.kind or 'error'}: {err.message or ''}")]
        if err.suggestion:
            lines.append(printable(f"  suggestion: {err.suggestion}"))
        if err.exit_code is not None or err.signal:
            lines.append(f"  exit code {err.exit_code}"
                         + (f" ({printable(err.signal)})" if err.signal else ""))
        tail = stderr_lines(err.stderr_tail, err.message or "")
        if tail:
            lines.append(f"worker stderr (last {len(tail)} lines):")
            lines += [f"  | {line}" for line in tail]
        pane.update(Text("\n".join(lines)))
        pane.set_class(True, "-shown")

    def _telemetry(self, live: LiveRun, snap: Snapshot | None, ongoing: Any) -> None:
        tel = self.query_one("#telemetry", Static)
        if live.done:
            tel.update("")
            return
        if live.device is None:
            tel.update("waiting for the worker to pick its device…")
            return
        if live.gpu_index is None:
            cpu = snap.host.cpu_pct if snap is not None else None
            tel.update(f"CPU run — no GPU telemetry · host CPU "
                       f"{NA if cpu is None else f'{cpu:.0f} %'}")
            return
        gpu = next((g for g in snap.gpus if g.index == live.gpu_index), None) \
            if snap is not None else None
        if gpu is None:
            tel.update(f"GPU {live.gpu_index}: no telemetry from the monitor")
            return

        def val(v: Any, fmt: str) -> str:
            return NA if v is None else fmt.format(v)

        text = (f"GPU {gpu.index} · util {val(gpu.util_gpu_pct, '{} %')} · "
                f"SM {val(gpu.clock_sm_mhz, '{} MHz')} · {val(gpu.temp_c, '{} °C')} · "
                f"{val(gpu.power_w, '{:.0f} W')}")
        if ongoing is not None:
            text += f"  ⚠ {ongoing.words}"
        tel.update(Text(text))


