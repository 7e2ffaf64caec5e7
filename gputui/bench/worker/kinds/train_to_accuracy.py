"""train-to-accuracy: a small CNN on a learnable synthetic task (labels from a fixed random
teacher) until a target validation accuracy: time and steps to target.

Time to target is training time only. Before it, the warm-up steps and one evaluation run
on a throwaway copy of the model and optimizer, so cuDNN autotuning, handle creation and
optimizer-state setup (most of a second on a GPU, where the whole run may take a few)
land in the separately reported setup time, and the measured model starts untouched.
"""

from __future__ import annotations

import copy
import time
from dataclasses import replace

from gputui.bench import events, stats
from gputui.bench.kind_extras import AccuracyExtra
from gputui.bench.worker import nvtx
from gputui.bench.worker.context import Ctx
from gputui.bench.worker.kinds import register
from gputui.bench.worker.measure import peak_memory


@register("train-to-accuracy")
def run_train_to_accuracy(ctx: Ctx) -> None:
    import torch
    from torch import nn

    from gputui.bench.worker.timing import sync
    from gputui.bench.worker.workloads import SmallCNN, Teacher, autocast, synthetic_images

    req, res, dev, p = ctx.request, ctx.result, ctx.device, ctx.params
    b, size, classes = req.batch_size, req.image_size, int(p["classes"])
    ctx.current_batch = b
    target = float(p["target_accuracy"])
    # Bounds: --steps N stops after exactly N steps, --duration S after the step that
    # crosses S seconds of training time (evaluation excluded); the target ends it earlier.
    eval_every = int(p["eval_every"])
    max_steps: int | None = req.steps
    duration_s: float | None = req.duration_s
    channels_last = bool(req.channels_last)
    torch.manual_seed(req.seed)
    gen = torch.Generator(device=dev).manual_seed(req.seed + 1)
    calib = torch.randn(4096, 3, size, size, device=dev, generator=gen)
    teacher = Teacher(classes, calib).to(dev).eval()
    del calib
    student = SmallCNN(classes).to(dev)
    if req.channels_last:
        student = student.to(memory_format=torch.channels_last)
    x_val = synthetic_images(int(p["val_samples"]), size, dev, gen, channels_last)
    y_val = teacher(x_val).argmax(1)
    def make_opt(model: nn.Module) -> torch.optim.Optimizer:
        # Fused: GradScaler's inf check stays on the device (no .item() per step).
        try:
            return torch.optim.AdamW(model.parameters(), lr=3e-3, fused=True)
        except (RuntimeError, TypeError, ValueError):
            return torch.optim.AdamW(model.parameters(), lr=3e-3)

    def make_scaler() -> torch.amp.GradScaler | None:
        return (torch.amp.GradScaler("cuda")
                if req.precision == "fp16" and dev.type == "cuda" else None)

    loss_fn = nn.CrossEntropyLoss()

    def train_step(model: nn.Module, opt: torch.optim.Optimizer,
                   scaler: torch.amp.GradScaler | None, x: torch.Tensor) -> None:
        y = teacher(x).argmax(1)
        with autocast(dev, req.precision):
            loss = loss_fn(model(x).float(), y)
        if scaler is not None:
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
        else:
            loss.backward()
            opt.step()
        opt.zero_grad(set_to_none=True)

    def accuracy_of(model: nn.Module) -> float:
        model.eval()
        with torch.inference_mode(), autocast(dev, req.precision):
            pred = model(x_val).argmax(1)
        model.train()
        return float((pred == y_val).float().mean().item())

    # Warm-up on a copy, with its own images: the measured run's model, optimizer state
    # and data sequence are the same whatever the warm-up count.
    n_warm = int(req.warmup or 0)
    t_setup = time.perf_counter()
    if n_warm:
        spare = copy.deepcopy(student)
        spare_opt, spare_scaler = make_opt(spare), make_scaler()
        warm_gen = torch.Generator(device=dev).manual_seed(req.seed + 2)
        with nvtx.span("warmup"):
            for i in range(n_warm):
                ctx.checkpoint()
                with nvtx.span(f"warmup step {i}"):
                    train_step(spare, spare_opt, spare_scaler,
                               synthetic_images(b, size, dev, warm_gen, channels_last))
                ctx.emit(events.Warmup(i + 1, n_warm))
            accuracy_of(spare)
        del spare, spare_opt, spare_scaler
    sync(dev)
    setup_s = time.perf_counter() - t_setup
    opt = make_opt(student)
    scaler = make_scaler()
    res.settings.update({
        "shapes": {"input": [b, 3, size, size], "classes": classes},
        "task": "labels = argmax of a fixed random linear teacher on 2×2-pooled Gaussian "
                "images (balanced classes); fresh training images every step; fixed "
                "validation set",
        "optimizer": f"AdamW lr=3e-3{', fused' if opt.defaults.get('fused') else ''}",
        "warmup": f"{n_warm} steps and one evaluation on a throwaway copy of the model",
        "target_accuracy": target, "eval_every": eval_every,
        "max_steps": max_steps, "max_duration_s": duration_s,
        "val_samples": int(p["val_samples"]),
        "input_memory_format": "channels_last" if channels_last else "contiguous",
    })

    def accuracy() -> float:
        return accuracy_of(student)

    curve: list[tuple[int, float]] = []
    chunk_rates: list[float] = []
    train_s = eval_s = 0.0
    reached_at: int | None = None
    sync(dev)
    t_start = time.perf_counter()
    t_last_progress = t_start
    step = 0
    acc = 0.0
    bound = None

    def out_of_budget(in_chunk_s: float) -> str | None:
        if max_steps is not None and step >= max_steps:
            return "steps"
        if duration_s is not None and train_s + in_chunk_s >= duration_s:
            return "duration"
        return None

    while not ctx.cancel.is_set():
        if step == 1:
            ctx.fire_hook()
        t0 = time.perf_counter()
        chunk = 0
        while chunk < eval_every:
            # A host clock read, no device sync: on CUDA the bound may be crossed by the
            # queued work of one chunk at most.
            bound = out_of_budget(time.perf_counter() - t0)
            if bound is not None:
                break
            chunk += 1
            with nvtx.span(f"step {step}"):
                train_step(student, opt, scaler, synthetic_images(b, size, dev, gen,
                                                                  channels_last))
            step += 1
        if chunk == 0:
            break
        sync(dev)
        t1 = time.perf_counter()
        train_s += t1 - t0
        chunk_rates.append(chunk * b / (t1 - t0))
        with nvtx.span("evaluation"):
            acc = accuracy()  # the .item() here is the sync every eval_every steps
        eval_s += time.perf_counter() - t1
        curve.append((step, round(acc, 4)))
        now = time.perf_counter()
        bound = bound or out_of_budget(0.0)
        done = acc >= target or bound is not None
        if now - t_last_progress >= 0.5 or done:
            ctx.emit(events.Progress(step=step, of=max_steps, elapsed_s=now - t_start,
                                     duration_s=duration_s, throughput=chunk * b / (t1 - t0),
                                     unit=ctx.bench.unit, window_s=t1 - t0,
                                     samples=chunk * b, total_samples=step * b))
            t_last_progress = now
        if acc >= target:
            reached_at = step
            break
        if bound is not None:
            break
    wall = time.perf_counter() - t_start
    samples = step * b
    # The timed loop here is training only (evaluation excluded); the spread is over the
    # chunks between evaluations.
    res.throughput = stats.headline(samples, train_s, chunk_rates, ctx.bench.unit)
    res.steps, res.samples = step, samples
    res.peak_memory_bytes = peak_memory(dev)
    res.extra = replace(res.extra, kind=AccuracyExtra(
        target_accuracy=target, reached=reached_at is not None,
        steps_to_target=reached_at, final_accuracy=acc,
        # Training seconds only: evaluation (eval_time_s) and the warm-up on a copy
        # (setup_time_s) are reported beside it.
        time_to_target_s=train_s if reached_at is not None else None,
        wall_to_target_s=wall if reached_at is not None else None,
        setup_time_s=setup_s, train_time_s=train_s, eval_time_s=eval_s,
        curve=tuple(curve),
        stopped_by="target" if reached_at is not None else (
            "cancel" if ctx.cancel.is_set() else bound)))
    if ctx.cancel.is_set() and reached_at is None:
        res.status = "cancelled"
    # Model FLOPs of the student's step (the teacher's labelling is not the model's work),
    # counted on a copy so the measured model is left as it ended.
    from gputui.bench.worker.kinds.flop_count import attach_counted

    probe = copy.deepcopy(student)
    xs = synthetic_images(b, size, dev, gen, channels_last)
    ys = teacher(xs).argmax(1)

    def count_pass() -> None:
        with autocast(dev, req.precision):
            loss_fn(probe(xs).float(), ys).backward()

    attach_counted(ctx, count_pass, b)
