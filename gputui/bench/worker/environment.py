"""Where a benchmark runs: the device it resolves to, and every version and setting that
changes the number (recorded in the result's `env` and `settings`)."""

from __future__ import annotations

import os
import platform
import socket
import sys
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from gputui.bench.config import TORCH_KEYS, TorchConfig
from gputui.bench.request import RunRequest
from gputui.bench.worker.memory import PeakRss
from gputui.errors import UsageError

if TYPE_CHECKING:
    import torch

    from gputui.bench.worker.energy import NvmlLink


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def torchvision_version() -> str | None:
    """Without importing torchvision (over a second) when the benchmark does not use it."""
    mod = sys.modules.get("torchvision")
    if mod is not None:
        return str(mod.__version__)
    import importlib.util
    import re

    # torchvision/version.py holds the full version ("0.29.1+cu130"); the distribution
    # metadata may not carry the local "+cu..." part.
    spec = importlib.util.find_spec("torchvision")
    if spec is None:
        return None
    for folder in spec.submodule_search_locations or []:
        try:
            with open(os.path.join(folder, "version.py"), encoding="utf-8") as f:
                m = re.search(r"^__version__\s*=\s*['\"]([^'\"]+)['\"]", f.read(), re.M)
        except OSError:
            continue
        if m:
            return m.group(1)
    try:
        from importlib.metadata import version

        return version("torchvision")
    except Exception:
        return None


def collect_env(device: torch.device, link: NvmlLink | None) -> dict[str, Any]:
    import torch

    try:
        cudnn = torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None
    except Exception:
        cudnn = None
    env: dict[str, Any] = {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "hostname": socket.gethostname(),
        "cpu": cpu_model(),
        "cpu_count": os.cpu_count(),
        "torch": torch.__version__,
        "torchvision": torchvision_version(),
        "cuda": torch.version.cuda,
        # A ROCm build of torch runs through torch.cuda too; its HIP version says which
        # stack did (None on CUDA and CPU builds).
        "hip_version": getattr(torch.version, "hip", None),
        "cudnn": cudnn,
        "driver": None,
        "device": str(device),
        "device_name": cpu_model(),
        "clocks_at_start": None,
        "num_threads": torch.get_num_threads(),
        "num_interop_threads": torch.get_num_interop_threads(),
    }
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        env.update({
            "device_name": props.name,
            "device_total_memory_bytes": int(props.total_memory),
            "sm_count": int(props.multi_processor_count),
            "compute_capability": f"{props.major}.{props.minor}",
            "cuda_device_count": torch.cuda.device_count(),
            "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
        })
        if link is not None and link.available:
            env["driver"] = link.driver_version()
            env["clocks_at_start"] = link.clocks_now()
            env["nvml"] = link.static_info()
    return env


def resolve_device(request: RunRequest) -> torch.device:
    """The torch device the request asks for; UsageError when it cannot be had here.
    The precision is checked by `check_precision` once the request is resolved for this
    device (an "auto" precision is only known then)."""
    import torch

    want = request.device
    if want == "auto":
        want = "cuda" if torch.cuda.is_available() else "cpu"
    if want.startswith("cuda"):
        if not torch.cuda.is_available():
            raise UsageError(
                f"--device {request.device}: no CUDA device available "
                f"(torch {torch.__version__}, CUDA build {torch.version.cuda or 'none'})")
        count = torch.cuda.device_count()
        index = int(want.split(":", 1)[1]) if ":" in want else torch.cuda.current_device()
        if index >= count:
            raise UsageError(f"--device {want}: only {count} CUDA device(s) visible")
        if request.nproc * request.nnodes <= 1:
            # Since CUDA 12 this creates the device's context (~0.5 GB). A DDP worker only
            # coordinates its ranks: it must not hold one on a rank's GPU.
            torch.cuda.set_device(index)
        device = torch.device("cuda", index)
    else:
        device = torch.device("cpu")
    return device


def check_precision(device: torch.device, prec: str) -> None:
    """UsageError when this device cannot run the precision."""
    import torch

    if device.type == "cpu" and prec in ("fp16", "tf32"):
        raise UsageError(f"{prec} needs a CUDA device; on CPU use bf16 or fp32")
    if device.type == "cuda":
        major, _ = torch.cuda.get_device_capability(device)
        if prec == "bf16" and not torch.cuda.is_bf16_supported():
            raise UsageError(f"bf16 is not supported on {torch.cuda.get_device_name(device)}")
        if prec == "tf32" and major < 8:
            raise UsageError("tf32 needs compute capability 8.0 or newer")


def host_peak_text() -> str:
    """How peak host memory is measured on this platform (for `settings`)."""
    probe = PeakRss()
    probe.reset()  # finds the method this platform allows
    probe.peak()
    return probe.description


def base_settings(request: RunRequest, device: torch.device) -> dict[str, Any]:
    import torch

    from gputui.bench.worker.workloads import configure_precision

    r = request
    settings: dict[str, Any] = {
        "benchmark": r.benchmark, "model": r.model, "mode": r.mode,
        "precision": r.precision, "batch_size": r.batch_size,
        "image_size": r.image_size, "seq_len": r.seq_len,
        "steps": r.steps, "duration_s": r.duration_s, "warmup": r.warmup,
        "channels_last": r.channels_last, "compile": r.compile, "sweep": r.sweep,
        "nproc": r.nproc, "seed": r.seed, "profile": r.profile,
        "threads": torch.get_num_threads(), "interop_threads": torch.get_num_interop_threads(),
        "params": dict(r.params or {}),
        "timing": "cuda_events" if device.type == "cuda" else "host_clock",
        "sync": "window ends only (windows of ~0.5 s)",
        "peak_memory": ("torch.cuda.max_memory_allocated since the timed loop (or probe) "
                        "began" if device.type == "cuda" else host_peak_text()),
    }
    if r.batch_sizes is not None:
        settings["batch_sizes"] = list(r.batch_sizes)  # the sweep's grid, as asked
    settings.update(configure_precision(device, r.precision))
    return settings


def torch_config(device: torch.device, backend: str | None = None) -> TorchConfig:
    """The worker's half of the result's `config` (bench.config names the keys): torch's
    switches as the run left them, and the memory peaks. None where a switch does not
    apply to `device` (a CPU run uses neither cuDNN nor cuBLAS, whatever their flags)."""
    import torch

    from gputui.bench.worker.workloads import precision_flags

    out = TorchConfig(**{k: v for k, v in precision_flags(device).items() if k in TORCH_KEYS},
                      deterministic_algorithms=bool(torch.are_deterministic_algorithms_enabled()),
                      distributed_backend=backend)
    if device.type == "cuda":
        out = replace(out, cudnn_deterministic=bool(torch.backends.cudnn.deterministic),
                      nccl_version=_nccl_version())
        if backend is None:
            # Peaks since the last reset (the timed loop's, measure.reset_peak): the
            # allocator's reserve is memory no other process on this GPU could have had.
            # A DDP coordinator holds no CUDA context (the ranks do) and must not make one.
            out = replace(out,
                          max_memory_allocated_bytes=int(torch.cuda.max_memory_allocated(device)),
                          max_memory_reserved_bytes=int(torch.cuda.max_memory_reserved(device)))
    return out


def _nccl_version() -> str | None:
    try:
        import torch.cuda.nccl as nccl

        v = nccl.version()
    except Exception:  # no NCCL in this build (ROCm, CPU-only wheels)
        return None
    return ".".join(str(x) for x in v) if isinstance(v, tuple) else str(v)
