"""Models, synthetic data, and the training/inference steps the timed loops call.

Models are built with random weights (nothing is downloaded); data is random tensors made
once before timing, so the timed loop measures the model, not the generator.

Where the batches live (`request.data`, recorded as `settings.data`):
- "device" (default, as published synthetic-data results do): the batches are made on the
  device, in the dtype the model computes in; a step copies nothing.
- "host": a realistic input pipeline. Batches sit in pinned host memory and each step's
  batch is copied on a side stream one step ahead, so the copy overlaps the previous step's
  compute; the compute stream waits for it (`wait_stream`) and the allocator is told the
  tensor is used there (`record_stream`). Copies are in the model's dtype too: copying fp32
  to have autocast halve it on arrival would move twice the bytes.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

from gputui.bench.catalog import SEGMENTATION_MODELS
from gputui.bench.request import RunRequest
from gputui.bench.worker.timing import PhaseTimer

DATA_MODES: tuple[str, ...] = ("device", "host")
SEGMENTATION_CLASSES = 21
HOST_POOL = 4  # distinct host batches cycled through, so caches do not see one batch only
DEVICE_POOL = 2  # device batches are far larger than any L2: two are enough to alternate

Batch = tuple[torch.Tensor, torch.Tensor]


def configure_precision(device: torch.device, precision: str) -> dict[str, Any]:
    """Set the global switches that change matmul/conv numerics; return them for the record.

    "fp32" turns TF32 off explicitly: cuDNN allows it by default, which would make an
    "fp32" conv number a TF32 one on Ampere and later.
    """
    settings: dict[str, Any] = {"amp_dtype": None, "grad_scaler": False}
    if device.type == "cuda":
        tf32 = precision == "tf32"
        torch.backends.cuda.matmul.allow_tf32 = tf32
        torch.backends.cudnn.allow_tf32 = tf32
        torch.backends.cudnn.benchmark = True
        settings["cudnn_benchmark"] = True
    if precision in ("fp16", "bf16"):
        settings["amp_dtype"] = "float16" if precision == "fp16" else "bfloat16"
        settings["grad_scaler"] = precision == "fp16" and device.type == "cuda"
    settings.update(precision_flags(device))
    return settings


def precision_flags(device: torch.device) -> dict[str, Any]:
    """The numerics switches that apply to `device`; None where one does not (a CPU run
    uses neither cuBLAS nor cuDNN, whatever their global flags say)."""
    cuda = device.type == "cuda"
    mm = torch.backends.cuda.matmul

    def flag(value: Any) -> bool | None:
        return bool(value) if cuda else None

    return {
        "tf32_matmul": flag(mm.allow_tf32),
        "tf32_cudnn": flag(torch.backends.cudnn.allow_tf32),
        "cudnn_benchmark": flag(torch.backends.cudnn.benchmark),
        # cuBLAS may accumulate fp16/bf16 products in reduced precision when these are on
        # (PyTorch's default): faster, and a different number.
        "allow_fp16_reduced_precision_reduction": flag(
            getattr(mm, "allow_fp16_reduced_precision_reduction", None)),
        "allow_bf16_reduced_precision_reduction": flag(
            getattr(mm, "allow_bf16_reduced_precision_reduction", None)),
        "float32_matmul_precision": torch.get_float32_matmul_precision(),
    }


def autocast(device: torch.device, precision: str) -> contextlib.AbstractContextManager[Any]:
    if precision == "fp16":
        return torch.autocast(device_type=device.type, dtype=torch.float16)
    if precision == "bf16":
        return torch.autocast(device_type=device.type, dtype=torch.bfloat16)
    return contextlib.nullcontext()


# ---- models -------------------------------------------------------------------------------

def build_cnn(name: str, image_size: int, num_classes: int = 1000) -> nn.Module:
    import torchvision.models as tvm

    if name in SEGMENTATION_MODELS:
        # Pascal VOC's 21 classes, as torchvision's segmentation models default to.
        return tvm.segmentation.lraspp_mobilenet_v3_large(
            weights=None, weights_backbone=None, num_classes=SEGMENTATION_CLASSES)
    if name == "vit_b_16":
        # ViT's position embedding is sized for the image; torchvision takes image_size.
        return tvm.vit_b_16(weights=None, image_size=image_size, num_classes=num_classes)
    if name == "vit_ti_16":
        # ViT-Tiny/16 as DeiT defines it; torchvision builds it but names no function.
        return tvm.VisionTransformer(image_size=image_size, patch_size=16, num_layers=12,
                                     num_heads=3, hidden_dim=192, mlp_dim=768,
                                     num_classes=num_classes)
    builders: dict[str, Callable[..., nn.Module]] = {
        "resnet18": tvm.resnet18,
        "resnet50": tvm.resnet50,
        "mobilenet_v3_large": tvm.mobilenet_v3_large,
    }
    return builders[name](weights=None, num_classes=num_classes)


class RnnLM(nn.Module):
    """Embedding → LSTM/GRU → vocabulary projection (a word-level language model)."""

    def __init__(self, kind: str, vocab: int, hidden: int, layers: int) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, hidden)
        rnn_cls = nn.LSTM if kind == "lstm" else nn.GRU
        self.rnn = rnn_cls(hidden, hidden, num_layers=layers, batch_first=True)
        self.head = nn.Linear(hidden, vocab)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        out, _ = self.rnn(self.embed(tokens))
        return self.head(out)


class SmallCNN(nn.Module):
    def __init__(self, classes: int, width: int = 32) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, width, 3, padding=1), nn.BatchNorm2d(width), nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(width, 2 * width, 3, padding=1), nn.BatchNorm2d(2 * width), nn.ReLU(),
            nn.AdaptiveAvgPool2d(4),
        )
        self.head = nn.Linear(2 * width * 16, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(x).flatten(1))


class Teacher(nn.Module):
    """A fixed random linear map of the coarsely pooled image; its argmax is the label.

    Learnable by construction (the student can average-pool too), so accuracy climbs within
    tens of steps. Logits are standardised on a calibration batch: a raw random head would
    give one class most of the labels and make accuracy meaningless.
    """

    def __init__(self, classes: int, calib: torch.Tensor) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.AdaptiveAvgPool2d(2), nn.Flatten(), nn.Linear(12, classes))
        self.net.to(calib.device)  # calibrated where the images are (a GPU run's: on it)
        with torch.no_grad():
            logits = self.net(calib)
        self.register_buffer("mu", logits.mean(0))
        self.register_buffer("sd", logits.std(0).clamp_min(1e-6))

    @torch.no_grad()
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return (self.net(x) - self.mu) / self.sd


# ---- synthetic data -------------------------------------------------------------------------

def input_dtype(precision: str) -> torch.dtype:
    """The dtype the first layer computes in: autocast would cast an fp32 input on entry."""
    return {"fp16": torch.float16, "bf16": torch.bfloat16}.get(precision, torch.float32)


def host_tensor(t: torch.Tensor, device: torch.device) -> torch.Tensor:
    """Pinned host memory on CUDA so the copy can be asynchronous (non_blocking)."""
    return t.pin_memory() if device.type == "cuda" else t


def image_batches(
    batch: int, image_size: int, classes: int, where: torch.device, channels_last: bool,
    gen: torch.Generator, *, n: int = HOST_POOL, dtype: torch.dtype = torch.float32,
    pin_for: torch.device | None = None, dense: bool = False,
) -> list[Batch]:
    """`n` batches of Gaussian images made on `where` (host batches pinned for a CUDA
    `pin_for`), NHWC strides when the model runs channels_last; `dense`: one label per
    pixel (segmentation), else one per image."""
    out = []
    for _ in range(n):
        x = torch.randn(batch, 3, image_size, image_size, generator=gen, device=where,
                        dtype=dtype)
        if channels_last:
            x = x.contiguous(memory_format=torch.channels_last)
        labels = (batch, image_size, image_size) if dense else (batch,)
        y = torch.randint(0, classes, labels, generator=gen, device=where)
        if pin_for is not None:
            x, y = host_tensor(x, pin_for), host_tensor(y, pin_for)
        out.append((x, y))
    return out


def synthetic_images(
    n: int, image_size: int, device: torch.device, gen: torch.Generator, channels_last: bool,
) -> torch.Tensor:
    """Gaussian images made on `device`; NHWC strides when the model runs channels_last.

    A channels_last model fed NCHW inputs converts them inside the first conv, which both
    costs time and measures a different thing from what the setting says.
    """
    x = torch.randn(n, 3, image_size, image_size, device=device, generator=gen)
    return x.contiguous(memory_format=torch.channels_last) if channels_last else x


def token_batches(
    batch: int, seq_len: int, vocab: int, where: torch.device, gen: torch.Generator,
    *, n: int = HOST_POOL, pin_for: torch.device | None = None,
) -> list[Batch]:
    out = []
    for _ in range(n):
        seq = torch.randint(0, vocab, (batch, seq_len + 1), generator=gen, device=where)
        x, y = seq[:, :-1].contiguous(), seq[:, 1:].contiguous()
        if pin_for is not None:
            x, y = host_tensor(x, pin_for), host_tensor(y, pin_for)
        out.append((x, y))
    return out


class DeviceFeed:
    """Batches already on the device: a step takes one and copies nothing."""

    def __init__(self, batches: list[Batch]) -> None:
        self.batches = batches

    def __call__(self, i: int) -> Batch:
        return self.batches[i % len(self.batches)]

    def sync_copy(self, i: int) -> Batch:
        return self(i)


class HostFeed:
    """Pinned host batches, each copied on a side stream while the step before computes.

    With `ahead=False` (single-stream latency: a request arrives with its data on the host)
    each batch is copied on the compute stream when its step starts, so the copy is part of
    the request. On CPU there is nothing to copy (host memory is the device's memory): the
    batches are used as they are.
    """

    def __init__(self, batches: list[Batch], device: torch.device, ahead: bool = True) -> None:
        self.batches = batches
        self.device = device
        self.ahead = ahead
        self.stream = torch.cuda.Stream(device) if device.type == "cuda" else None
        self._ahead: tuple[int, Batch] | None = None

    def _copy(self, i: int) -> Batch:
        hx, hy = self.batches[i % len(self.batches)]
        return hx.to(self.device, non_blocking=True), hy.to(self.device, non_blocking=True)

    def _issue(self, i: int) -> tuple[int, Batch]:
        assert self.stream is not None
        with torch.cuda.stream(self.stream):
            return i, self._copy(i)

    def __call__(self, i: int) -> Batch:
        if self.stream is None:
            return self.batches[i % len(self.batches)]
        if not self.ahead:
            return self._copy(i)
        if self._ahead is None or self._ahead[0] != i:
            self._ahead = self._issue(i)  # first step (or out of order): nothing in flight
        _, (x, y) = self._ahead
        compute = torch.cuda.current_stream(self.device)
        compute.wait_stream(self.stream)
        # Made on the side stream, used on this one: without this the allocator could hand
        # their memory to the next copy while this step still reads it.
        x.record_stream(compute)
        y.record_stream(compute)
        self._ahead = self._issue(i + 1)
        return x, y

    def sync_copy(self, i: int) -> Batch:
        """The copy alone on the compute stream, for the per-phase split's "h2d" phase."""
        self._ahead = None
        if self.stream is None:
            return self.batches[i % len(self.batches)]
        return self._copy(i)


# ---- tasks ----------------------------------------------------------------------------------

@dataclass
class Workload:
    model: nn.Module
    batches: list[Batch]  # on the device ("device") or pinned on the host ("host")
    samples_per_step: int  # images, or tokens for language models
    shapes: dict[str, Any]
    is_lm: bool = False
    data: str = "device"
    feed: DeviceFeed | HostFeed | None = None
    settings: dict[str, Any] = field(default_factory=dict)  # merged into result settings

    def __post_init__(self) -> None:
        if self.feed is None:
            self.feed = DeviceFeed(self.batches)


def data_mode(req: RunRequest) -> str:
    mode = req.data or "device"
    if mode not in DATA_MODES:
        raise ValueError(f"bad data placement {mode!r} (choose from {', '.join(DATA_MODES)})")
    return mode


def make_workload(req: RunRequest, device: torch.device, batch: int,
                  pool: int | None = None) -> Workload:
    """The model and its synthetic batches, placed as `request.data` says.

    `pool` overrides how many distinct batches are made (the batch-finder uses one, so that
    inputs do not crowd out the memory it probes)."""
    torch.manual_seed(int(req.seed))
    mode = data_mode(req)
    on_host = mode == "host"
    where = torch.device("cpu") if on_host else device
    gen = torch.Generator(device=where).manual_seed(int(req.seed))
    n = pool or (HOST_POOL if on_host else DEVICE_POOL)
    pin_for = device if on_host else None
    bench = req.benchmark
    params = req.params or {}
    if bench.startswith("rnn"):
        vocab, hidden, layers = params["vocab"], params["hidden"], params["layers"]
        model = RnnLM(req.model, vocab, hidden, layers)
        seq = int(req.seq_len)
        batches = token_batches(batch, seq, vocab, where, gen, n=n, pin_for=pin_for)
        wl = Workload(
            model=model.to(device), batches=batches, samples_per_step=batch * seq,
            shapes={"tokens": [batch, seq], "vocab": vocab, "hidden": hidden, "layers": layers},
            is_lm=True, data=mode)
    else:
        size = int(req.image_size)
        model = build_cnn(req.model, size).to(device)
        if req.channels_last:
            model = model.to(memory_format=torch.channels_last)
        dtype = input_dtype(req.precision)
        dense = req.model in SEGMENTATION_MODELS
        classes = SEGMENTATION_CLASSES if dense else 1000
        batches = image_batches(batch, size, classes, where, req.channels_last, gen, n=n,
                                dtype=dtype, pin_for=pin_for, dense=dense)
        wl = Workload(model=model, batches=batches, samples_per_step=batch,
                      shapes={"input": [batch, 3, size, size], "classes": classes,
                              **({"labels": "per pixel"} if dense else {})}, data=mode)
    ahead = req.mode != "latency"
    if on_host:
        wl.feed = HostFeed(batches, device, ahead=ahead)
    x0 = batches[0][0]
    if not on_host or device.type != "cuda":
        copy = "none: batches made on the device before timing"
    elif ahead:
        copy = ("pinned host buffers → device on a side stream, one step ahead, overlapped "
                "with compute (wait_stream + record_stream)")
    else:
        copy = "pinned host buffer → device at the start of each request, part of its latency"
    wl.settings = {"data": mode, "input_dtype": str(x0.dtype).removeprefix("torch."),
                   "input_batches": len(batches), "h2d_copy": copy}
    return wl


def make_optimizer(params: Any, lr: float = 0.01) -> tuple[torch.optim.Optimizer, str]:
    """SGD with momentum, fused where this torch has it.

    The fused kernel also takes GradScaler's inf check and step-skip on the device: with
    the for-each path, `GradScaler.step` reads found_inf with `.item()`, a host sync every
    step (see `sync_note`)."""
    try:
        return (torch.optim.SGD(params, lr=lr, momentum=0.9, fused=True),
                f"SGD(lr={lr}, momentum=0.9, fused=True)")
    except (RuntimeError, TypeError, ValueError):
        return (torch.optim.SGD(params, lr=lr, momentum=0.9),
                f"SGD(lr={lr}, momentum=0.9, foreach)")


def sync_note(opt: torch.optim.Optimizer, scaler: torch.amp.GradScaler | None) -> str | None:
    """What to record in settings.sync when a step syncs the host, else None."""
    if scaler is not None and not getattr(opt, "_step_supports_amp_scaling", False):
        return ("every step: GradScaler.step reads found_inf with .item() (this optimizer "
                "cannot take the inf check on the device)")
    return None


class TrainStep:
    """One SGD step; `__call__` is the sync-free fast path, `instrumented` splits phases."""

    def __init__(self, w: Workload, device: torch.device, precision: str,
                 compile_model: bool = False, ddp_model: nn.Module | None = None) -> None:
        self.w = w
        self.device = device
        self.precision = precision
        w.model.train()
        module = ddp_model if ddp_model is not None else w.model
        self.forward_module: nn.Module | Callable[..., Any] = (
            torch.compile(module) if compile_model else module
        )
        self.opt, optimizer = make_optimizer(w.model.parameters())
        self.loss_fn = nn.CrossEntropyLoss()
        self.scaler = (torch.amp.GradScaler("cuda")
                       if precision == "fp16" and device.type == "cuda" else None)
        self.settings: dict[str, Any] = {"optimizer": optimizer}
        if self.scaler is not None:
            self.settings["grad_scaler"] = (
                "GradScaler; inf check and step skip on the device (fused optimizer)"
                if sync_note(self.opt, self.scaler) is None else "GradScaler")
        note = sync_note(self.opt, self.scaler)
        if note is not None:
            self.settings["sync"] = note

    def _loss(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        with autocast(self.device, self.precision):
            out = self.forward_module(x)
            if isinstance(out, dict):  # torchvision segmentation: per-pixel logits in "out"
                out = out["out"]
            if self.w.is_lm:
                return self.loss_fn(out.reshape(-1, out.shape[-1]).float(), y.reshape(-1))
            return self.loss_fn(out.float(), y)

    def _backward_opt(self, loss: torch.Tensor, timer: PhaseTimer | None = None) -> None:
        if self.scaler is not None:
            self.scaler.scale(loss).backward()
            if timer is not None:
                timer.start("optimizer")
            self.scaler.step(self.opt)
            self.scaler.update()
        else:
            loss.backward()
            if timer is not None:
                timer.start("optimizer")
            self.opt.step()
        self.opt.zero_grad(set_to_none=True)

    def __call__(self, i: int) -> None:
        assert self.w.feed is not None
        x, y = self.w.feed(i)
        self._backward_opt(self._loss(x, y))

    def instrumented(self, i: int, timer: PhaseTimer) -> None:
        assert self.w.feed is not None
        timer.start("data")
        self.w.batches[i % len(self.w.batches)]  # the pick alone: data is synthetic
        timer.start("h2d")
        x, y = self.w.feed.sync_copy(i)
        timer.start("forward")
        loss = self._loss(x, y)
        timer.start("backward")
        self._backward_opt(loss, timer)
        timer.stop()


class InferStep:
    def __init__(self, w: Workload, device: torch.device, precision: str,
                 compile_model: bool = False) -> None:
        self.w = w
        self.device = device
        self.precision = precision
        w.model.eval()
        self.forward_module: nn.Module | Callable[..., Any] = (
            torch.compile(w.model) if compile_model else w.model
        )
        self.settings: dict[str, Any] = {}

    def __call__(self, i: int) -> None:
        assert self.w.feed is not None
        x, _ = self.w.feed(i)
        with torch.inference_mode(), autocast(self.device, self.precision):
            self.forward_module(x)
