"""lm-train: GPT-2 training as nanoGPT runs it, in tokens/s and MFU.

The model is nanoGPT's (gputui.bench.worker.lm_models.GPT) with random weights; each step is
forward, cross-entropy over every position, backward, AdamW (fused on CUDA; nanoGPT's
weight-decay groups, lr 6e-4, betas 0.9/0.95) and zero_grad — nanoGPT's micro-step without
gradient accumulation or clipping. Tokens are random, made on the device before timing.
bf16 autocast is the CUDA default (the weights and optimizer state stay fp32).

Headline: tokens ÷ seconds of the timed loop (batch × sequence tokens per step), as every
other kind. FLOPs: 6N + 12·L·d·T per token (bench.flops), and torch's count beside it.
"""

from __future__ import annotations

from typing import Any

from gputui.bench import flops
from gputui.bench.lm_shapes import LMShape, shape_of
from gputui.bench.worker.context import Ctx
from gputui.bench.worker.kinds import register
from gputui.bench.worker.kinds.flop_count import attach_counted
from gputui.bench.worker.measure import (
    do_warmup,
    energy_meter,
    fill_loop,
    measure,
    peak_memory,
    record_energy,
    reset_peak,
)

LR, BETAS, WEIGHT_DECAY = 6e-4, (0.9, 0.95), 0.1


def make_adamw(model: Any, device_type: str) -> tuple[Any, str]:
    """nanoGPT's configure_optimizers: decay for matrices and embeddings, none for biases
    and LayerNorm weights; fused on CUDA."""
    import torch

    params = [p for p in model.parameters() if p.requires_grad]
    groups = [{"params": [p for p in params if p.dim() >= 2], "weight_decay": WEIGHT_DECAY},
              {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}]
    fused = device_type == "cuda"
    opt = torch.optim.AdamW(groups, lr=LR, betas=BETAS, fused=fused)
    return opt, (f"AdamW(lr={LR}, betas={BETAS}, weight_decay={WEIGHT_DECAY} on ≥2-D params, "
                 f"{'fused' if fused else 'foreach'})")


class LMTrainStep:
    """One training step on device-resident token batches; no host sync."""

    def __init__(self, shape: LMShape, batch: int, ctx: Ctx) -> None:
        import torch

        from gputui.bench.worker.lm_models import build
        from gputui.bench.worker.workloads import token_batches

        dev, req = ctx.device, ctx.request
        self.device, self.precision = dev, req.precision
        self.model = build(shape, dev, torch.float32, seed=req.seed)
        self.model.train()
        self.forward: Any = torch.compile(self.model) if req.compile else self.model
        self.opt, self.opt_text = make_adamw(self.model, dev.type)
        gen = torch.Generator(device=dev).manual_seed(req.seed)
        self.batches = token_batches(batch, shape.seq_len, shape.vocab, dev, gen, n=2)
        self.scaler = (torch.amp.GradScaler("cuda")
                       if self.precision == "fp16" and dev.type == "cuda" else None)

    def loss(self, i: int, module: Any = None) -> Any:
        import torch.nn.functional as F

        from gputui.bench.worker.workloads import autocast

        x, y = self.batches[i % len(self.batches)]
        with autocast(self.device, self.precision):
            logits = (module or self.forward)(x)
            return F.cross_entropy(logits.view(-1, logits.size(-1)), y.view(-1))

    def __call__(self, i: int) -> None:
        loss = self.loss(i)
        if self.scaler is not None:
            self.scaler.scale(loss).backward()
            self.scaler.step(self.opt)
            self.scaler.update()
        else:
            loss.backward()
            self.opt.step()
        self.opt.zero_grad(set_to_none=True)

    def count_pass(self) -> None:
        """Forward + backward through the eager model, for the FLOP counter."""
        self.loss(0, self.model).backward()
        self.opt.zero_grad(set_to_none=True)


@register("lm-train")
def run_lm_train(ctx: Ctx) -> None:
    req, res, dev = ctx.request, ctx.result, ctx.device
    shape = shape_of(str(req.model), req.seq_len)
    batch = int(req.batch_size or 1)
    ctx.current_batch = batch
    ctx.checkpoint()
    step = LMTrainStep(shape, batch, ctx)
    tokens = batch * shape.seq_len
    res.settings["seq_len"] = shape.seq_len
    res.settings["params"] = {**res.settings.get("params", {}), **shape.to_dict()}
    res.settings["shapes"] = {"tokens": [batch, shape.seq_len], "vocab": shape.vocab}
    res.settings.update({
        "optimizer": step.opt_text, "data": "device",
        "loss": "cross-entropy over every position (nanoGPT)",
        "weights": "fp32 (autocast computes in the run's precision)",
        "attention": "torch.nn.functional.scaled_dot_product_attention, is_causal=True"})
    do_warmup(ctx, step, req.warmup or 0)
    reset_peak(dev)
    meter = energy_meter(ctx)
    meter.start()
    loop = measure(ctx, step, tokens, ctx.bench.unit)
    record_energy(res, meter.stop(loop.samples))
    res.peak_memory_bytes = peak_memory(dev)
    fill_loop(res, loop, ctx.bench.unit)
    if not loop.stopped_early:
        attach_counted(ctx, step.count_pass, tokens, analytic=flops.lm_train_per_token(shape),
                       formula=flops.GPT_TRAIN_FORMULA)
