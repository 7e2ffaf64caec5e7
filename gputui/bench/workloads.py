"""Models, synthetic data, and the training/inference steps the timed loops call.

Models are built with random weights (nothing is downloaded); data is random tensors made
once on the host before timing, so the timed loop measures the model, not the generator.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from gputui.bench.timing import PhaseTimer

HOST_POOL = 4  # distinct host batches cycled through, so caches do not see one batch only


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
    settings.update(precision_flags())
    return settings


def precision_flags() -> dict[str, Any]:
    return {
        "tf32_matmul": bool(torch.backends.cuda.matmul.allow_tf32),
        "tf32_cudnn": bool(torch.backends.cudnn.allow_tf32),
        "cudnn_benchmark": bool(torch.backends.cudnn.benchmark),
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

    if name == "vit_b_16":
        # ViT's position embedding is sized for the image; torchvision takes image_size.
        return tvm.vit_b_16(weights=None, image_size=image_size, num_classes=num_classes)
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
        with torch.no_grad():
            logits = self.net(calib)
        self.register_buffer("mu", logits.mean(0))
        self.register_buffer("sd", logits.std(0).clamp_min(1e-6))

    @torch.no_grad()
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return (self.net(x) - self.mu) / self.sd


# ---- synthetic data -------------------------------------------------------------------------

def host_tensor(t: torch.Tensor, device: torch.device) -> torch.Tensor:
    """Pinned host memory on CUDA so the copy can be asynchronous (non_blocking)."""
    return t.pin_memory() if device.type == "cuda" else t


def image_batches(
    batch: int, image_size: int, classes: int, device: torch.device, channels_last: bool,
    gen: torch.Generator,
) -> list[tuple[torch.Tensor, torch.Tensor]]:
    out = []
    for _ in range(HOST_POOL):
        x = torch.randn(batch, 3, image_size, image_size, generator=gen)
        if channels_last:
            x = x.contiguous(memory_format=torch.channels_last)
        y = torch.randint(0, classes, (batch,), generator=gen)
        out.append((host_tensor(x, device), host_tensor(y, device)))
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
    batch: int, seq_len: int, vocab: int, device: torch.device, gen: torch.Generator
) -> list[tuple[torch.Tensor, torch.Tensor]]:
    out = []
    for _ in range(HOST_POOL):
        seq = torch.randint(0, vocab, (batch, seq_len + 1), generator=gen)
        out.append((host_tensor(seq[:, :-1].contiguous(), device),
                    host_tensor(seq[:, 1:].contiguous(), device)))
    return out


# ---- tasks ----------------------------------------------------------------------------------

@dataclass
class Workload:
    model: nn.Module
    batches: list[tuple[torch.Tensor, torch.Tensor]]
    samples_per_step: int  # images, or tokens for language models
    shapes: dict[str, Any]
    is_lm: bool = False


def make_workload(spec: dict[str, Any], device: torch.device, batch: int) -> Workload:
    gen = torch.Generator().manual_seed(int(spec["seed"]))
    torch.manual_seed(int(spec["seed"]))
    bench = spec["benchmark"]
    params = spec.get("params", {})
    if bench.startswith("rnn"):
        vocab, hidden, layers = params["vocab"], params["hidden"], params["layers"]
        model = RnnLM(spec["model"], vocab, hidden, layers)
        seq = int(spec["seq_len"])
        return Workload(
            model=model.to(device),
            batches=token_batches(batch, seq, vocab, device, gen),
            samples_per_step=batch * seq,
            shapes={"tokens": [batch, seq], "vocab": vocab, "hidden": hidden, "layers": layers},
            is_lm=True,
        )
    size = int(spec["image_size"])
    model = build_cnn(spec["model"], size).to(device)
    if spec["channels_last"]:
        model = model.to(memory_format=torch.channels_last)
    return Workload(
        model=model,
        batches=image_batches(batch, size, 1000, device, spec["channels_last"], gen),
        samples_per_step=batch,
        shapes={"input": [batch, 3, size, size], "classes": 1000},
    )


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
        self.opt = torch.optim.SGD(w.model.parameters(), lr=0.01, momentum=0.9)
        self.loss_fn = nn.CrossEntropyLoss()
        self.scaler = (torch.amp.GradScaler("cuda")
                       if precision == "fp16" and device.type == "cuda" else None)

    def _loss(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        with autocast(self.device, self.precision):
            out = self.forward_module(x)
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
        hx, hy = self.w.batches[i % len(self.w.batches)]
        x = hx.to(self.device, non_blocking=True)
        y = hy.to(self.device, non_blocking=True)
        self._backward_opt(self._loss(x, y))

    def instrumented(self, i: int, timer: PhaseTimer) -> None:
        timer.start("data")
        hx, hy = self.w.batches[i % len(self.w.batches)]
        timer.start("h2d")
        x = hx.to(self.device, non_blocking=True)
        y = hy.to(self.device, non_blocking=True)
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

    def __call__(self, i: int) -> None:
        hx, _ = self.w.batches[i % len(self.w.batches)]
        with torch.inference_mode(), autocast(self.device, self.precision):
            self.forward_module(hx.to(self.device, non_blocking=True))
