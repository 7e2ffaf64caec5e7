"""Prometheus' HTTP API, as the fleet view reads it: instant and range queries, and why a
target's last scrape failed. Each call is one GET with one deadline (`fetch`)."""

from __future__ import annotations

import json
import math
import urllib.parse
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from gputui.fleet.errors import ScrapeError
from gputui.fleet.fetch import DEFAULT_TIMEOUT_S, fetch_text
from gputui.fleet.page import Series


def api_url(base: str, path: str, params: dict[str, str]) -> str:
    return base.rstrip("/") + path + "?" + urllib.parse.urlencode(params)


def _data(text: str, result_type: str) -> list[Any]:
    """The `result` list of a successful answer of `result_type`; ScrapeError otherwise."""
    try:
        doc = json.loads(text)
    except ValueError:
        raise ScrapeError("Prometheus answered with something that is not JSON",
                          down=False) from None
    if not isinstance(doc, dict) or doc.get("status") != "success":
        err = doc.get("error") if isinstance(doc, dict) else None
        raise ScrapeError(f"Prometheus query failed: {err or 'unexpected answer'}", down=False)
    data = doc.get("data") or {}
    if data.get("resultType") != result_type or not isinstance(data.get("result"), list):
        raise ScrapeError("Prometheus answered with an unexpected result type", down=False)
    return data["result"]


def query_result(base: str, query: str, timeout: float = DEFAULT_TIMEOUT_S,
                 auth: str | None = None) -> list[Any]:
    """An instant query's `result` as Prometheus sent it ({"metric": …, "value": …}
    items, unchecked); ScrapeError when the server fails."""
    text = fetch_text(api_url(base, "/api/v1/query", {"query": query}), timeout, auth)
    return _data(text, "vector")


def query_prometheus(base: str, query: str, timeout: float = DEFAULT_TIMEOUT_S,
                     auth: str | None = None) -> list[Series]:
    """The series of an instant query; ScrapeError when the server fails."""
    return list(_series(query_result(base, query, timeout, auth)))


def _series(result: Iterable[Any]) -> Iterable[Series]:
    for item in result:
        try:
            labels = {str(k): str(v) for k, v in item["metric"].items()}
            value = float(item["value"][1])
        except (KeyError, IndexError, TypeError, ValueError, AttributeError):
            continue
        yield Series(str(labels.pop("__name__", "")), labels, value)


@dataclass(frozen=True, slots=True)
class RangeSeries:
    """One series of a range query: its labels and its finite (time, value) points."""

    labels: dict[str, str]
    points: tuple[tuple[float, float], ...]


def query_range(base: str, query: str, *, start: float, end: float, step: float,
                timeout: float = DEFAULT_TIMEOUT_S, auth: str | None = None
                ) -> list[RangeSeries]:
    """A range query from `start` to `end` (Unix seconds) every `step` seconds."""
    params = {"query": query, "start": f"{start:.3f}", "end": f"{end:.3f}",
              "step": f"{step:g}"}
    text = fetch_text(api_url(base, "/api/v1/query_range", params), timeout, auth)
    out = []
    for item in _data(text, "matrix"):
        try:
            labels = {str(k): str(v) for k, v in item["metric"].items()}
            points = tuple((float(t), float(v)) for t, v in item["values"])
        except (KeyError, TypeError, ValueError, AttributeError):
            continue
        out.append(RangeSeries(labels, tuple(p for p in points if math.isfinite(p[1]))))
    return out


# Prometheus' (Go's) words for a scrape that got no answer, as opposed to a bad one.
_UNREACHABLE = ("dial tcp", "connection refused", "context deadline exceeded", "i/o timeout",
                "no such host", "connection reset", "no route to host",
                "network is unreachable", ": EOF")


def unreachable(last_error: str) -> bool:
    """True when Prometheus' lastError says the target did not answer at all."""
    low = last_error.lower()
    return any(w.lower() in low for w in _UNREACHABLE)


def prometheus_target_errors(base: str, timeout: float = DEFAULT_TIMEOUT_S,
                             auth: str | None = None) -> dict[tuple[str, str], str]:
    """{(instance, job): lastError} for the active targets whose last scrape failed."""
    text = fetch_text(base.rstrip("/") + "/api/v1/targets?state=active", timeout, auth)
    try:
        doc = json.loads(text)
        targets = doc["data"]["activeTargets"]
    except (ValueError, KeyError, TypeError):
        raise ScrapeError("Prometheus answered /api/v1/targets with something unexpected",
                          down=False) from None
    out: dict[tuple[str, str], str] = {}
    for t in targets if isinstance(targets, list) else ():
        if not isinstance(t, dict):
            continue
        labels = t.get("labels") or {}
        err = t.get("lastError")
        if isinstance(labels, dict) and isinstance(err, str) and err.strip():
            out[(str(labels.get("instance", "")), str(labels.get("job", "")))] = err.strip()
    return out
