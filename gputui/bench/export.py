"""Results as CSV (fixed columns, new ones only ever appended) or a Markdown table.

A deepbench result exports its per-shape rows too: in the CSV one row per shape after the
result's own (its `shape` column set, the result's id, benchmark, device and precision
repeated), in Markdown a table per result after the results' table."""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable
from typing import Any

from gputui.bench.deepbench.figures import figure
from gputui.bench.fmt import fmt_bytes, fmt_num
from gputui.bench.kind_extras import DeepbenchExtra
from gputui.bench.result import Result
from gputui.bench.result_text import fmt_headline
from gputui.safe_text import printable

# Stable: scripts index these by name; append new columns at the end only.
CSV_COLUMNS: tuple[str, ...] = (
    "id", "started_at", "finished_at", "status", "benchmark", "model", "device", "device_name",
    "precision", "batch_size", "steps", "samples", "duration_s",
    "throughput_median", "throughput_mean", "throughput_p10", "throughput_p90", "throughput_unit",
    "latency_p50_ms", "latency_p90_ms", "latency_p99_ms", "latency_mean_ms",
    "step_time_p50_ms", "step_time_p90_ms", "step_time_p99_ms",
    "peak_memory_bytes", "energy_j_per_sample", "avg_power_w", "throttle_episodes",
    "error_kind", "error_message", "torch", "cuda", "driver",
    "throughput_value", "throughput_definition", "throughput_windows",
    "throttled", "throttled_fraction", "trials", "spread_median", "spread_min", "spread_max",
    "flops_per_sample", "flops_method", "flops_counted_per_sample", "achieved_tflops",
    "peak_tflops", "mfu", "prompt_tokens", "new_tokens",
    "ttft_p50_ms", "ttft_p90_ms", "ttft_p99_ms", "ttft_mean_ms",
    "tpot_p50_ms", "tpot_p90_ms", "tpot_p99_ms", "tpot_mean_ms",
    "itl_p50_ms", "itl_p90_ms", "itl_p99_ms", "itl_mean_ms",
    "prefill_tokens_per_s", "decode_tokens_per_s", "kv_cache_bytes", "weight_bytes",
    "decode_bytes_per_s", "peak_bytes_per_s", "mbu",
    "op", "shape", "shape_ran", "median_us", "shape_tflops", "shape_pct_of_peak",
    "busbw_gbps", "shape_note",
)
SHAPE_IDENTITY = ("id", "started_at", "status", "benchmark", "device", "device_name",
                  "precision")


def flat_row(r: Result) -> dict[str, Any]:
    """One flat object per result: `history --json` and the CSV export."""
    tp, lat, st = r.throughput, r.latency_ms, r.step_time_ms
    return {
        "id": r.id, "started_at": r.started_at, "finished_at": r.finished_at,
        "status": r.status, "benchmark": r.benchmark, "model": r.model, "device": r.device,
        "device_name": r.device_name, "precision": r.precision, "batch_size": r.batch_size,
        "steps": r.steps, "samples": r.samples, "duration_s": r.duration_s,
        "throughput_median": tp.median if tp else None,
        "throughput_mean": tp.value if tp else None,
        "throughput_p10": tp.p10 if tp else None,
        "throughput_p90": tp.p90 if tp else None,
        "throughput_unit": tp.unit if tp else None,
        "latency_p50_ms": lat.p50 if lat else None,
        "latency_p90_ms": lat.p90 if lat else None,
        "latency_p99_ms": lat.p99 if lat else None,
        "latency_mean_ms": lat.mean if lat else None,
        "step_time_p50_ms": st.p50 if st else None,
        "step_time_p90_ms": st.p90 if st else None,
        "step_time_p99_ms": st.p99 if st else None,
        "peak_memory_bytes": r.peak_memory_bytes,
        "energy_j_per_sample": r.energy_j_per_sample, "avg_power_w": r.avg_power_w,
        "throttle_episodes": len(r.throttle_episodes),
        "error_kind": r.error.kind if r.error else None,
        "error_message": r.error.message if r.error else None,
        "torch": r.env.get("torch"), "cuda": r.env.get("cuda"), "driver": r.env.get("driver"),
        "throughput_value": tp.value if tp else None,
        "throughput_definition": tp.definition if tp else None,
        "throughput_windows": tp.windows if tp else None,
        # > 5 % of the timed window throttled (bench.throttle_window); null: no window sampled.
        "throttled": r.throttled if r.window is not None else None,
        "throttled_fraction": r.window.throttled_fraction if r.window else None,
        "trials": len(r.trials) if r.trials else None,
        "spread_median": r.spread.median if r.spread else None,
        "spread_min": r.spread.min if r.spread else None,
        "spread_max": r.spread.max if r.spread else None,
        **_flops_and_llm(r),
    }


def _flops_and_llm(r: Result) -> dict[str, Any]:
    f, m = r.flops, r.llm
    out: dict[str, Any] = {
        "flops_per_sample": f.per_sample if f else None,
        "flops_method": f.method if f else None,
        "flops_counted_per_sample": f.counted_per_sample if f else None,
        "achieved_tflops": f.achieved_tflops if f else None,
        "peak_tflops": f.peak_tflops if f else None, "mfu": f.mfu if f else None,
        "prompt_tokens": m.prompt_tokens if m else None,
        "new_tokens": m.new_tokens if m else None}
    for name in ("ttft", "tpot", "itl"):
        s = getattr(m, f"{name}_ms") if m else None
        for q in ("p50", "p90", "p99", "mean"):
            out[f"{name}_{q}_ms"] = getattr(s, q) if s else None
    for key in ("prefill_tokens_per_s", "decode_tokens_per_s", "kv_cache_bytes",
                "weight_bytes", "decode_bytes_per_s", "peak_bytes_per_s", "mbu"):
        out[key] = getattr(m, key) if m else None
    return out


def export_csv(docs: Iterable[Result]) -> str:
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=list(CSV_COLUMNS), lineterminator="\n")
    writer.writeheader()
    for doc in docs:
        row = flat_row(doc)
        writer.writerow({k: "" if row.get(k) is None else row[k] for k in CSV_COLUMNS})
        for shape in shape_rows(doc):
            writer.writerow({k: "" if shape.get(k) is None else shape[k]
                             for k in CSV_COLUMNS})
    return buf.getvalue()


def shape_rows(r: Result) -> list[dict[str, object]]:
    """A deepbench result's shapes as CSV rows ([] for any other result)."""
    ex = r.extra.of(DeepbenchExtra)
    if ex is None:
        return []
    ident = {k: getattr(r, k) for k in SHAPE_IDENTITY}
    return [{**ident, "op": s.op, "shape": s.shape, "shape_ran": s.ran,
             "median_us": s.median_us, "shape_tflops": s.tflops,
             "shape_pct_of_peak": s.pct_of_peak, "busbw_gbps": s.busbw_gbps,
             "shape_note": s.note} for s in ex.rows]


MARKDOWN_COLUMNS: tuple[tuple[str, str], ...] = (
    ("id", "id"), ("benchmark", "benchmark"), ("model", "model"), ("device_name", "device"),
    ("precision", "precision"), ("batch_size", "batch"), ("status", "status"),
    ("throughput", "throughput"), ("mfu", "MFU"), ("latency_p90_ms", "p90 latency (ms)"),
    ("energy_j_per_sample", "J/sample"), ("peak_memory_bytes", "peak memory"),
    ("started_at", "started (UTC)"),
)


def export_markdown(docs: Iterable[Result]) -> str:
    docs = list(docs)
    lines = [
        "| " + " | ".join(title for _, title in MARKDOWN_COLUMNS) + " |",
        "|" + "|".join("---" for _ in MARKDOWN_COLUMNS) + "|",
    ]
    for doc in docs:
        row = flat_row(doc)
        cells = []
        for key, _ in MARKDOWN_COLUMNS:
            if key == "throughput":
                cells.append(fmt_headline(doc))
            elif key == "device_name":
                cells.append(str(row["device_name"] or row["device"] or ""))
            elif key == "peak_memory_bytes":
                cells.append(fmt_bytes(row[key]))
            elif key == "mfu":
                cells.append("" if row[key] is None else f"{row[key] * 100:.1f} %")
            elif key in ("latency_p90_ms", "energy_j_per_sample"):
                cells.append(fmt_num(row[key]))
            else:
                cells.append("" if row[key] is None else str(row[key]))
        lines.append(_md_row(cells))
    for doc in docs:
        ex = doc.extra.of(DeepbenchExtra)
        if ex is None:
            continue
        lines += ["", f"DeepBench shapes of {printable(doc.id)}:", "",
                  "| op | shape | ran | median µs | figure |", "|---|---|---|---|---|"]
        for s in ex.rows:
            value, unit = figure(s)
            lines.append(_md_row([s.op, s.shape, s.ran, fmt_num(s.median_us),
                                  f"{fmt_num(value)} {unit}" if value is not None
                                  else s.note or ""]))
    return "\n".join(lines) + "\n"


def _md_row(cells: list[str]) -> str:
    return "| " + " | ".join(printable(c).replace("|", "\\|") for c in cells) + " |"
