"""Where benchmark results live: ids, atomic storage, loading, history.

A result is a `gputui.bench.result.Result`; its JSON object is the public contract
(docs/benchmarks.md).
A damaged file (not UTF-8, not JSON, NaN/Infinity, a field of the wrong type) is one
GputuiError naming the file, and `history` skips it with a warning: one bad file never
hides the rest. Nothing here imports torch.
"""

from __future__ import annotations

import json
import os
import secrets
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from gputui.atomic import write_atomic
from gputui.bench.request import RunRequest
from gputui.bench.result import SCHEMA_VERSION, STATUSES, DamagedResult, Result, ResultBuilder
from gputui.errors import GputuiError, UsageError
from gputui.safe_text import printable
from gputui.telemetry.model import iso_utc

__all__ = ["SCHEMA_VERSION", "STATUSES", "History", "Result", "data_dir", "dumps",
           "empty_result", "history", "load", "load_path", "new_id", "profiles_dir",
           "resolve", "results_dir", "save", "write_atomic"]


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
    return iso_utc(datetime.now(UTC))


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


def empty_result(result_id: str, request: RunRequest) -> dict[str, Any]:
    """Every key of the contract with "not measured" values (the builder's skeleton)."""
    b = ResultBuilder.for_request(result_id, request)
    b.status = "failed"
    return b.build().to_dict()


# --------------------------------------------------------------------------- storage


def dumps(doc: Result | Mapping[str, Any]) -> str:
    body = doc.to_dict() if isinstance(doc, Result) else doc
    return json.dumps(_finite(body), indent=2, sort_keys=False, allow_nan=False,
                      default=str) + "\n"


def save(doc: Result | Mapping[str, Any], directory: Path | None = None) -> Path:
    """Write a result atomically as <results dir>/<id>.json (a mapping is checked first)."""
    result = doc if isinstance(doc, Result) else _from_mapping(doc)
    if not _valid_id(result.id):
        raise GputuiError(f"cannot save a result with id {result.id!r}")
    path = (directory or results_dir()) / f"{result.id}.json"
    write_atomic(path, dumps(result))
    return path


def _from_mapping(doc: Mapping[str, Any]) -> Result:
    try:
        return Result.from_dict(_finite(doc))
    except DamagedResult as exc:
        raise GputuiError(f"not a valid result document: {exc}") from None


def _finite(value: Any) -> Any:
    """NaN/inf are not JSON: a partial run can yield them (0 samples); store null instead."""
    if isinstance(value, float) and (value != value or value in (float("inf"), float("-inf"))):
        return None
    if isinstance(value, Mapping):
        return {str(k): _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    return value


def _no_constants(name: str) -> Any:
    raise ValueError(f"{name} is not a number JSON allows")


def load_path(path: Path) -> Result:
    """The result in one file; GputuiError (one line, naming the file) if it is damaged."""
    where = printable(path)
    try:
        data = Path(path).read_bytes()
    except FileNotFoundError:
        raise UsageError(f"no such result file: {where}") from None
    except OSError as exc:
        raise GputuiError(f"cannot read result file {where}: {exc.strerror or exc}") from None
    try:
        doc = json.loads(data.decode("utf-8"), parse_constant=_no_constants)
    except UnicodeDecodeError as exc:
        raise GputuiError(f"corrupt result file {where}: not UTF-8 text "
                          f"(byte {exc.start})") from None
    except (ValueError, RecursionError) as exc:
        raise GputuiError(f"corrupt result file {where}: {_one_line(str(exc))}") from None
    if not isinstance(doc, dict) or "benchmark" not in doc:
        raise GputuiError(f"corrupt result file {where}: not a gputui result document")
    try:
        return Result.from_dict(doc)
    except (DamagedResult, TypeError, ValueError) as exc:
        raise GputuiError(f"corrupt result file {where}: {_one_line(str(exc))}") from None


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
    warnings: list[str] = field(default_factory=list)  # one line per skipped file


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
        except GputuiError as exc:  # UsageError too: a file that vanished meanwhile
            out.warnings.append(f"skipped {exc}")
    out.results.sort(key=lambda d: (d.started_at or "", d.id))
    return out


def _one_line(text: str) -> str:
    return " ".join(text.split())
