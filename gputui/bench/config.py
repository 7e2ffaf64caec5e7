"""The configuration that changes a benchmark's number, recorded once per run (`config`).

Two halves, each read where it is known:
- `config.gpu`: the GPU's driver-side settings (power limits, persistence, application
  clocks, ECC, MIG, compute mode, PCIe link), read by the runner (parent) through
  telemetry's `read_health` — the same reading `gputui doctor` uses — when a CUDA run
  starts. Torch-free.
- `config.torch`: the framework's switches and memory peaks, read by the worker at the
  end of the run (bench.torch_config).

Each half is a record (`GpuConfig`, `TorchConfig`) whose every key is written; None means
the device (a CPU, the fake NVML, an older driver) has no such setting or did not say.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any

from gputui.bench.record_json import (
    BadValue,
    opt_flag,
    opt_num,
    opt_text,
    opt_whole,
    text,
)
from gputui.telemetry.health import COMPUTE_MODES, DeviceHealth

if TYPE_CHECKING:
    from gputui.telemetry.nvml import NvmlSource


@dataclass(frozen=True)
class GpuConfig:
    """`config.gpu`. Every key is written; None: no such setting, or NVML did not say."""

    gpu_index: int | None = None
    power_limit_default_w: float | None = None
    power_limit_enforced_w: float | None = None
    persistence_mode: bool | None = None
    app_clock_sm_mhz: int | None = None
    app_clock_mem_mhz: int | None = None
    default_app_clock_sm_mhz: int | None = None
    default_app_clock_mem_mhz: int | None = None
    app_clocks_changed: bool | None = None
    ecc_mode: bool | None = None
    mig_mode: bool | None = None
    compute_mode: str | None = None
    pcie_gen: int | None = None
    pcie_gen_max: int | None = None
    pcie_width: int | None = None
    pcie_width_max: int | None = None
    # NVML cannot say whether clocks are locked (nvidia-smi -lgc/-lmc: set and reset
    # only); the max clocks beside `window`'s clock mean/min show a lock below them.
    clock_sm_max_mhz: float | None = None
    clock_mem_max_mhz: float | None = None

    def to_json(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in GPU_KEYS}

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> GpuConfig:
        return cls(
            gpu_index=opt_whole(d.get("gpu_index")),
            power_limit_default_w=opt_num(d.get("power_limit_default_w")),
            power_limit_enforced_w=opt_num(d.get("power_limit_enforced_w")),
            persistence_mode=opt_flag(d.get("persistence_mode")),
            app_clock_sm_mhz=opt_whole(d.get("app_clock_sm_mhz")),
            app_clock_mem_mhz=opt_whole(d.get("app_clock_mem_mhz")),
            default_app_clock_sm_mhz=opt_whole(d.get("default_app_clock_sm_mhz")),
            default_app_clock_mem_mhz=opt_whole(d.get("default_app_clock_mem_mhz")),
            app_clocks_changed=opt_flag(d.get("app_clocks_changed")),
            ecc_mode=opt_flag(d.get("ecc_mode")), mig_mode=opt_flag(d.get("mig_mode")),
            compute_mode=opt_text(d.get("compute_mode")),
            pcie_gen=opt_whole(d.get("pcie_gen")), pcie_gen_max=opt_whole(d.get("pcie_gen_max")),
            pcie_width=opt_whole(d.get("pcie_width")),
            pcie_width_max=opt_whole(d.get("pcie_width_max")),
            clock_sm_max_mhz=opt_num(d.get("clock_sm_max_mhz")),
            clock_mem_max_mhz=opt_num(d.get("clock_mem_max_mhz")))


@dataclass(frozen=True)
class TorchConfig:
    """`config.torch`: torch's switches as the run left them, and the memory peaks. None
    where a switch does not apply to the device (a CPU run uses neither cuDNN nor
    cuBLAS, whatever their flags); `error` alone when they could not be read."""

    cudnn_benchmark: bool | None = None
    cudnn_deterministic: bool | None = None
    deterministic_algorithms: bool | None = None
    tf32_matmul: bool | None = None
    tf32_cudnn: bool | None = None
    allow_fp16_reduced_precision_reduction: bool | None = None
    allow_bf16_reduced_precision_reduction: bool | None = None
    float32_matmul_precision: str | None = None
    max_memory_allocated_bytes: int | None = None
    max_memory_reserved_bytes: int | None = None
    nccl_version: str | None = None
    distributed_backend: str | None = None
    error: str | None = None

    def to_json(self) -> dict[str, Any]:
        if self.error is not None:
            return {"error": self.error}
        return {name: getattr(self, name) for name in TORCH_KEYS}

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> TorchConfig:
        if "error" in d:
            return cls(error=text(d.get("error")))
        return cls(
            cudnn_benchmark=opt_flag(d.get("cudnn_benchmark")),
            cudnn_deterministic=opt_flag(d.get("cudnn_deterministic")),
            deterministic_algorithms=opt_flag(d.get("deterministic_algorithms")),
            tf32_matmul=opt_flag(d.get("tf32_matmul")),
            tf32_cudnn=opt_flag(d.get("tf32_cudnn")),
            allow_fp16_reduced_precision_reduction=opt_flag(
                d.get("allow_fp16_reduced_precision_reduction")),
            allow_bf16_reduced_precision_reduction=opt_flag(
                d.get("allow_bf16_reduced_precision_reduction")),
            float32_matmul_precision=opt_text(d.get("float32_matmul_precision")),
            max_memory_allocated_bytes=opt_whole(d.get("max_memory_allocated_bytes")),
            max_memory_reserved_bytes=opt_whole(d.get("max_memory_reserved_bytes")),
            nccl_version=opt_text(d.get("nccl_version")),
            distributed_backend=opt_text(d.get("distributed_backend")))


GPU_KEYS: tuple[str, ...] = tuple(f.name for f in fields(GpuConfig))
TORCH_KEYS: tuple[str, ...] = tuple(f.name for f in fields(TorchConfig) if f.name != "error")


@dataclass(frozen=True)
class RunConfig:
    """A result's `config`: the worker's `torch` half, the runner's `gpu` half and a DDP
    run's GPU `topology` (bench.ddp_topology's record of NVML's answer, shown by
    `topology_words`). Absent halves are None; a half that does not read as its record
    (a damaged or newer file) is kept as read in `other`."""

    torch: TorchConfig | None = None
    gpu: GpuConfig | None = None
    topology: Mapping[str, Any] | None = None
    other: Mapping[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.torch is not None:
            out["torch"] = self.torch.to_json()
        if self.gpu is not None:
            out["gpu"] = self.gpu.to_json()
        # The runner writes both at the end of every run, a topology of null included.
        if self.gpu is not None or self.topology is not None:
            out["topology"] = dict(self.topology) if self.topology is not None else None
        out.update({k: v for k, v in self.other.items() if k not in out})
        return out

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> RunConfig:
        other = dict(d)

        def take(key: str, decode: Callable[[Mapping[str, Any]], Any],
                 known: tuple[str, ...]) -> Any:
            v = other.get(key)
            if not isinstance(v, Mapping) or not set(v) <= set(known):
                return None  # absent, or not a record this version knows: kept as read
            try:
                value = decode(v)
            except BadValue:
                return None
            del other[key]
            return value

        torch = take("torch", TorchConfig.from_json, (*TORCH_KEYS, "error"))
        gpu = take("gpu", GpuConfig.from_json, GPU_KEYS)
        topology = other.pop("topology", None)
        if not isinstance(topology, Mapping):
            if "topology" in d and (topology is not None or gpu is None):
                other["topology"] = topology  # not written the way the runner writes it
            topology = None
        return cls(torch=torch, gpu=gpu, topology=topology, other=other)


def gpu_config(health: DeviceHealth | None, info: Any = None) -> GpuConfig:
    """The GPU half of `config` from a health reading and the device's static facts
    (telemetry DeviceInfo: its max clocks); all None without a reading."""
    if health is None or health.error is not None:
        return GpuConfig()
    h = health
    changed = None
    if h.app_clock_sm_mhz is not None and h.default_app_clock_sm_mhz is not None:
        changed = (h.app_clock_sm_mhz, h.app_clock_mem_mhz) != (
            h.default_app_clock_sm_mhz, h.default_app_clock_mem_mhz)
    return GpuConfig(
        gpu_index=h.index,
        power_limit_default_w=h.power_default_limit_w,
        power_limit_enforced_w=h.power_limit_w,
        persistence_mode=h.persistence_mode,
        app_clock_sm_mhz=h.app_clock_sm_mhz, app_clock_mem_mhz=h.app_clock_mem_mhz,
        default_app_clock_sm_mhz=h.default_app_clock_sm_mhz,
        default_app_clock_mem_mhz=h.default_app_clock_mem_mhz,
        app_clocks_changed=changed,
        ecc_mode=h.ecc_mode, mig_mode=h.mig_mode,
        compute_mode=(COMPUTE_MODES.get(h.compute_mode, str(h.compute_mode))
                      if h.compute_mode is not None else None),
        pcie_gen=h.pcie_gen, pcie_gen_max=h.pcie_gen_max,
        pcie_width=h.pcie_width, pcie_width_max=h.pcie_width_max,
        clock_sm_max_mhz=info.clock_sm_max_mhz if info is not None else None,
        clock_mem_max_mhz=info.clock_mem_max_mhz if info is not None else None,
    )


def read_gpu_config(source: NvmlSource | None, gpu_index: int | None) -> GpuConfig:
    """Read the GPU half through an open NVML source; all None when there is none, the
    GPU is not known, or NVML fails (a run never fails for this)."""
    if source is None or gpu_index is None:
        return GpuConfig()
    health = info = None
    with contextlib.suppress(Exception):
        from gputui.telemetry.nvml.health_reads import read_health

        health = read_health(source, gpu_index)
        info = source.devices[gpu_index]
    return gpu_config(health, info)


def config_words(config: RunConfig) -> list[tuple[str, str]]:
    """(label, text) lines for the summary: only what was read."""
    gpu = config.gpu or GpuConfig()
    tc = config.torch or TorchConfig()
    out: list[tuple[str, str]] = []

    def onoff(v: bool | None) -> str:
        return "on" if v else "off"

    if gpu.power_limit_enforced_w is not None:
        words = f"{gpu.power_limit_enforced_w:.0f} W enforced"
        if gpu.power_limit_default_w is not None:
            words += f" (default {gpu.power_limit_default_w:.0f} W)"
        out.append(("power limit", words))
    parts = [f"{name} {onoff(value)}" for value, name in
             ((gpu.persistence_mode, "persistence"), (gpu.ecc_mode, "ECC"),
              (gpu.mig_mode, "MIG")) if value is not None]
    if gpu.compute_mode is not None:
        parts.append(f"compute mode {gpu.compute_mode}")
    if gpu.app_clocks_changed is not None:
        parts.append("application clocks " + (
            f"set to {gpu.app_clock_sm_mhz}/{gpu.app_clock_mem_mhz} MHz"
            if gpu.app_clocks_changed else "default"))
    if parts:
        out.append(("GPU settings", ", ".join(parts)))
    if gpu.clock_sm_max_mhz is not None:
        out.append(("max clocks", f"SM {gpu.clock_sm_max_mhz} MHz, memory "
                                  f"{gpu.clock_mem_max_mhz} MHz"))
    if gpu.pcie_gen is not None:
        out.append(("PCIe link", f"gen {gpu.pcie_gen} x{gpu.pcie_width} (max gen "
                                 f"{gpu.pcie_gen_max} x{gpu.pcie_width_max})"))
    flags = [f"{name} {onoff(value)}" for name, value in (
        ("cudnn_benchmark", tc.cudnn_benchmark), ("cudnn_deterministic", tc.cudnn_deterministic),
        ("deterministic_algorithms", tc.deterministic_algorithms),
        ("tf32_matmul", tc.tf32_matmul), ("tf32_cudnn", tc.tf32_cudnn),
        ("allow_fp16_reduced_precision_reduction", tc.allow_fp16_reduced_precision_reduction),
        ("allow_bf16_reduced_precision_reduction", tc.allow_bf16_reduced_precision_reduction),
    ) if value is not None]
    if flags:
        out.append(("torch switches", ", ".join(flags)))
    if tc.max_memory_reserved_bytes is not None:
        from gputui.bench.fmt import fmt_bytes

        out.append(("memory peaks", f"allocated {fmt_bytes(tc.max_memory_allocated_bytes)}"
                                    f", reserved {fmt_bytes(tc.max_memory_reserved_bytes)}"))
    if tc.nccl_version is not None:
        out.append(("NCCL", tc.nccl_version))
    from gputui.bench.ddp_topology import topology_words

    topo = topology_words(config.topology)
    if topo is not None:
        out.append(("GPU topology", topo))
    return out
