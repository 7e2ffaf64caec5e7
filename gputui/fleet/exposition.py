"""Prometheus text format 0.0.4, written as dcgm-exporter writes it."""

from __future__ import annotations

from collections.abc import Iterable

from prometheus_client.core import Metric
from prometheus_client.utils import floatToGoString

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


def _escape_label(value: str) -> str:
    return value.replace("\\", r"\\").replace("\n", r"\n").replace('"', r"\"")


def render(families: Iterable[Metric]) -> bytes:
    """The page for these metric families.

    prometheus_client's generate_latest renames every counter family to NAME_total,
    which would break the dcgm-exporter names that have no such suffix
    (DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION); here the TYPE line names the samples
    exactly as they are written.
    """
    out: list[str] = []
    for fam in families:
        name = fam.name
        if fam.type == "counter" and not any(s.name == name for s in fam.samples):
            name += "_total"
        typ = {"unknown": "untyped", "info": "gauge", "stateset": "gauge"}.get(fam.type, fam.type)
        doc = fam.documentation.replace("\\", r"\\").replace("\n", r"\n")
        out.append(f"# HELP {name} {doc}\n# TYPE {name} {typ}\n")
        for s in fam.samples:
            labels = ",".join(f'{k}="{_escape_label(v)}"' for k, v in s.labels.items())
            out.append(f"{s.name}{{{labels}}} " if labels else f"{s.name} ")
            out.append(floatToGoString(s.value) + "\n")
    return "".join(out).encode()
