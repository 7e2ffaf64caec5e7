"""Benchmark result documents: ids, atomic storage, history, comparison, export.

A result is a plain JSON object (the public contract is in the README and in
bench_protocol.md). Nothing here imports torch: the CLI and the TUI read and
compare results without paying for it.
"""

from __future__ import annotations

import csv
import io
import json
import os
import secrets
import tempfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from gputui.errors import GputuiError, UsageError

SCHEMA_VERSION = 1
STATUSES = ("ok", "cancelled", "failed")

Result = dict[str, Any]


# --------------------------------------------------------------------------- paths


def data_dir() -> Path:
    """`$GPUTUI_DATA_DIR` if set (tests, CI, shared boxes), else platformdirs' user data dir."""
    override = os.environ.get("GPUTUI_DATA_DIR")
    if override:
        return Path(override).expanduser()
    from platformdirs import user_data_dir

    return Path(user_data_dir("gputui"))


def results_dir() -> Path:
    return data_dir() / "results"


def profiles_dir() -> Path:
    return data_dir() / "profiles"


# --------------------------------------------------------------------------- ids and times


def utc_now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def new_id(now: datetime | None = None) -> str:
    """`20250102-030405-123-a1b2c3`: sorts by creation time; the random tail avoids clashes
    between runs started in the same millisecond (CI matrices, several terminals)."""
    t = (now or datetime.now(UTC)).astimezone(UTC)
    return f"{t:%Y%m%d-%H%M%S}-{t.microsecond // 1000:03d}-{secrets.token_hex(3)}"


def _valid_id(result_id: str) -> bool:
    return bool(result_id) and all(c.isalnum() or c in "-_." for c in result_id) and (
        not result_id.startswith(".")
    )


# --------------------------------------------------------------------------- documents


def empty_result(result_id: str, spec: Mapping[str, Any]) -> Result:
    """Every key of the contract, with "not measured" values; the worker's result fills it."""
    return {
        "schema": SCHEMA_VERSION,
        "id": result_id,
        "benchmark": spec.get("benchmark"),
        "model": spec.get("model"),
        "device": spec.get("device"),
        "device_name": None,
        "precision": spec.get("precision"),
        "batch_size": spec.get("batch_size"),
        "status": "failed",
        "throughput": None,
        "latency_ms": None,
        "phases_ms": None,
        "step_time_ms": None,
        "peak_memory_bytes": None,
        "energy_j_per_sample": None,
        "avg_power_w": None,
        "throttle_episodes": [],
        "settings": {},
        "env": {},
        "started_at": None,
        "finished_at": None,
        "duration_s": None,
        "steps": None,
        "samples": None,
        "points": [],
        "error": None,
        "extra": {},
    }


def normalise(doc: Mapping[str, Any]) -> Result:
    """Fill missing contract keys so readers never KeyError on older or partial files."""
    base = empty_result(str(doc.get("id", "")), {})
    base.update(doc)
    return base


# --------------------------------------------------------------------------- storage


def write_atomic(path: Path, text: str) -> None:
    """Temp file in the same directory + fsync + os.replace: a reader (or a crash) never
    sees half a file, and an existing file is replaced in one step."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def dumps(doc: Mapping[str, Any]) -> str:
    return json.dumps(doc, indent=2, sort_keys=False, allow_nan=False, default=str) + "\n"


def save(doc: Mapping[str, Any], directory: Path | None = None) -> Path:
    result_id = str(doc.get("id") or "")
    if not _valid_id(result_id):
        raise GputuiError(f"cannot save a result with id {result_id!r}")
    path = (directory or results_dir()) / f"{result_id}.json"
    write_atomic(path, dumps(_finite(doc)))
    return path


def _finite(value: Any) -> Any:
    """NaN/inf are not JSON: a partial run can yield them (0 samples); store null instead."""
    if isinstance(value, float) and (value != value or value in (float("inf"), float("-inf"))):
        return None
    if isinstance(value, Mapping):
        return {str(k): _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    return value


def load_path(path: Path) -> Result:
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UsageError(f"no such result file: {path}") from None
    except OSError as exc:
        raise GputuiError(f"cannot read result file {path}: {exc.strerror or exc}") from None
    try:
        doc = json.loads(text)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise GputuiError(f"corrupt result file {path}: {_one_line(str(exc))}") from None
    if not isinstance(doc, dict) or "benchmark" not in doc:
        raise GputuiError(f"corrupt result file {path}: not a gputui result document")
    return normalise(doc)


def resolve(result_id: str, directory: Path | None = None) -> Path:
    """An id, a unique prefix of one (ids are long), or a path to a result file."""
    directory = directory or results_dir()
    if _valid_id(result_id):
        exact = directory / f"{result_id}.json"
        if exact.is_file():
            return exact
        if directory.is_dir():
            matches = sorted(p for p in directory.glob(f"{result_id}*.json") if p.is_file())
            if len(matches) == 1:
                return matches[0]
            if len(matches) > 1:
                raise UsageError(
                    f"result id {result_id!r} is ambiguous ({len(matches)} matches); "
                    "give more characters"
                )
    candidate = Path(result_id).expanduser()
    if candidate.suffix == ".json" and candidate.is_file():
        return candidate
    raise UsageError(f"no result with id {result_id!r} (see 'gputui bench history')")


def load(result_id: str, directory: Path | None = None) -> Result:
    return load_path(resolve(result_id, directory))


@dataclass
class History:
    results: list[Result] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def history(directory: Path | None = None) -> History:
    """Every readable result, oldest first; corrupt files become warnings, not failures,
    so one bad file never hides the rest."""
    directory = directory or results_dir()
    out = History()
    if not directory.is_dir():
        return out
    for path in sorted(directory.glob("*.json")):
        if path.name.startswith("."):
            continue
        try:
            out.results.append(load_path(path))
        except GputuiError as exc:
            out.warnings.append(f"skipped {exc}")
    out.results.sort(key=lambda d: (str(d.get("started_at") or ""), str(d.get("id") or "")))
    return out


def _one_line(text: str) -> str:
    return " ".join(text.split())


# --------------------------------------------------------------------------- reading values


def throughput_of(doc: Mapping[str, Any]) -> tuple[float | None, str]:
    tp = doc.get("throughput")
    if isinstance(tp, Mapping):
        value = tp.get("median")
        return (float(value) if isinstance(value, int | float) else None, str(tp.get("unit") or ""))
    return None, ""


def _get(doc: Mapping[str, Any], *keys: str) -> Any:
    cur: Any = doc
    for key in keys:
        if not isinstance(cur, Mapping):
            return None
        cur = cur.get(key)
    return cur


def _num(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


# --------------------------------------------------------------------------- comparison


@dataclass(frozen=True)
class MetricRow:
    name: str
    unit: str
    a: float | None
    b: float | None
    higher_is_better: bool | None  # None: neither (memory is a cost but not a "worse" score)

    @property
    def ratio(self) -> float | None:
        """B/A, the factor by which B differs from A."""
        if self.a is None or self.b is None or self.a == 0:
            return None
        return self.b / self.a

    @property
    def better(self) -> str | None:
        """"a", "b" or None (equal, not comparable, or no direction)."""
        r = self.ratio
        if r is None or self.higher_is_better is None or r == 1:
            return None
        return "b" if (r > 1) == self.higher_is_better else "a"


@dataclass(frozen=True)
class SettingRow:
    name: str
    a: Any
    b: Any

    @property
    def differs(self) -> bool:
        return self.a != self.b


@dataclass(frozen=True)
class Comparison:
    a: Result
    b: Result
    metrics: list[MetricRow]
    settings: list[SettingRow]

    def to_dict(self) -> dict[str, Any]:
        return {
            "a": self.a.get("id"),
            "b": self.b.get("id"),
            "metrics": [
                {"name": m.name, "unit": m.unit, "a": m.a, "b": m.b, "ratio_b_over_a": m.ratio,
                 "higher_is_better": m.higher_is_better, "better": m.better}
                for m in self.metrics
            ],
            "settings": [
                {"name": s.name, "a": s.a, "b": s.b, "differs": s.differs} for s in self.settings
            ],
        }


_IDENTITY_KEYS = ("benchmark", "model", "device", "device_name", "precision", "batch_size",
                  "status")
_ENV_KEYS = ("torch", "cuda", "cudnn", "driver", "python", "platform", "cpu")


def compare(a: Mapping[str, Any], b: Mapping[str, Any]) -> Comparison:
    a, b = normalise(a), normalise(b)
    tp_a, unit_a = throughput_of(a)
    tp_b, unit_b = throughput_of(b)
    metrics = [
        MetricRow("throughput (median)", unit_a or unit_b, tp_a, tp_b, True),
        MetricRow("throughput p10", unit_a or unit_b, _num(_get(a, "throughput", "p10")),
                  _num(_get(b, "throughput", "p10")), True),
        MetricRow("latency p50", "ms", _num(_get(a, "latency_ms", "p50")),
                  _num(_get(b, "latency_ms", "p50")), False),
        MetricRow("latency p90", "ms", _num(_get(a, "latency_ms", "p90")),
                  _num(_get(b, "latency_ms", "p90")), False),
        MetricRow("latency p99", "ms", _num(_get(a, "latency_ms", "p99")),
                  _num(_get(b, "latency_ms", "p99")), False),
        MetricRow("step time p50", "ms", _num(_get(a, "step_time_ms", "p50")),
                  _num(_get(b, "step_time_ms", "p50")), False),
        MetricRow("energy per sample", "J", _num(a.get("energy_j_per_sample")),
                  _num(b.get("energy_j_per_sample")), False),
        MetricRow("average power", "W", _num(a.get("avg_power_w")), _num(b.get("avg_power_w")),
                  None),
        MetricRow("peak memory", "bytes", _num(a.get("peak_memory_bytes")),
                  _num(b.get("peak_memory_bytes")), False),
    ]
    if unit_a and unit_b and unit_a != unit_b:
        # Different units (samples/s vs TFLOP/s) make the ratio meaningless.
        metrics[0] = MetricRow("throughput (median)", f"{unit_a} vs {unit_b}", tp_a, tp_b, None)
    settings: list[SettingRow] = [SettingRow(k, a.get(k), b.get(k)) for k in _IDENTITY_KEYS]
    sa, sb = a.get("settings") or {}, b.get("settings") or {}
    for key in sorted(set(sa) | set(sb)):
        if key in _IDENTITY_KEYS:
            continue
        settings.append(SettingRow(key, sa.get(key), sb.get(key)))
    ea, eb = a.get("env") or {}, b.get("env") or {}
    for key in _ENV_KEYS:
        if key in ea or key in eb:
            settings.append(SettingRow(f"env.{key}", ea.get(key), eb.get(key)))
    return Comparison(a, b, metrics, settings)


# --------------------------------------------------------------------------- export

# Stable: scripts index these by name; append new columns at the end only.
CSV_COLUMNS: tuple[str, ...] = (
    "id", "started_at", "finished_at", "status", "benchmark", "model", "device", "device_name",
    "precision", "batch_size", "steps", "samples", "duration_s",
    "throughput_median", "throughput_mean", "throughput_p10", "throughput_p90", "throughput_unit",
    "latency_p50_ms", "latency_p90_ms", "latency_p99_ms", "latency_mean_ms",
    "step_time_p50_ms", "step_time_p90_ms", "step_time_p99_ms",
    "peak_memory_bytes", "energy_j_per_sample", "avg_power_w", "throttle_episodes",
    "error_kind", "error_message", "torch", "cuda", "driver",
)


def flat_row(doc: Mapping[str, Any]) -> dict[str, Any]:
    doc = normalise(doc)
    error = doc.get("error") if isinstance(doc.get("error"), Mapping) else {}
    env = doc.get("env") if isinstance(doc.get("env"), Mapping) else {}
    return {
        "id": doc.get("id"),
        "started_at": doc.get("started_at"),
        "finished_at": doc.get("finished_at"),
        "status": doc.get("status"),
        "benchmark": doc.get("benchmark"),
        "model": doc.get("model"),
        "device": doc.get("device"),
        "device_name": doc.get("device_name"),
        "precision": doc.get("precision"),
        "batch_size": doc.get("batch_size"),
        "steps": doc.get("steps"),
        "samples": doc.get("samples"),
        "duration_s": doc.get("duration_s"),
        "throughput_median": _get(doc, "throughput", "median"),
        "throughput_mean": _get(doc, "throughput", "mean"),
        "throughput_p10": _get(doc, "throughput", "p10"),
        "throughput_p90": _get(doc, "throughput", "p90"),
        "throughput_unit": _get(doc, "throughput", "unit"),
        "latency_p50_ms": _get(doc, "latency_ms", "p50"),
        "latency_p90_ms": _get(doc, "latency_ms", "p90"),
        "latency_p99_ms": _get(doc, "latency_ms", "p99"),
        "latency_mean_ms": _get(doc, "latency_ms", "mean"),
        "step_time_p50_ms": _get(doc, "step_time_ms", "p50"),
        "step_time_p90_ms": _get(doc, "step_time_ms", "p90"),
        "step_time_p99_ms": _get(doc, "step_time_ms", "p99"),
        "peak_memory_bytes": doc.get("peak_memory_bytes"),
        "energy_j_per_sample": doc.get("energy_j_per_sample"),
        "avg_power_w": doc.get("avg_power_w"),
        "throttle_episodes": len(doc.get("throttle_episodes") or []),
        "error_kind": error.get("kind"),
        "error_message": error.get("message"),
        "torch": env.get("torch"),
        "cuda": env.get("cuda"),
        "driver": env.get("driver"),
    }


def export_csv(docs: Iterable[Mapping[str, Any]]) -> str:
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=list(CSV_COLUMNS), lineterminator="\n")
    writer.writeheader()
    for doc in docs:
        row = flat_row(doc)
        writer.writerow({k: "" if row[k] is None else row[k] for k in CSV_COLUMNS})
    return buf.getvalue()


MARKDOWN_COLUMNS: tuple[tuple[str, str], ...] = (
    ("id", "id"), ("benchmark", "benchmark"), ("model", "model"), ("device_name", "device"),
    ("precision", "precision"), ("batch_size", "batch"), ("status", "status"),
    ("throughput", "throughput"), ("latency_p90_ms", "p90 latency (ms)"),
    ("energy_j_per_sample", "J/sample"), ("peak_memory_bytes", "peak memory"),
    ("started_at", "started (UTC)"),
)


def export_markdown(docs: Iterable[Mapping[str, Any]]) -> str:
    lines = [
        "| " + " | ".join(title for _, title in MARKDOWN_COLUMNS) + " |",
        "|" + "|".join("---" for _ in MARKDOWN_COLUMNS) + "|",
    ]
    for doc in docs:
        row = flat_row(doc)
        cells = []
        for key, _ in MARKDOWN_COLUMNS:
            if key == "throughput":
                cells.append(fmt_throughput(doc))
            elif key == "device_name":
                cells.append(str(row["device_name"] or row["device"] or ""))
            elif key == "peak_memory_bytes":
                cells.append(fmt_bytes(row[key]))
            elif key in ("latency_p90_ms", "energy_j_per_sample"):
                cells.append(fmt_num(row[key]))
            else:
                cells.append("" if row[key] is None else str(row[key]))
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------- formatting


def fmt_num(value: Any, digits: int = 3) -> str:
    v = _num(value)
    if v is None:
        return "N/A"
    if v != 0 and (abs(v) >= 10 ** (digits + 3) or abs(v) < 10 ** -(digits)):
        return f"{v:.{digits}g}"
    if abs(v) >= 100:
        return f"{v:,.1f}"
    return f"{v:.{digits}g}" if abs(v) < 1 else f"{v:.2f}"


def fmt_bytes(value: Any) -> str:
    v = _num(value)
    if v is None:
        return "N/A"
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(v) < 1024 or unit == "TiB":
            return f"{v:.0f} {unit}" if unit == "B" else f"{v:.1f} {unit}"
        v /= 1024
    return f"{v:.1f} TiB"


def fmt_throughput(doc: Mapping[str, Any]) -> str:
    value, unit = throughput_of(doc)
    return "N/A" if value is None else f"{fmt_num(value)} {unit}".strip()


def fmt_ratio(ratio: float | None) -> str:
    return "N/A" if ratio is None else f"{ratio:.3f}×"
