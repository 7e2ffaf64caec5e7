"""What went wrong in the worker, in the protocol's error kinds: oom, cuda, invalid, crash."""

from __future__ import annotations

from gputui.bench import catalog, events
from gputui.bench.request import RunRequest
from gputui.bench.worker.cancel import SimulatedCrash
from gputui.errors import UsageError


def first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    msg = text[0] if text else ""
    return f"{type(exc).__name__}: {msg}" if msg else type(exc).__name__


def is_oom(exc: BaseException) -> bool:
    try:
        import torch

        if isinstance(exc, torch.cuda.OutOfMemoryError):
            return True
    except ImportError:
        pass
    if isinstance(exc, MemoryError):
        return True
    msg = str(exc).lower()
    return isinstance(exc, RuntimeError) and (
        "out of memory" in msg or "can't allocate memory" in msg)


def is_cuda_error(exc: BaseException) -> bool:
    try:
        import torch

        accel = getattr(torch, "AcceleratorError", None)
        if accel is not None and isinstance(exc, accel):
            return True
    except ImportError:
        pass
    if not isinstance(exc, RuntimeError) or isinstance(exc, SimulatedCrash):
        return False
    msg = str(exc)
    return any(s in msg for s in ("CUDA error", "CUDA driver", "cuDNN error", "CUBLAS_STATUS",
                                  "NCCL", "device-side assert", "CUDA kernel"))


def oom_suggestion(batch: int | None, request: RunRequest) -> str:
    parts = []
    if batch and batch > 1:
        parts.append(f"try --batch-size {max(1, batch // 2)}")
    if request.precision == "fp32":
        parts.append("--precision bf16 or fp16")
    model = request.model
    finder = "gputui bench run batch-finder" + (f" --model {model}" if model and
                                            model in catalog.CNN_MODELS else "")
    parts.append(f"`{finder}` finds the largest batch that fits")
    return "; ".join(parts)


def classify(exc: BaseException, batch: int | None, request: RunRequest) -> events.Failed:
    if isinstance(exc, UsageError):
        return events.error("invalid", str(exc))
    if is_oom(exc):
        where = f" at batch {batch}" if batch else ""
        return events.error("oom", f"out of memory{where}: {first_line(exc)}",
                            batch_size=batch, suggestion=oom_suggestion(batch, request))
    if is_cuda_error(exc):
        return events.error("cuda", first_line(exc), batch_size=batch,
                            suggestion="check `nvidia-smi` and the kernel log (dmesg) for "
                            "Xid errors; rerun with CUDA_LAUNCH_BLOCKING=1 to locate it")
    return events.error("crash", first_line(exc), batch_size=batch)
