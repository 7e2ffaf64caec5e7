"""How a benchmark result reads in the terminal: the summary table, the profiler's top ops,
the one-line failure. Every string from a result goes through `gputui.safe_text` (a result
file is someone else's text: no control characters, no Rich markup)."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

from gputui.bench.fmt import (
    DASH,
    NA,
    fmt_bytes,
    fmt_num,
    fmt_percentiles,
    fmt_spread,
    fmt_throughput,
    fmt_trials,
    when,
)
from gputui.bench.kind_extras import BatchFinderExtra, DdpExtra
from gputui.bench.result import Result
from gputui.bench.result_text import throttled_mark
from gputui.safe_text import no_markup, printable

if TYPE_CHECKING:
    from rich.console import Console
    from rich.table import Table

STATUS_STYLE = {"ok": "green", "cancelled": "yellow", "failed": "red"}


def status_markup(status: str) -> str:
    return f"[{STATUS_STYLE.get(status, 'white')}]{no_markup(status)}[/]"


def failure_line(r: Result, show_tail: bool = False) -> str:
    """The one line `bench run` ends with when the benchmark failed."""
    error = r.error
    kind = error.kind if error else "error"
    message = " ".join(printable(error.message if error and error.message
                                 else "benchmark failed").split())
    if show_tail and error is not None and kind == "crash" and error.stderr_tail:
        for line in error.stderr_tail[-20:]:
            print(f"  | {printable(line)}", file=sys.stderr)
    if kind == "oom":
        batch = (error.batch_size if error else None) or r.batch_size
        if "out of memory" in message.lower():
            text = message
        else:
            text = f"out of memory at batch size {batch}: {message}" if batch else \
                f"out of memory: {message}"
        suggestion = (error.suggestion if error else None) or (
            f"try --batch-size {max(1, int(batch) // 2)}" if batch else None)
        return f"{text}; {printable(suggestion)}" if suggestion else text
    suffix = f" (result {printable(r.id)})" if r.id else ""
    return f"{printable(kind)}: {message}{suffix}"


def print_summary(console: Console, r: Result) -> None:
    """The summary table, then (after --profile) the top ops and the trace's path."""
    console.print(summary_table(r))
    from gputui.commands.deepbench_view import deepbench_tables

    for table in deepbench_tables(r):
        console.print(table)
    profile = profile_table(r)
    if profile is not None:
        console.print(profile)
    trace = r.extra.profile.trace_path if r.extra.profile is not None else None
    if trace:
        console.print(f"Chrome trace: {no_markup(trace)}", soft_wrap=True)
        console.print("[dim]  (open it in https://ui.perfetto.dev or chrome://tracing)[/]")


def profile_table(r: Result, top: int = 10) -> Table | None:
    """The `--profile` pass's top ops (by self time), or None when there was none."""
    from rich.table import Table

    prof = r.extra.profile
    if prof is None or not prof.top_ops:
        return None
    ops = prof.top_ops
    device = any(op.self_device_ms is not None for op in ops)
    table = Table(title=f"top ops by self {'device' if device else 'CPU'} time "
                  f"(profiler pass of {no_markup(prof.steps)} steps, after the timed run)")
    table.add_column("op")
    table.add_column("calls", justify="right")
    table.add_column("self CPU ms", justify="right")
    table.add_column("total CPU ms", justify="right")
    if device:
        table.add_column("self device ms", justify="right")
    for op in ops[:top]:
        cells = [no_markup(op.name), no_markup(op.count), fmt_num(op.self_cpu_ms),
                 fmt_num(op.cpu_total_ms)]
        if device:
            cells.append(fmt_num(op.self_device_ms))
        table.add_row(*cells)
    return table


def _measure_rows(r: Result, row: Any) -> None:
    """The published reference the run matches, and the GPU's clocks over the timed loop
    (the "measure" side's rows)."""
    from gputui.bench.clock_window import window_text
    from gputui.bench.references import for_result
    from gputui.bench.throttle_window import window_words

    data = r.settings.get("data")
    if data in ("device", "host"):
        row("input data", "synthetic, made on the device" if data == "device" else
            f"host: {no_markup(r.settings.get('h2d_copy') or 'pinned, copied per step')}")
    ref = for_result(r)
    if ref is not None:
        row("vs published", no_markup(ref.text))
    window = window_words(r.window)
    if window:
        style = "red" if r.throttled else ""
        row("GPU over timed window", f"[{style}]{no_markup(window)}[/]" if style
            else no_markup(window))
    # The worker's own sampling, for results saved before the runner sampled the window.
    during = window_text(r.extra.gpu_window) if r.window is None else None
    if during:
        row("GPU during run", no_markup(during))
    found = r.extra.of(BatchFinderExtra)
    if found is not None:
        row("recommended batch", f"{no_markup(found.recommended_batch or NA)}  "
            f"[dim]({no_markup(r.settings.get('headroom') or '')})[/]")


def summary_table(r: Result) -> Table:
    from rich.table import Table

    table = Table(title=f"{no_markup(r.benchmark)} — {no_markup(r.id)}", show_header=False)
    table.add_column("field", style="bold")
    table.add_column("value")

    def row(name: str, value: str) -> None:
        table.add_row(name, value)

    def text(value: Any) -> str:
        return no_markup(value) if value is not None else NA

    row("status", status_markup(r.status))
    if r.error is not None and r.error.message:
        row("error", f"{text(r.error.kind)}: {text(r.error.message)}")
    row("benchmark", " ".join(no_markup(x) for x in (r.benchmark, r.model) if x))
    row("device", f"{text(r.device_name)} ({text(r.device)})")
    # A benchmark without a batch (attention, matmul) has none: a dash, as in the history.
    batch = DASH if r.batch_size is None else no_markup(r.batch_size)
    row("precision / batch", f"{text(r.precision)} / {batch}")
    tp = r.throughput
    if tp is not None and tp.value is not None:
        mark = throttled_mark(r)
        row("throughput", f"[bold]{no_markup(fmt_throughput(tp))}[/]  "
            + (f"[red]{no_markup(mark)}[/]  " if mark else "")
            + f"[dim]({no_markup(tp.definition)})[/]")
        spread = fmt_spread(tp)
        if spread:
            row("", no_markup(spread))
        trials = fmt_trials(tp)
        if trials:
            row("repeats", no_markup(trials))
    else:
        row("throughput", NA)
    _measure_rows(r, row)
    from gputui.bench.lm_view import flops_rows, llm_rows

    for label, words in flops_rows(r) + llm_rows(r):
        row(label, no_markup(words))
    if r.latency_ms is not None:
        row("latency", no_markup(fmt_percentiles(r.latency_ms, ("p50", "p90", "p99", "mean"))))
    if r.step_time_ms is not None:
        row("step time", no_markup(fmt_percentiles(r.step_time_ms)))
    if r.phases_ms:
        row("phases (ms/step)", "  ".join(f"{no_markup(k)} {fmt_num(v)}"
                                          for k, v in r.phases_ms.items()))
    row("peak memory", fmt_bytes(r.peak_memory_bytes))
    energy = r.energy_j_per_sample
    row("energy / sample", NA if energy is None else f"{fmt_num(energy)} J")
    power = r.avg_power_w
    row("average power", NA if power is None else f"{fmt_num(power)} W")
    episodes = [e for e in r.throttle_episodes if isinstance(e, dict)]
    if episodes:
        words = "; ".join(
            f"{no_markup(e.get('reasons_text') or ','.join(map(str, e.get('reasons') or [])))} "
            f"({fmt_num(e.get('duration_s'))} s)" for e in episodes)
        row("throttling", f"[red]{len(episodes)} episode(s): {words}[/]")
    else:
        row("throttling", "none seen" if str(r.device or "").startswith("cuda") else NA)
    for p in r.points:
        value = no_markup(p.value_text)
        row(f"  {no_markup(p.label_text)}", value if p.ok else f"[red]{value}[/]")
    found = r.extra.of(BatchFinderExtra)
    if r.benchmark == "batch-finder":
        if found is not None:
            row("largest batch that fits", text(found.max_batch_fit or "none")
                + f"  (limit: {text(found.limit or NA)})")
            row("probes", f"{found.probes} ({found.probes_fit} fit, {found.probes_failed} "
                "failed)")
        else:
            row("largest batch that fits", "none  (limit: N/A)")
            row("probes", text(len(r.points)))
        row("timed steps / samples (all probes)", f"{text(r.steps)} / {text(r.samples)}")
    elif r.samples:
        row("timed steps / samples", f"{text(r.steps)} / {text(r.samples)}")
    else:
        row("timed steps", text(r.steps))
    note = r.extra.energy.note if r.extra.energy is not None else None
    if note:
        row("energy note", no_markup(note))
    dur = r.duration_s
    row("started", no_markup(when(r.started_at)) + (f"  ({fmt_num(dur)} s)" if dur is not None
                                                     else ""))
    software = "  ".join(f"{k} {no_markup(r.env[k])}" for k in ("torch", "cuda", "driver")
                         if r.env.get(k))
    if software:
        row("software", software)
    _distributed_rows(r, row)
    from gputui.bench.config import config_words

    for label, words in config_words(r.config):
        row(label, no_markup(words))
    return table


def _distributed_rows(r: Result, row: Any) -> None:
    """Per-rank throughput, the all-reduce's share of a step, and scaling (DDP runs)."""
    ddp, unit = r.extra.of(DdpExtra), no_markup(r.unit)
    if ddp is None:
        return
    if ddp.per_rank_samples_per_s:
        row("per rank", "  ".join(f"{i}: {fmt_num(v)}"
                                  for i, v in enumerate(ddp.per_rank_samples_per_s))
            + f" {unit}")
    ar = ddp.allreduce
    if ar is not None and ar.ms is not None:
        share = ar.share_of_step
        row("all-reduce", f"{fmt_num(ar.ms)} ms for {fmt_bytes(ar.bytes)}"
            + (f", {share * 100:.0f} % of a step" if share is not None else "")
            + f"  [dim]({no_markup(ar.definition)})[/]")
    sc = ddp.scaling
    if sc is not None:
        row("scaling", f"{sc.efficiency * 100:.0f} % efficient on {sc.world_size} ranks vs "
            f"{no_markup(sc.baseline_id)} ({fmt_num(sc.baseline_value)} {unit} on "
            f"{sc.baseline_world} process)")
