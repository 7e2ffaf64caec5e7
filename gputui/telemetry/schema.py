"""Snapshot ⇄ JSON: the public schema of `gputui snapshot --json` and of recordings."""

from __future__ import annotations

from dataclasses import fields
from datetime import UTC, datetime
from typing import Any

from gputui.telemetry.gpm import ACTIVITY_FIELDS
from gputui.telemetry.mig import MigDevice, MigProcess
from gputui.telemetry.model import (
    DeviceInfo,
    GpuEnergy,
    GpuEvent,
    GpuProcess,
    GpuSample,
    HostSample,
    JobReading,
    NvLink,
    Snapshot,
    SystemInfo,
    iso_utc,
    parse_iso,
)
from gputui.telemetry.throttle import is_throttling, mask_from_keys, reason_keys, state_words

SCHEMA_VERSION = 1

_INFO_FIELDS = [f.name for f in fields(DeviceInfo)]


def _in_public_order(cls: type, leave_out: tuple[str, ...], activity_after: str) -> list[str]:
    """A record's fields as the JSON has always listed them: its own, with the GPM
    activity ratios (GpmActivity's, which dataclasses puts first) after `activity_after`."""
    own = [f.name for f in fields(cls)
           if f.name not in ACTIVITY_FIELDS and f.name not in leave_out]
    at = own.index(activity_after) + 1
    return [*own[:at], *ACTIVITY_FIELDS, *own[at:]]


_SAMPLE_FIELDS = _in_public_order(
    GpuSample, ("info", "throttle_mask", "nvlink_links", "mig_devices"), "violation_thermal_frac")


_ENERGY_KEYS = ("energy_seen_j", "energy_idle_j", "energy_unattributed_j", "idle_power_w")


def gpu_to_dict(g: GpuSample, energy: GpuEnergy | None = None) -> dict[str, Any]:
    """One GPU in the public JSON, with its energy as shared out (null: none yet)."""
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
    d["nvlink_links"] = None if g.nvlink_links is None else [
        {"link": n.link, "active": n.active, "tx_bps": n.tx_bps, "rx_bps": n.rx_bps}
        for n in g.nvlink_links]
    d["mig_devices"] = [mig_to_dict(m) for m in g.mig_devices]
    for key in _ENERGY_KEYS:
        d[key] = None if energy is None else getattr(energy, key)
    return d


_MIG_FIELDS = _in_public_order(MigDevice, ("processes",), "mem_total_bytes")


def mig_to_dict(m: MigDevice) -> dict[str, Any]:
    """One MIG device in the public JSON: every MigDevice field (null where N/A), and
    `processes` as [{"pid", "gpu_mem_bytes"}] (null when they could not be read)."""
    d: dict[str, Any] = {name: getattr(m, name) for name in _MIG_FIELDS}
    d["processes"] = None if m.processes is None else [
        {"pid": p.pid, "gpu_mem_bytes": p.gpu_mem_bytes} for p in m.processes]
    return d


def snapshot_to_dict(s: Snapshot) -> dict[str, Any]:
    h = s.host
    return {
        "time": s.time_iso,
        "driver_version": s.system.driver_version,
        "nvml_version": s.system.nvml_version,
        "cuda_driver_version": s.system.cuda_driver_version,
        "amd_driver_version": s.system.amd_driver_version,
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
        "gpus": [gpu_to_dict(g, s.energy_of(g.index)) for g in s.gpus],
        "processes": [process_to_dict(p) for p in s.processes],
        "nvml_error": s.nvml_error,
        # XID / ECC events NVML reported since the previous snapshot (a recording keeps
        # each once, on the line of the tick it arrived in).
        "events": [{"gpu": e.gpu_index, "kind": e.kind, "xid": e.xid, "meaning": e.meaning,
                    "time": iso_utc(e.time)} for e in s.events],
        # Training jobs reporting with gputui.track (gputui.telemetry.jobs).
        "jobs": [job_to_dict(j) for j in s.jobs],
        # Jobs that ended since the previous snapshot, with their last figures.
        "jobs_ended": [job_to_dict(j) for j in s.jobs_ended],
    }


def process_to_dict(p: GpuProcess) -> dict[str, Any]:
    return {
        "gpu": p.gpu_index,
        "pid": p.pid,
        "kind": p.kind,
        "user": p.user,
        "gpu_mem_bytes": p.gpu_mem_bytes,
        "cpu_pct": p.cpu_pct,
        "rss_bytes": p.rss_bytes,
        "started": iso_utc(datetime.fromtimestamp(p.started, UTC)) if p.started else None,
        "command": p.command,
        "sm_util_pct": p.sm_util_pct,
        "mem_util_pct": p.mem_util_pct,
        "enc_util_pct": p.enc_util_pct,
        "dec_util_pct": p.dec_util_pct,
        "container": p.container,
        # Where it runs (gputui.telemetry.container) and its energy
        # (gputui.telemetry.energy).
        "container_id": p.container_id,
        "pod": p.pod,
        "namespace": p.namespace,
        "pod_uid": p.pod_uid,
        "qos": p.qos,
        "power_w": p.power_w,
        "energy_j": p.energy_j,
        "energy_method": p.energy_method,
        "energy_estimate": p.energy_estimate,
    }


def job_to_dict(j: JobReading) -> dict[str, Any]:
    return {"pid": j.pid, "name": j.name, "gpus": list(j.gpus), "step": j.step,
            "samples": j.samples, "tokens": j.tokens, "samples_per_s": j.samples_per_s,
            "tokens_per_s": j.tokens_per_s, "step_time_s": j.step_time_s,
            "updated": None if j.updated is None else iso_utc(j.updated),
            "cuda_visible_devices": j.cuda_visible_devices,
            "energy_j": j.energy_j, "power_w": j.power_w,
            "energy_per_step_j": j.energy_per_step_j,
            "energy_per_sample_j": j.energy_per_sample_j,
            "energy_per_token_j": j.energy_per_token_j,
            "energy_estimate": j.energy_estimate,
            "energy_by_gpu": [{"gpu": gpu, "energy_j": e} for gpu, e in j.energy_by_gpu]}


_JOB_TYPES: dict[str, tuple[type | tuple[type, ...], bool]] = {
    "pid": (int, False), "name": (str, False), "step": (int, False), "samples": (int, True),
    "tokens": (int, True), "samples_per_s": ((int, float), True),
    "tokens_per_s": ((int, float), True), "step_time_s": ((int, float), True),
    "updated": (str, True), "cuda_visible_devices": (str, True),
    "energy_j": ((int, float), True), "power_w": ((int, float), True),
    "energy_per_step_j": ((int, float), True), "energy_per_sample_j": ((int, float), True),
    "energy_per_token_j": ((int, float), True), "energy_estimate": (bool, True)}
_JOB_GPU_ENERGY_TYPES: dict[str, tuple[type | tuple[type, ...], bool]] = {
    "gpu": (int, False), "energy_j": ((int, float), False)}


def _job(i: int, j: dict[str, Any]) -> JobReading:
    _check(f"jobs[{i}]", j, _JOB_TYPES)
    gpus = j.get("gpus") or []
    if not all(isinstance(g, int) and not isinstance(g, bool) for g in gpus):
        raise SchemaError(f"jobs[{i}].gpus holds something that is not a GPU index")
    by_gpu = j.get("energy_by_gpu") or []
    for k, e in enumerate(by_gpu):
        _check(f"jobs[{i}].energy_by_gpu[{k}]", e, _JOB_GPU_ENERGY_TYPES)
    return JobReading(
        pid=j["pid"], name=j["name"], gpus=tuple(gpus), step=j["step"],
        samples=j.get("samples") or 0, tokens=j.get("tokens") or 0,
        samples_per_s=j.get("samples_per_s"), tokens_per_s=j.get("tokens_per_s"),
        step_time_s=j.get("step_time_s"),
        updated=parse_iso(j["updated"]) if j.get("updated") else None,
        cuda_visible_devices=j.get("cuda_visible_devices"),
        energy_j=j.get("energy_j"), power_w=j.get("power_w"),
        energy_per_step_j=j.get("energy_per_step_j"),
        energy_per_sample_j=j.get("energy_per_sample_j"),
        energy_per_token_j=j.get("energy_per_token_j"),
        energy_estimate=j.get("energy_estimate"),
        energy_by_gpu=tuple((e["gpu"], float(e["energy_j"])) for e in by_gpu))


class SchemaError(ValueError):
    pass


_EVENT_TYPES: dict[str, tuple[type | tuple[type, ...], bool]] = {
    "gpu": (int, False), "kind": (str, False), "xid": (int, True), "meaning": (str, True),
    "time": (str, False)}


_NVLINK_TYPES: dict[str, tuple[type | tuple[type, ...], bool]] = {
    "link": (int, False), "active": (bool, False), "tx_bps": ((int, float), True),
    "rx_bps": ((int, float), True)}


def _nvlink(where: str, n: dict[str, Any]) -> NvLink:
    _check(where, n, _NVLINK_TYPES)
    return NvLink(link=n["link"], active=n["active"], tx_bps=n.get("tx_bps"),
                  rx_bps=n.get("rx_bps"))


_MIG_PROC_TYPES: dict[str, tuple[type | tuple[type, ...], bool]] = {
    "pid": (int, False), "gpu_mem_bytes": (int, True)}


def _mig(where: str, m: dict[str, Any]) -> MigDevice:
    for key in ("index", "uuid", "name"):
        if key not in m:
            raise SchemaError(f"{where} has no {key}")
    _check(where, m, _MIG_TYPES)
    procs = m.get("processes")
    if procs is not None:
        for k, p in enumerate(procs):
            _check(f"{where}.processes[{k}]", p, _MIG_PROC_TYPES)
    return MigDevice(
        **{k: m.get(k) for k in _MIG_FIELDS},
        processes=None if procs is None else tuple(
            MigProcess(p["pid"], p.get("gpu_mem_bytes")) for p in procs))


def _event(i: int, e: dict[str, Any]) -> GpuEvent:
    _check(f"events[{i}]", e, _EVENT_TYPES)
    return GpuEvent(gpu_index=e["gpu"], kind=e["kind"], time=parse_iso(e["time"]),
                    xid=e.get("xid"), meaning=e.get("meaning") or "")


def _kind(annotation: str) -> tuple[type | tuple[type, ...], bool]:
    """(accepted JSON types, None allowed) for a dataclass field's annotation text."""
    optional = "None" in annotation
    if annotation.startswith("float"):
        return (int, float), optional
    if annotation.startswith("int"):
        return int, optional
    if annotation.startswith("bool"):
        return bool, optional
    return str, optional


def _fields_of(cls: type, names: list[str]) -> dict[str, tuple[type | tuple[type, ...], bool]]:
    types = {f.name: f.type for f in fields(cls)}
    return {n: _kind(str(types[n])) for n in names}


_INFO_TYPES = _fields_of(DeviceInfo, _INFO_FIELDS)
_SAMPLE_TYPES = _fields_of(GpuSample, _SAMPLE_FIELDS)
_MIG_TYPES = _fields_of(MigDevice, _MIG_FIELDS)
_HOST_NUMBERS = ("cpu_pct", "mem_used_bytes", "mem_total_bytes", "swap_used_bytes",
                 "swap_total_bytes")
_PROC_TYPES: dict[str, tuple[type | tuple[type, ...], bool]] = {
    "gpu": (int, False), "pid": (int, False), "gpu_mem_bytes": (int, True),
    "cpu_pct": ((int, float), True), "rss_bytes": (int, True), "user": (str, True),
    "command": (str, True), "kind": (str, True), "started": (str, True),
    "sm_util_pct": (int, True), "mem_util_pct": (int, True), "enc_util_pct": (int, True),
    "dec_util_pct": (int, True), "container": (str, True), "container_id": (str, True),
    "pod": (str, True), "namespace": (str, True), "pod_uid": (str, True), "qos": (str, True),
    "power_w": ((int, float), True), "energy_j": ((int, float), True),
    "energy_method": (str, True), "energy_estimate": (bool, True)}


def _check(where: str, d: dict[str, Any],
           types: dict[str, tuple[type | tuple[type, ...], bool]]) -> None:
    """A value of the wrong JSON type (a string where a number belongs) is a SchemaError
    naming the field, not a crash later in whatever shows it."""
    for name, (want, optional) in types.items():
        v = d.get(name)
        if v is None:
            if optional or name not in d:
                continue
        elif isinstance(v, want) and not (isinstance(v, bool) and want is not bool):
            continue
        raise SchemaError(f"{where}.{name} is {json_type(v)}, not {type_words(want)}")


def json_type(v: object) -> str:
    return {type(None): "null", bool: "a boolean", str: "a string", int: "a number",
            float: "a number", list: "a list", dict: "an object"}.get(type(v), "a value")


def type_words(want: type | tuple[type, ...]) -> str:
    if want is bool:
        return "true/false"
    return "text" if want is str else "a number"


def snapshot_from_dict(d: dict[str, Any], mono: float = 0.0, seq: int = 0) -> Snapshot:
    """Inverse of snapshot_to_dict, for replay. Raises SchemaError on anything malformed."""
    try:
        host = d["host"]
        _check("host", host, {k: ((int, float), True) for k in _HOST_NUMBERS})
        for key in ("cpu_per_core_pct", "load_avg"):
            if not all(isinstance(x, int | float) and not isinstance(x, bool)
                       for x in host.get(key) or ()):
                raise SchemaError(f"host.{key} holds something that is not a number")
        gpus = []
        energy: list[GpuEnergy] = []
        for i, g in enumerate(d["gpus"]):
            _check(f"gpus[{i}]", g, _INFO_TYPES)
            _check(f"gpus[{i}]", g, _SAMPLE_TYPES)
            # Recordings from before AMD GPUs were read: every GPU was NVIDIA's.
            info = DeviceInfo(**{**{k: g.get(k) for k in _INFO_FIELDS},
                                 "vendor": g.get("vendor") or "nvidia"})
            sample_kwargs = {k: g.get(k) for k in _SAMPLE_FIELDS}
            # Recordings from before stale readings existed: current values.
            sample_kwargs["stale"] = bool(g.get("stale") or False)
            mask = g.get("throttle_mask")
            if mask is None and g.get("throttle_reasons") is not None:
                mask = mask_from_keys(g["throttle_reasons"])
            links = g.get("nvlink_links")
            sample_kwargs["nvlink_links"] = None if links is None else tuple(
                _nvlink(f"gpus[{i}].nvlink_links[{j}]", n) for j, n in enumerate(links))
            sample_kwargs["mig_devices"] = tuple(
                _mig(f"gpus[{i}].mig_devices[{j}]", m)
                for j, m in enumerate(g.get("mig_devices") or []))
            gpus.append(GpuSample(info=info, throttle_mask=mask, **sample_kwargs))
            _check(f"gpus[{i}]", g, {k: ((int, float), True) for k in _ENERGY_KEYS})
            if g.get("energy_seen_j") is not None:
                energy.append(GpuEnergy(info.index, g["energy_seen_j"],
                                        g.get("energy_idle_j") or 0.0,
                                        g.get("energy_unattributed_j") or 0.0,
                                        g.get("idle_power_w")))
        procs = []
        for i, p in enumerate(d.get("processes") or []):
            _check(f"processes[{i}]", p, _PROC_TYPES)
            started = parse_iso(p["started"]).timestamp() if p.get("started") else None
            procs.append(GpuProcess(
                gpu_index=p["gpu"], pid=p["pid"], gpu_mem_bytes=p.get("gpu_mem_bytes"),
                kind=p.get("kind", "compute"), user=p.get("user"), command=p.get("command"),
                cpu_pct=p.get("cpu_pct"), rss_bytes=p.get("rss_bytes"), started=started,
                sm_util_pct=p.get("sm_util_pct"), mem_util_pct=p.get("mem_util_pct"),
                enc_util_pct=p.get("enc_util_pct"), dec_util_pct=p.get("dec_util_pct"),
                container=p.get("container"), container_id=p.get("container_id"),
                pod=p.get("pod"), namespace=p.get("namespace"), pod_uid=p.get("pod_uid"),
                qos=p.get("qos"), power_w=p.get("power_w"), energy_j=p.get("energy_j"),
                energy_method=p.get("energy_method"),
                energy_estimate=p.get("energy_estimate")))
        load = host.get("load_avg")
        return Snapshot(
            time=parse_iso(d["time"]),
            mono=mono,
            seq=seq,
            system=SystemInfo(d.get("driver_version"), d.get("nvml_version"),
                              d.get("cuda_driver_version"), d.get("amd_driver_version")),
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
            events=tuple(_event(i, e) for i, e in enumerate(d.get("events") or [])),
            jobs=tuple(_job(i, j) for i, j in enumerate(d.get("jobs") or [])),
            jobs_ended=tuple(_job(i, j) for i, j in enumerate(d.get("jobs_ended") or [])),
            gpu_energy=tuple(energy),
        )
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise SchemaError(f"not a gputui snapshot ({type(exc).__name__}: {exc})") from exc
