"""The configuration that changes a benchmark's number, recorded once per run (`config`).

Two halves, each read where it is known:
- `config.gpu`: the GPU's driver-side settings (power limits, persistence, application
  clocks, ECC, MIG, compute mode, PCIe link), read by the runner (parent) through
  telemetry's `read_health` — the same reading `gputui doctor` uses — when a CUDA run
  starts. Torch-free.
- `config.torch`: the framework's switches and memory peaks, read by the worker at the
  end of the run (bench.torch_config).

Every key is always present; None means the device (a CPU, the fake NVML, an older
driver) has no such setting or did not say.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from typing import Any

from gputui.telemetry.health import COMPUTE_MODES, DeviceHealth

GPU_KEYS: tuple[str, ...] = (
    "gpu_index", "power_limit_default_w", "power_limit_enforced_w", "persistence_mode",
    "app_clock_sm_mhz", "app_clock_mem_mhz", "default_app_clock_sm_mhz",
    "default_app_clock_mem_mhz", "app_clocks_changed", "ecc_mode", "mig_mode",
    "compute_mode", "pcie_gen", "pcie_gen_max", "pcie_width", "pcie_width_max",
    "clock_sm_max_mhz", "clock_mem_max_mhz",
)
TORCH_KEYS: tuple[str, ...] = (
    "cudnn_benchmark", "cudnn_deterministic", "deterministic_algorithms", "tf32_matmul",
    "tf32_cudnn", "allow_fp16_reduced_precision_reduction",
    "allow_bf16_reduced_precision_reduction", "float32_matmul_precision",
    "max_memory_allocated_bytes", "max_memory_reserved_bytes", "nccl_version",
    "distributed_backend",
)


def empty(keys: tuple[str, ...]) -> dict[str, Any]:
    return dict.fromkeys(keys)


def gpu_config(health: DeviceHealth | None, info: Any = None) -> dict[str, Any]:
    """The GPU half of `config` from a health reading and the device's static facts
    (telemetry DeviceInfo: its max clocks); all None without a reading."""
    out = empty(GPU_KEYS)
    if health is None or health.error is not None:
        return out
    # NVML cannot say whether clocks are locked (nvidia-smi -lgc/-lmc: set and reset
    # only); the max clocks beside `window`'s clock mean/min show a lock below them.
    out["clock_sm_max_mhz"] = getattr(info, "clock_sm_max_mhz", None)
    out["clock_mem_max_mhz"] = getattr(info, "clock_mem_max_mhz", None)
    h = health
    changed = None
    if h.app_clock_sm_mhz is not None and h.default_app_clock_sm_mhz is not None:
        changed = (h.app_clock_sm_mhz, h.app_clock_mem_mhz) != (
            h.default_app_clock_sm_mhz, h.default_app_clock_mem_mhz)
    out.update({
        "gpu_index": h.index,
        "power_limit_default_w": h.power_default_limit_w,
        "power_limit_enforced_w": h.power_limit_w,
        "persistence_mode": h.persistence_mode,
        "app_clock_sm_mhz": h.app_clock_sm_mhz, "app_clock_mem_mhz": h.app_clock_mem_mhz,
        "default_app_clock_sm_mhz": h.default_app_clock_sm_mhz,
        "default_app_clock_mem_mhz": h.default_app_clock_mem_mhz,
        "app_clocks_changed": changed,
        "ecc_mode": h.ecc_mode, "mig_mode": h.mig_mode,
        "compute_mode": (COMPUTE_MODES.get(h.compute_mode, str(h.compute_mode))
                         if h.compute_mode is not None else None),
        "pcie_gen": h.pcie_gen, "pcie_gen_max": h.pcie_gen_max,
        "pcie_width": h.pcie_width, "pcie_width_max": h.pcie_width_max,
    })
    return out


def read_gpu_config(sampler: Any, gpu_index: int | None) -> dict[str, Any]:
    """Read the GPU half through a telemetry sampler's open NVML source; all None when
    there is none, the GPU is not known, or NVML fails (a run never fails for this)."""
    source = getattr(sampler, "nvml", None)
    if source is None or gpu_index is None:
        return empty(GPU_KEYS)
    health = info = None
    with contextlib.suppress(Exception):
        from gputui.telemetry.nvml.health_reads import read_health

        health = read_health(source, gpu_index)
        info = source.devices[gpu_index]
    return gpu_config(health, info)


def config_words(config: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(label, text) lines for the summary: only what was read."""
    gpu = config.get("gpu") if isinstance(config.get("gpu"), Mapping) else {}
    tc = config.get("torch") if isinstance(config.get("torch"), Mapping) else {}
    out: list[tuple[str, str]] = []

    def onoff(v: Any) -> str:
        return "on" if v else "off"

    if gpu.get("power_limit_enforced_w") is not None:
        text = f"{gpu['power_limit_enforced_w']:.0f} W enforced"
        if gpu.get("power_limit_default_w") is not None:
            text += f" (default {gpu['power_limit_default_w']:.0f} W)"
        out.append(("power limit", text))
    parts = [f"{name} {onoff(gpu[key])}" for key, name in
             (("persistence_mode", "persistence"), ("ecc_mode", "ECC"), ("mig_mode", "MIG"))
             if gpu.get(key) is not None]
    if gpu.get("compute_mode") is not None:
        parts.append(f"compute mode {gpu['compute_mode']}")
    if gpu.get("app_clocks_changed") is not None:
        parts.append("application clocks " + (
            f"set to {gpu['app_clock_sm_mhz']}/{gpu['app_clock_mem_mhz']} MHz"
            if gpu["app_clocks_changed"] else "default"))
    if parts:
        out.append(("GPU settings", ", ".join(parts)))
    if gpu.get("clock_sm_max_mhz") is not None:
        out.append(("max clocks", f"SM {gpu['clock_sm_max_mhz']} MHz, memory "
                                  f"{gpu.get('clock_mem_max_mhz')} MHz"))
    if gpu.get("pcie_gen") is not None:
        out.append(("PCIe link", f"gen {gpu['pcie_gen']} x{gpu.get('pcie_width')} (max gen "
                                 f"{gpu.get('pcie_gen_max')} x{gpu.get('pcie_width_max')})"))
    flags = [f"{key} {onoff(tc[key])}" for key in
             ("cudnn_benchmark", "cudnn_deterministic", "deterministic_algorithms",
              "tf32_matmul", "tf32_cudnn", "allow_fp16_reduced_precision_reduction",
              "allow_bf16_reduced_precision_reduction") if tc.get(key) is not None]
    if flags:
        out.append(("torch switches", ", ".join(flags)))
    if tc.get("max_memory_reserved_bytes") is not None:
        from gputui.bench.fmt import fmt_bytes

        out.append(("memory peaks", f"allocated {fmt_bytes(tc.get('max_memory_allocated_bytes'))}"
                                    f", reserved {fmt_bytes(tc['max_memory_reserved_bytes'])}"))
    if tc.get("nccl_version") is not None:
        out.append(("NCCL", str(tc["nccl_version"])))
    from gputui.bench.ddp_topology import topology_words

    topo = topology_words(config)
    if topo is not None:
        out.append(("GPU topology", topo))
    return out
