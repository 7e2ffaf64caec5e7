"""lm-infer: LLM generation with a static KV cache, greedy decoding (gpt-fast's loop).

A request is B prompts of P random tokens prefilled at once, then N new tokens per
sequence: the first from the prefill's logits, each other from one decode step over one
token per sequence, attending over the static cache (gputui.bench.worker.lm_models). Greedy: the
next token is the argmax, which stays on the device, so the loop never waits on the host.

Times: each token boundary is a CUDA event in the stream (a host clock on the CPU); the
request ends with one synchronisation (a request is done when its last token is ready).
From the gaps come TTFT, TPOT and ITL (bench.llm_metrics). The headline is generated tokens
of whole requests (prefill included) ÷ seconds of the timed loop: gpt-fast's tokens/s.

--compile compiles the decode step with mode="reduce-overhead" (CUDA graphs on CUDA), as
gpt-fast does; otherwise decoding runs eager, one kernel launch per op, which for a small
model or batch is bound by launches, not by memory bandwidth: `llm.decode` says which ran.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from gputui.bench import events, flops, llm_metrics
from gputui.bench.kind_extras import LmInferExtra
from gputui.bench.lm_shapes import LMShape, shape_of
from gputui.bench.worker import nvtx
from gputui.bench.worker.context import Ctx
from gputui.bench.worker.failures import is_oom
from gputui.bench.worker.kinds import register
from gputui.bench.worker.kinds.flop_count import attach
from gputui.bench.worker.measure import (
    energy_meter,
    forget_compiled,
    free_memory,
    loop_throughput,
    peak_memory,
    peak_row,
    record_energy,
    reset_peak,
)

SWEEP_MAX = {"cuda": 256, "cpu": 4}


def model_dtype(precision: str) -> Any:
    """Weights are held in the run's precision (gpt-fast runs bf16 weights, no autocast);
    tf32 is fp32 weights with TF32 matmuls."""
    import torch

    return {"bf16": torch.bfloat16, "fp16": torch.float16}.get(precision, torch.float32)


def decode_step(model: Any, tok: Any, pos: Any) -> Any:
    """One greedy decode step: the model over one token per sequence at `pos`, the argmax
    of the last position's logits (the next token, left on the device)."""
    return model(tok, pos, last_only=True).argmax(-1)


class Generator:
    """One model, its static cache for `batch` sequences, and the prefill/decode steps."""

    def __init__(self, model: Any, shape: LMShape, batch: int, prompt: int, new: int,
                 ctx: Ctx) -> None:
        import torch

        from gputui.bench.worker.lm_models import setup_cache

        self.model, self.device = model, ctx.device
        self.batch, self.prompt, self.new = batch, prompt, new
        self.kv_cache_bytes = setup_cache(model, batch, prompt + new)
        gen = torch.Generator(device=ctx.device).manual_seed(ctx.request.seed)
        self.prompts = torch.randint(0, shape.vocab, (batch, prompt), device=ctx.device,
                                     generator=gen)
        self.prefill_pos = torch.arange(prompt, device=ctx.device)
        # Decode positions live on the device and advance in place: no host→device copy
        # per token, and a CUDA graph sees the same tensor every step.
        self.pos = torch.zeros(1, dtype=torch.long, device=ctx.device)
        self.compiled = ctx.request.compile
        decode: Callable[[Any, Any], Any] = self._decode
        if self.compiled:
            mode = "reduce-overhead" if ctx.device.type == "cuda" else None
            decode = torch.compile(self._decode, mode=mode, fullgraph=True)
        self.decode = decode
        self.decode_text = ("eager" if not self.compiled else
                            "torch.compile mode=reduce-overhead (CUDA graphs)"
                            if ctx.device.type == "cuda" else "torch.compile (no CUDA graphs "
                            "on the CPU)")

    def _decode(self, tok: Any, pos: Any) -> Any:
        return decode_step(self.model, tok, pos)

    def request(self, mark: Callable[[], None]) -> Any:
        """Generate `new` tokens per sequence; `mark()` at the start and after each token."""
        import torch

        with torch.no_grad():  # gpt-fast's; the cache is mutated in place
            mark()
            tok = self.model(self.prompts, self.prefill_pos, last_only=True).argmax(-1)
            mark()
            self.pos.fill_(self.prompt)
            for _ in range(self.new - 1):
                tok = self.decode(tok, self.pos)
                if self.compiled:
                    tok = tok.clone()  # a graph's output is overwritten by its next replay
                self.pos += 1
                mark()
        return tok


def run_requests(ctx: Ctx, g: Generator, warmup: int, steps: int | None,
                 duration_s: float | None, timed_start: Callable[[], None] = lambda: None,
                 ) -> tuple[Any, list[list[float]]]:
    """Warm-up requests, then the timed ones (`timed_start()` between them), --repeat
    times; (loop stats, token gaps per request of every trial)."""
    from gputui.bench.worker.timing import StepClock, latency_loop, repeat_trials, sync

    with nvtx.span("warmup"):
        for i in range(warmup):
            ctx.checkpoint()
            with nvtx.span(f"warmup request {i}"):
                g.request(lambda: None)
            ctx.emit(events.Warmup(i + 1, warmup))
        sync(ctx.device)
    reset_peak(ctx.device)
    timed_start()
    gaps: list[list[float]] = []

    def one(_: int) -> None:
        clock = StepClock(ctx.device)
        g.request(clock.mark)
        gaps.append(clock.collect())  # one sync, at the request's end

    loop = repeat_trials(lambda: latency_loop(
        one, device=ctx.device, steps=steps, duration_s=duration_s, emit=ctx.emit,
        make_progress=events.Progress, unit=ctx.bench.unit,
        samples_per_request=g.batch * g.new, should_stop=ctx.should_stop),
        int(ctx.request.repeat or 1))
    return loop, gaps


def summarize(ctx: Ctx, g: Generator, gaps: list[list[float]],
              peak_bps: float | None) -> llm_metrics.LlmStats:
    from gputui.bench.worker.lm_models import weight_bytes

    # A decode step reads every weight and the whole static cache (its masked positions
    # included: attention runs over the cache's full length).
    return llm_metrics.summarize(
        gaps, batch_size=g.batch, prompt_tokens=g.prompt, new_tokens=g.new,
        weight_bytes=weight_bytes(g.model), kv_read_bytes=g.kv_cache_bytes,
        kv_cache_bytes=g.kv_cache_bytes, peak_bytes_per_s=peak_bps, decode=g.decode_text)


def drop_cache(model: Any) -> None:
    """Detach the KV cache from the model's attention layers, so its memory can go."""
    for layer in model.attention_layers():
        layer.cache = None


def peak_bytes_per_s(ctx: Ctx) -> float | None:
    """The device's peak memory bandwidth in bytes/s from the peak table; None on a CPU
    or a GPU without a row (an estimated row has no bandwidth: the bus is unknown)."""
    row, _ = peak_row(ctx)
    return row.mem_bw_gbps * 1e9 if row is not None and row.mem_bw_gbps else None


@register("lm-infer")
def run_lm_infer(ctx: Ctx) -> None:
    from gputui.bench.worker.lm_models import build

    req, res, dev, p = ctx.request, ctx.result, ctx.device, ctx.params
    prompt, new = int(p["prompt_len"]), int(p["new_tokens"])
    base = shape_of(str(req.model))
    shape = base.with_seq_len(max(base.seq_len, prompt + new))
    dtype = model_dtype(req.precision)
    ctx.checkpoint()
    model = build(shape, dev, dtype, seed=req.seed).eval()
    peak_bps = peak_bytes_per_s(ctx)
    res.settings["params"] = {**res.settings.get("params", {}), **shape.to_dict()}
    res.settings.pop("mode", None)
    res.settings.update({
        "weights": str(dtype).removeprefix("torch."), "sampling": "greedy (argmax)",
        "kv_cache": "static, pre-allocated for prompt + new tokens; attention over its "
                    "full length with a causal mask",
        "prompt": "random tokens, made on the device before timing",
        "token_timing": ("CUDA events at every token boundary, one sync per request"
                   if dev.type == "cuda" else "host clock at every token boundary"),
        "sync": "at the end of each request (a request is done when its last token is)",
        "headline": "generated tokens of whole requests (prefill included) / seconds"})
    batches = [int(req.batch_size or 1)]
    if req.batch_sizes is not None:
        batches = list(req.batch_sizes)
    elif req.sweep:
        batches = [1]
        while batches[-1] * 2 <= SWEEP_MAX[dev.type]:
            batches.append(batches[-1] * 2)
    # A compiled decode step compiles (and captures its CUDA graph) on its first call.
    warmup = max(req.warmup or 0, 1 if req.compile else 0)
    res.settings["warmup"] = warmup
    best: tuple[float, Any, Any] | None = None
    meter = energy_meter(ctx)
    generated, stopped = 0, False
    for b in batches:
        if b != batches[0] and ctx.cancel.is_set():
            stopped = True
            break
        ctx.checkpoint()
        ctx.current_batch = b
        drop_cache(model)  # the previous point's cache goes before this one is made
        forget_compiled(req.compile and b != batches[0])
        try:
            g = Generator(model, shape, b, prompt, new, ctx)
            loop, gaps = run_requests(ctx, g, warmup, req.steps, req.duration_s,
                                      meter.start if b == batches[0] else lambda: None)
        except Exception as exc:
            if not req.sweep or b == batches[0] or not is_oom(exc):
                raise
            res.extra = replace(res.extra, kind=LmInferExtra(
                sweep_stopped=f"batch {b}: out of memory"))
            g = None
            drop_cache(model)
            free_memory(dev)
            break
        generated += loop.samples
        llm = summarize(ctx, g, gaps, peak_bps)
        tp = loop_throughput(loop, ctx.bench.unit)
        if req.sweep:
            ctx.add_point(events.Point(
                label=f"batch {b}", batch_size=b, throughput=tp.value, unit=ctx.bench.unit,
                extra={"tpot_ms_p50": llm.tpot_ms.p50 if llm.tpot_ms else None,
                       "tpot_ms_p90": llm.tpot_ms.p90 if llm.tpot_ms else None,
                       "ttft_ms_p50": llm.ttft_ms.p50 if llm.ttft_ms else None,
                       "decode_tokens_per_s": llm.decode_tokens_per_s, "mbu": llm.mbu,
                       "requests": llm.requests,
                       "peak_memory_bytes": peak_memory(dev)}))
        if best is None or (tp.value or 0) > (best[0] or 0):
            best = (tp.value or 0.0, (loop, tp, llm, b), peak_memory(dev))
        del g
        if loop.stopped_early:
            stopped = True
            break
    # Energy per generated token from the first timed request on (a sweep's later points'
    # set-up and warm-up included: the meter runs across them).
    record_energy(res, meter.stop(generated))
    assert best is not None
    _, (loop, tp, llm, b), peak_mem = best
    res.batch_size = b
    res.settings["batch_size"] = b
    res.throughput = tp
    # A generated token is this benchmark's sample: J per output token, as vLLM reports it.
    res.llm = replace(llm, energy_per_output_token_j=res.energy_j_per_sample)
    res.steps, res.samples = loop.steps, loop.samples
    res.peak_memory_bytes = peak_mem
    if req.sweep:
        res.extra = replace(res.extra, headline_point=f"batch {b}")
    if peak_bps is None and dev.type == "cuda":
        kind = res.extra.of(LmInferExtra) or LmInferExtra()
        res.extra = replace(res.extra, kind=replace(
            kind, peak_bandwidth="none: the peak table has no row for this GPU"))
    if stopped:
        res.status = "cancelled"
    # Forward passes only, the prompt's included: the headline's time holds the prefill.
    attach(ctx, flops.lm_generate_per_token(shape, prompt, new), "analytic",
           formula=flops.LM_GENERATE_FORMULA)
