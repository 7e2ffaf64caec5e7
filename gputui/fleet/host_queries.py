"""The PromQL behind the hosts-first view: Prometheus does the aggregating.

Each figure of a host's row is one expression aggregated `by (instance)`, so what
Prometheus sends back, and what the view parses, grows with the hosts, not with their
GPUs' series. All figures travel in one instant query: each expression is tagged with a
`figure` label (`label_replace`) and the tagged results joined with `or`, which never
collides because no two figures share a tag. The figures that select every GPU's series
are also written as recording rules (`recording_rules`, deploy/prometheus/gputui-fleet.yml,
each rule labelled with its figure): where Prometheus has them, the query reads their
series instead of aggregating at each refresh. Hosts are Prometheus' `instance` (as the
per-GPU reader groups them: two exporters on one machine stay apart), named by their
`hostname` (or older `Hostname`) label.

Both GPU families are covered, NVIDIA's under dcgm-exporter's names (`DCGM_FI_*`) and
AMD's under AMD Device Metrics Exporter's (`gpu_*`), joined with `or` GPU by GPU (their
label sets differ, so each GPU counts once), so dcgm-exporter and AMD's own exporter work
as well as gputui's. Where only gputui's own series say it (lost and stale GPUs, XIDs per
event, the training jobs), those are read; a host served by another exporter shows none
(its XIDs N/A). The thresholds are `summary`'s, the same as for hosts read directly.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from gputui.fleet import metric_names as mn
from gputui.fleet.model import FiringAlert, HostState, HostSummary
from gputui.fleet.readings import GPU_SERIES, HOST_SERIES, throttle_mask
from gputui.fleet.summary import HELD_MEMORY_BYTES, IDLE_BELOW_PCT, IDLE_WINDOW_S, is_hot
from gputui.telemetry.throttle import THROTTLE_MASK, is_throttling

MIB = 1024 * 1024
FIGURE_LABEL = "figure"
EXPORTER_LABEL = "exporter"  # on the GPU count: "gputui" where gputui's own series count them
# What a host row is grouped by; `job` and the host name come with the GPU count only.
BY = "instance"
NAME_LABELS = ", ".join((BY, "job", *mn.HOSTNAME_LABELS))
# A GPU's own series, not a MIG instance's (those carry GPU_I_ID).
_GPU_WIDE = '{%s=""}' % mn.MIG_INSTANCE_LABEL  # noqa: UP031


def _either(*exprs: str) -> str:
    """One value per GPU from whichever family serves it (the first that does)."""
    return "(" + " or ".join(exprs) + ")"


UTIL = _either(mn.GPU_UTIL.name, mn.AMD_GFX_ACTIVITY.name)
TEMP = _either(mn.GPU_TEMP.name, mn.AMD_JUNCTION_TEMP.name, mn.AMD_EDGE_TEMP.name)
POWER = _either(mn.POWER_USAGE.name, mn.AMD_PACKAGE_POWER.name, mn.AMD_POWER_USAGE.name)
MASK = _either(mn.CLOCK_THROTTLE_REASONS.name, mn.CLOCKS_EVENT_REASONS.name,
               mn.AMD_THROTTLE_MASK)
_USED = mn.FB_USED.name + _GPU_WIDE
_FREE = mn.FB_FREE.name + _GPU_WIDE
# MiB, both families (AMD's "MB" is amd-smi's MiB, `metric_names.MB_UNIT`).
MEM_USED = _either(_USED, mn.AMD_USED_VRAM.name)
MEM_TOTAL = _either(mn.FB_TOTAL.name + _GPU_WIDE, mn.AMD_TOTAL_VRAM.name)
JOB_RATES = _either(mn.JOB_SAMPLES_PER_SECOND, mn.JOB_TOKENS_PER_SECOND)
XIDS = mn.XID_EVENTS + "_total"
_IDLE = f"{IDLE_WINDOW_S:.0f}s"
_HELD_MIB = HELD_MEMORY_BYTES // MIB


@dataclass(frozen=True, slots=True)
class Figure:
    name: str  # its `figure` tag
    expr: str  # PromQL: at most a few series per host, each with an `instance` label
    # Selects a series per GPU (or per host) of every host: what a recording rule takes
    # off each poll. The others select only the series of hosts where something is
    # wrong (an XID, a broken NVML, a firing alert) or a job runs, and stay live.
    heavy: bool = True

    @property
    def record(self) -> str:
        """Its recording rule's name (deploy/prometheus/gputui-fleet.yml)."""
        return RECORD_PREFIX + self.name


RECORD_PREFIX = "gputui_host:"
_USED_TOTAL = f"sum by ({BY}) ({_USED}) + sum by ({BY}) ({_FREE})"

FIGURES: tuple[Figure, ...] = (
    # Every GPU: gputui serves gputui_gpu_lost for each (lost or not); other exporters
    # only the readings of the GPUs that have them.
    Figure("gpus", f'label_replace(count by ({NAME_LABELS}) ({mn.GPU_LOST}), "{EXPORTER_LABEL}", '
                   f'"gputui", "", "") or on ({BY}) count by ({NAME_LABELS}) ({UTIL})'),
    Figure("util_mean", f"avg by ({BY}) ({UTIL})"),
    Figure("util_min", f"min by ({BY}) ({UTIL})"),
    Figure("busy", f"count by ({BY}) ({UTIL} >= {IDLE_BELOW_PCT:g})"),
    Figure("mem_used_mib", f"sum by ({BY}) ({MEM_USED})"),
    # dcgm-exporter serves no total by default: used + free there.
    Figure("mem_total_mib", f"sum by ({BY}) ({MEM_TOTAL}) or {_USED_TOTAL}"),
    Figure("power_w", f"sum by ({BY}) ({POWER})"),
    # The hottest GPU, and which it is (`gpu`: gputui's and dcgm-exporter's index;
    # `gpu_id`: AMD's exporter's).
    Figure("hottest_c", f"max by ({BY}, gpu, gpu_id) (topk by ({BY}) (1, {TEMP}))"),
    Figure("margin_c", f"min by ({BY}) ({mn.SLOWDOWN_TEMP.name} - {mn.GPU_TEMP.name})"),
    # Bitmasks cannot be OR-ed in PromQL: count the GPUs per distinct mask instead (a
    # host has a few), and decode them here.
    # (Only masks with a reason besides "GPU idle" (1): most hosts then send none.)
    Figure("masks", f'count_values by ({BY}) ("mask", {MASK} > 1)'),
    # These, like busy and idle_held, are absent for a host where they are 0.
    Figure("lost", f"sum by ({BY}) ({mn.GPU_LOST}) > 0"),
    Figure("stale", f"sum by ({BY}) ({mn.GPU_STALE}) > 0"),
    Figure("idle_held", f"count by ({BY}) ("
                        f"avg_over_time({mn.GPU_UTIL.name}[{_IDLE}]) < {IDLE_BELOW_PCT:g} "
                        f"and {_USED} >= {_HELD_MIB} "
                        f"or avg_over_time({mn.AMD_GFX_ACTIVITY.name}[{_IDLE}]) "
                        f"< {IDLE_BELOW_PCT:g} and {mn.AMD_USED_VRAM.name} >= {_HELD_MIB})"),
    # Targets Prometheus could not scrape (`up` is per target: one per host).
    # Targets Prometheus could not scrape (`up` is per target: one per host), and
    # exporters that answer without GPU data; both are absent for a host that is fine.
    Figure("down", f"min by ({BY}, job) (up) == 0"),
    Figure("no_gpu_data", f"min by ({BY}) ({mn.UP}) == 0"),
    Figure("nvml_error", f"max by ({BY}, reason) ({mn.NVML_ERROR_INFO})", heavy=False),
    # XID events in the last hour. gputui makes an XID's counter at its first event, so a
    # counter younger than the hour counts whole (as the shipped GpuXidError rule does).
    # Only GPUs that had an XID have these series: few.
    Figure("xids_1h", f"sum by ({BY}) (({XIDS} unless {XIDS} offset 1h) "
                      f"or increase({XIDS}[1h]))", heavy=False),
    # A job has a series per GPU it runs on, each with its whole rate: one per pid.
    Figure("jobs", f"count by ({BY}) (count by ({BY}, pid) ({JOB_RATES}))", heavy=False),
    Figure("samples_per_s", f"sum by ({BY}) (max by ({BY}, pid) "
                            f"({mn.JOB_SAMPLES_PER_SECOND}))", heavy=False),
    Figure("tokens_per_s", f"sum by ({BY}) (max by ({BY}, pid) ({mn.JOB_TOKENS_PER_SECOND}))",
           heavy=False),
    Figure("alerts", f'count by ({BY}, alertname, severity) (ALERTS{{alertstate="firing"}})',
           heavy=False),
)


def _tagged(f: Figure) -> str:
    return f'label_replace({f.expr}, "{FIGURE_LABEL}", "{f.name}", "", "")'


def fleet_query(*, recorded: bool) -> str:
    """Every figure of every host in one instant query. `recorded`: the heavy figures from
    their recording rules' series (one selection; each carries its `figure` label).

    The few series come first: `or` looks up every series on its right among those on
    its left, so the large part goes last."""
    light = [_tagged(f) for f in FIGURES if not f.heavy]
    if not recorded:
        return " or ".join([*light, *(_tagged(f) for f in FIGURES if f.heavy)])
    # `* 1` drops the recorded series' names, which need not travel.
    return " or ".join([*light, f'{{__name__=~"{RECORD_PREFIX}.+"}} * 1'])


def history_query(step_s: float, *, recorded: bool) -> str:
    """Each host's mean utilisation over each step (a range query with that step)."""
    w = f"[{step_s:.0f}s]"
    if recorded:
        return f"avg_over_time({RECORD_PREFIX}util_mean{w})"
    return (f"avg by ({BY}) (avg_over_time({mn.GPU_UTIL.name}{w}) "
            f"or avg_over_time({mn.AMD_GFX_ACTIVITY.name}{w}))")


def recording_rules() -> str:
    """deploy/prometheus/gputui-fleet.yml: the heavy figures as recording rules."""
    lines = [
        "# Recording rules for `gputui fleet --prometheus`: each host's figures, aggregated",
        "# once per evaluation instead of at every refresh of every open fleet view. Without",
        "# them the view aggregates the same expressions itself (slower at hundreds of hosts).",
        "# Generated from gputui/fleet/host_queries.py (tests/fleet keep it equal).",
        "groups:",
        "  - name: gputui-fleet",
        "    rules:",
    ]
    for f in FIGURES:
        if f.heavy:
            lines += [f"      - record: {f.record}", "        expr: |", f"          {f.expr}",
                      "        labels:", f"          {FIGURE_LABEL}: {f.name}"]
    return "\n".join(lines) + "\n"


OPEN_HOST_SERIES = (*GPU_SERIES, *HOST_SERIES, mn.JOB_SAMPLES_PER_SECOND,
                    mn.JOB_TOKENS_PER_SECOND)


def promql_string(s: str) -> str:
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def host_gpus_query(instance: str | None) -> str:
    """Every series the per-GPU view reads: of one host (`instance`), or of all (None)."""
    where = "" if instance is None else f", {BY}={promql_string(instance)}"
    return '{__name__=~"%s"%s}' % ("|".join(OPEN_HOST_SERIES), where)  # noqa: UP031


# --- reading the answer ---------------------------------------------------------------


@dataclass(slots=True)
class HostFigures:
    """One host's figures while the answer is read."""

    values: dict[str, float] = field(default_factory=dict)
    name: str | None = None
    job: str | None = None
    hottest_gpu: str | None = None
    masks: dict[int | None, int] = field(default_factory=dict)
    alerts: list[FiringAlert] = field(default_factory=list)
    down: bool = False
    nvml_error: str | None = None
    gputui: bool = False  # counted by gputui's own series (which also say lost, stale, XIDs)


def _text(v: object) -> str | None:
    return v if isinstance(v, str) and v else None


def collect(result: Iterable[Any]) -> dict[str, HostFigures]:
    """The figures of each host (by instance) from the fleet query's answer, read from
    Prometheus' JSON items as they are (this runs over every host at every refresh)."""
    hosts: dict[str, HostFigures] = {}
    for item in result:
        try:
            labels = item["metric"]
            instance = labels[BY]
            figure = labels[FIGURE_LABEL]
            v = float(item["value"][1])
        except (KeyError, IndexError, TypeError, ValueError):
            continue
        if not isinstance(instance, str):
            continue
        h = hosts.get(instance)
        if h is None:
            h = hosts[instance] = HostFigures()
        if figure == "gpus":
            h.name = h.name or next(
                (n for n in (_text(labels.get(k)) for k in mn.HOSTNAME_LABELS) if n), None)
            h.job = _text(labels.get("job")) or h.job
            h.gputui = labels.get(EXPORTER_LABEL) == "gputui"
        elif figure == "down":
            h.down = True
            h.job = _text(labels.get("job")) or h.job
            continue
        elif figure == "nvml_error":
            h.nvml_error = _text(labels.get("reason")) or "NVML unavailable"
            continue
        elif figure == "hottest_c":
            h.hottest_gpu = _text(labels.get("gpu")) or _text(labels.get("gpu_id"))
        elif figure == "masks":
            mask = throttle_mask(_float(labels.get("mask")))
            h.masks[mask] = h.masks.get(mask, 0) + int(v)
            continue
        elif figure == "alerts":
            h.alerts.append(FiringAlert(_text(labels.get("alertname")) or "?",
                                        _text(labels.get("severity")) or "", int(v)))
            continue
        if math.isfinite(v):
            h.values[figure] = v
    return hosts


def _float(text: object) -> float | None:
    try:
        return float(text) if isinstance(text, str) else None
    except ValueError:
        return None


def _count(v: float | None) -> int | None:
    return None if v is None else round(v)


def summary_of(instance: str, h: HostFigures, *, name: str | None, hot_temp_c: float,
               last_seen: datetime | None,
               history: tuple[float | None, ...] | None = None) -> HostSummary:
    """An answering host's row (a down one is made by the poller, which knows why)."""
    v = h.values
    gpus = _count(v.get("gpus")) or 0
    throttling = 0
    mask = 0
    for m, n in h.masks.items():
        if is_throttling(m):
            throttling += n
            mask |= (m or 0) & THROTTLE_MASK
    hottest, margin = v.get("hottest_c"), v.get("margin_c")
    no_gpu = h.nvml_error or ("no GPU data" if "no_gpu_data" in v else None)
    used, total = v.get("mem_used_mib"), v.get("mem_total_mib")
    has_util = "util_mean" in v
    return HostSummary(
        target=instance, name=name or instance, state=HostState.UP,
        no_gpu_data=no_gpu if not gpus else None, last_seen=last_seen, gpus=gpus,
        busy=(_count(v.get("busy")) or 0) if has_util else None,
        util_mean_pct=v.get("util_mean"), util_min_pct=v.get("util_min"),
        mem_used_bytes=None if used is None else int(used * MIB),
        mem_total_bytes=None if total is None else int(total * MIB),
        power_w=v.get("power_w"), hottest_c=hottest, hottest_gpu=h.hottest_gpu,
        margin_c=margin, hot=is_hot(hottest, margin, hot_temp_c),
        throttling=throttling, throttle_mask=mask,
        lost=_count(v.get("lost")) or 0, stale=_count(v.get("stale")) or 0,
        idle_held=(_count(v.get("idle_held")) or 0) if has_util else None,
        # Counted from gputui's own XID counters: N/A for another exporter's host.
        xids_1h=(_count(v.get("xids_1h")) or 0) if h.gputui else None,
        jobs=_count(v.get("jobs")), samples_per_s=v.get("samples_per_s"),
        tokens_per_s=v.get("tokens_per_s"),
        alerts=tuple(sorted(h.alerts, key=lambda a: (a.severity != "critical", a.name))),
        history=history,
    )
