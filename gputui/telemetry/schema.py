"""Snapshot ⇄ JSON: the public schema of `gputui snapshot --json` and of recordings."""

from __future__ import annotations

from dataclasses import fields
from datetime import UTC, datetime
from typing import Any

from gputui.telemetry.model import (
    DeviceInfo,
    GpuProcess,
    GpuSample,
    HostSample,
    Snapshot,
    SystemInfo,
    iso_utc,
    parse_iso,
)
from gputui.telemetry.throttle import is_throttling, mask_from_keys, reason_keys, state_words

SCHEMA_VERSION = 1

_INFO_FIELDS = [f.name for f in fields(DeviceInfo)]
_SAMPLE_FIELDS = [f.name for f in fields(GpuSample) if f.name not in ("info", "throttle_mask")]


def gpu_to_dict(g: GpuSample) -> dict[str, Any]:
    d: dict[str, Any] = {name: getattr(g.info, name) for name in _INFO_FIELDS}
    for name in _SAMPLE_FIELDS:
        d[name] = getattr(g, name)
    # mem_total from the live reading wins over the static one (MIG can change it).
    if g.mem_total_bytes is None:
        d["mem_total_bytes"] = g.info.mem_total_bytes
    d["throttle_reasons"] = None if g.throttle_mask is None else reason_keys(g.throttle_mask)
    d["throttle_reasons_text"] = None if g.throttle_mask is None else state_words(g.throttle_mask)
    d["throttle_mask"] = g.throttle_mask
    # Unknown (lost, unsupported, a failed read) is null, not "not throttling".
    d["throttling"] = None if g.throttle_mask is None else is_throttling(g.throttle_mask)
    return d


def snapshot_to_dict(s: Snapshot) -> dict[str, Any]:
    h = s.host
    return {
        "time": s.time_iso,
        "driver_version": s.system.driver_version,
        "nvml_version": s.system.nvml_version,
        "cuda_driver_version": s.system.cuda_driver_version,
        "host": {
            "hostname": h.hostname,
            "cpu_pct": h.cpu_pct,
            "cpu_per_core_pct": list(h.cpu_per_core_pct),
            "mem_used_bytes": h.mem_used_bytes,
            "mem_total_bytes": h.mem_total_bytes,
            "swap_used_bytes": h.swap_used_bytes,
            "swap_total_bytes": h.swap_total_bytes,
            "load_avg": list(h.load_avg) if h.load_avg else None,
        },
        "gpus": [gpu_to_dict(g) for g in s.gpus],
        "processes": [
            {
                "gpu": p.gpu_index,
                "pid": p.pid,
                "kind": p.kind,
                "user": p.user,
                "gpu_mem_bytes": p.gpu_mem_bytes,
                "cpu_pct": p.cpu_pct,
                "rss_bytes": p.rss_bytes,
                "started": iso_utc(datetime.fromtimestamp(p.started, UTC)) if p.started else None,
                "command": p.command,
            }
            for p in s.processes
        ],
        "nvml_error": s.nvml_error,
    }


class SchemaError(ValueError):
    pass


def snapshot_from_dict(d: dict[str, Any], mono: float = 0.0, seq: int = 0) -> Snapshot:
    """Inverse of snapshot_to_dict, for replay. Raises SchemaError on anything malformed."""
    try:
        host = d["host"]
        gpus = []
        for g in d["gpus"]:
            info = DeviceInfo(**{k: g.get(k) for k in _INFO_FIELDS})
            sample_kwargs = {k: g.get(k) for k in _SAMPLE_FIELDS}
            mask = g.get("throttle_mask")
            if mask is None and g.get("throttle_reasons") is not None:
                mask = mask_from_keys(g["throttle_reasons"])
            gpus.append(GpuSample(info=info, throttle_mask=mask, **sample_kwargs))
        procs = []
        for p in d.get("processes") or []:
            started = parse_iso(p["started"]).timestamp() if p.get("started") else None
            procs.append(GpuProcess(
                gpu_index=p["gpu"], pid=p["pid"], gpu_mem_bytes=p.get("gpu_mem_bytes"),
                kind=p.get("kind", "compute"), user=p.get("user"), command=p.get("command"),
                cpu_pct=p.get("cpu_pct"), rss_bytes=p.get("rss_bytes"), started=started))
        load = host.get("load_avg")
        return Snapshot(
            time=parse_iso(d["time"]),
            mono=mono,
            seq=seq,
            system=SystemInfo(d.get("driver_version"), d.get("nvml_version"),
                              d.get("cuda_driver_version")),
            host=HostSample(
                hostname=host.get("hostname", "?"),
                cpu_pct=host.get("cpu_pct"),
                cpu_per_core_pct=tuple(host.get("cpu_per_core_pct") or ()),
                mem_used_bytes=host.get("mem_used_bytes"),
                mem_total_bytes=host.get("mem_total_bytes"),
                swap_used_bytes=host.get("swap_used_bytes"),
                swap_total_bytes=host.get("swap_total_bytes"),
                load_avg=tuple(load) if load else None,  # type: ignore[arg-type]
            ),
            gpus=tuple(gpus),
            processes=tuple(procs),
            nvml_error=d.get("nvml_error"),
        )
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise SchemaError(f"not a gputui snapshot ({type(exc).__name__}: {exc})") from exc
