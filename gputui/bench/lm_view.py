"""The FLOPs/MFU and LLM serving rows of a result, as (label, text) pairs: the CLI summary
(`bench run`, `bench show`) and the TUI's result view print the same words. Torch-free."""

from __future__ import annotations

from gputui.bench.fmt import NA, fmt_bytes, fmt_num, fmt_percentiles
from gputui.bench.result import Result

PERCENTILES = ("p50", "p90", "p99", "mean")


def sample_word(r: Result) -> str:
    """"token" for tokens/s, "image" for images/s."""
    unit = r.unit.removesuffix("/s")
    return unit.removesuffix("s") if unit else "sample"


def pct(fraction: float | None) -> str:
    return NA if fraction is None else f"{fraction * 100:.1f} %"


def mfu_text(r: Result) -> str:
    """"12.3 TFLOP/s, MFU 41.0 %" (the TUI's live line and the history column use it)."""
    f = r.flops
    if f is None or f.achieved_tflops is None:
        return NA
    return f"{fmt_num(f.achieved_tflops)} TFLOP/s, MFU {pct(f.mfu)}"


def flops_rows(r: Result) -> list[tuple[str, str]]:
    f = r.flops
    if f is None:
        return []
    word = sample_word(r)
    per = f"{fmt_num(f.per_sample)} FLOP/{word} ({f.method}"
    if f.formula and f.method == "analytic":
        per += f": {f.formula}"
    per += ")"
    if f.method == "analytic" and f.counted_per_sample is not None:
        per += f"; torch counts {fmt_num(f.counted_per_sample)}"
    if f.peak_tflops is not None:
        peak = f"of the {fmt_num(f.peak_tflops)} TFLOP/s dense {f.peak_dtype or ''} peak"
    else:
        peak = "(no peak known for this device)"
    return [("model FLOPs", per), ("MFU", f"{mfu_text(r)} {peak}")]


def llm_rows(r: Result) -> list[tuple[str, str]]:
    m = r.llm
    if m is None:
        return []
    rows = [
        ("requests", f"{m.requests} × batch {m.batch_size}: {m.prompt_tokens} prompt + "
                     f"{m.new_tokens} new tokens each"),
        ("TTFT", fmt_percentiles(m.ttft_ms, PERCENTILES)),
        ("TPOT", fmt_percentiles(m.tpot_ms, PERCENTILES)),
        ("ITL", fmt_percentiles(m.itl_ms, PERCENTILES)),
        ("prefill / decode", f"{fmt_num(m.prefill_tokens_per_s)} / "
                             f"{fmt_num(m.decode_tokens_per_s)} tokens/s"),
    ]
    bw = NA if m.decode_bytes_per_s is None else f"{fmt_num(m.decode_bytes_per_s / 1e9)} GB/s"
    mbu = (f"MBU {pct(m.mbu)}" if m.peak_bytes_per_s is not None
           else "MBU N/A (no peak bandwidth known for this device)")
    rows.append(("decode bandwidth", f"{bw}, {mbu}  (weights {fmt_bytes(m.weight_bytes)} + "
                                     f"KV cache {fmt_bytes(m.kv_cache_bytes)} per step)"))
    if m.energy_per_output_token_j is not None:
        rows.append(("energy", f"{fmt_num(m.energy_per_output_token_j)} J per output token"))
    if m.decode:
        note = ""
        if m.decode == "eager" and str(r.device or "").startswith("cuda"):
            note = " — one launch per op: small batches are launch-bound, not bandwidth-bound"
        rows.append(("decoding", m.decode + note))
    return rows
