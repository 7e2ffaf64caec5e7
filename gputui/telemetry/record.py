"""Recordings: every snapshot as one JSON line, and reading them back for replay.

A recording starts with a header line; each later line is the public snapshot
schema. Lines are flushed every tick so a crash loses at most the last one, and
a replay skips a truncated last line with a warning instead of failing.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path
from typing import IO

from gputui.errors import GputuiError, UsageError
from gputui.telemetry.model import Snapshot, iso_utc
from gputui.telemetry.recording_index import IndexedLine, LazySnapshots, index_lines
from gputui.telemetry.schema import (
    SCHEMA_VERSION,
    SchemaError,
    snapshot_from_dict,
    snapshot_to_dict,
)

HEADER_KEY = "gputui_recording"


class Recorder:
    """Appends snapshots to a JSONL file. Appending keeps an earlier recording intact."""

    def __init__(self, path: str | os.PathLike[str], *, interval: float | None = None) -> None:
        self.path = Path(path)
        try:
            self._fh: IO[str] | None = open(self.path, "a", encoding="utf-8")
        except OSError as exc:
            raise UsageError(f"cannot write recording {self.path}: {exc.strerror}") from None
        self.interval = interval
        self._header_written = False
        self.lines = 0
        self.error: str | None = None  # set when a write failed; recording has stopped

    def write(self, snap: Snapshot) -> None:
        if self._fh is None:
            return
        try:
            if not self._header_written:
                header = {HEADER_KEY: SCHEMA_VERSION, "started": iso_utc(snap.time),
                          "interval_s": self.interval, "hostname": snap.host.hostname}
                self._fh.write(json.dumps(header) + "\n")
                self._header_written = True
            self._fh.write(json.dumps(snapshot_to_dict(snap), separators=(",", ":")) + "\n")
            self._fh.flush()
        except OSError as exc:
            # A full disk must not go unnoticed: stop, and say so to whoever shows errors.
            self.error = (f"recording to {self.path} stopped after {self.lines} snapshots: "
                          f"{exc.strerror or exc}")
            self._fh = None
            return
        self.lines += 1

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None


@dataclass
class Recording:
    """A recording: `snapshots` is a list (hand-built) or, for a file, a sequence that
    parses each snapshot when first asked for (gputui.telemetry.recording_index)."""

    path: Path
    snapshots: Sequence[Snapshot]
    warnings: list[str] = field(default_factory=list)
    interval_s: float | None = None
    # Called with each warning found while playing (a damaged line met on the way).
    on_warning: Callable[[str], None] | None = None

    def times(self) -> list[datetime]:
        """Each snapshot's wall time, without parsing the snapshots of a file."""
        lazy = getattr(self.snapshots, "times", None)
        return lazy() if lazy is not None else [s.time for s in self.snapshots]

    @property
    def duration_s(self) -> float:
        times = self.times()
        if len(times) < 2:
            return 0.0
        return (times[-1] - times[0]).total_seconds()

    def warn(self, text: str) -> None:
        self.warnings.append(text)
        if self.on_warning is not None:
            self.on_warning(text)


def _lines(fh: IO[bytes]) -> Iterator[tuple[int, int, bytes]]:
    offset = 0
    for number, raw in enumerate(fh, 1):
        yield offset, number, raw
        offset += len(raw)


def _first_object(p: Path, fh: IO[bytes]) -> None:
    """The first non-empty line must be a JSON object: else this is not a recording."""
    for number, raw in enumerate(fh, 1):
        if not raw.strip():
            continue
        try:
            obj = json.loads(raw)
        except ValueError:
            raise UsageError(f"{p} is not a gputui recording (line {number} is not JSON)"
                             ) from None
        if not isinstance(obj, dict):
            raise UsageError(f"{p} is not a gputui recording (line {number} is not an object)")
        if HEADER_KEY not in obj:
            try:
                snapshot_from_dict(obj)
            except SchemaError as exc:
                raise UsageError(f"{p} is not a gputui recording: {exc}") from None
        return


def load_recording(path: str | os.PathLike[str]) -> Recording:
    """Index a recording (snapshots are parsed on demand). A file that is not one →
    UsageError (one line); damaged lines → warnings naming the file and line."""
    p = Path(path)
    warnings: list[str] = []
    try:
        with open(p, "rb") as fh:
            _first_object(p, fh)
            fh.seek(0)
            lines, headers = index_lines(_lines(fh), warnings.append, p)
    except FileNotFoundError:
        raise UsageError(f"no such recording: {p}") from None
    except IsADirectoryError:
        raise UsageError(f"cannot read recording {p}: Is a directory") from None
    except OSError as exc:
        raise UsageError(f"cannot read recording {p}: {exc.strerror}") from None
    interval = None
    for _number, obj in headers:
        if HEADER_KEY in obj:
            got = obj.get("interval_s")
            if isinstance(got, int | float) and not isinstance(got, bool) and got > 0:
                interval = float(got)
    rec = Recording(path=p, snapshots=[], warnings=warnings, interval_s=interval)
    # The first and last snapshots are parsed now: a truncated last line (a crash while
    # recording) is dropped with a warning, and the first is what replay starts on.
    first: Snapshot | None = None
    while lines and first is None:
        first = _parse_line(p, lines[0], rec, last=len(lines) == 1)
        if first is None:
            lines.pop(0)
    if first is None:
        raise UsageError(f"{p} is not a gputui recording (no snapshots in it)")
    if len(lines) > 1 and _parse_line(p, lines[-1], rec, last=True) is None:
        lines.pop()
    t0 = lines[0].time
    rec.snapshots = LazySnapshots(p, lines, replace(first, mono=0.0), rec.warn, t0=t0)
    return rec


def _parse_line(p: Path, line: IndexedLine, rec: Recording, *, last: bool) -> Snapshot | None:
    try:
        with open(p, "rb") as fh:
            fh.seek(line.offset)
            obj = json.loads(fh.readline())
        if not isinstance(obj, dict):
            raise SchemaError("not an object")
        return snapshot_from_dict(obj, seq=1)
    except ValueError as exc:
        if last and not isinstance(exc, SchemaError):
            rec.warnings.append(f"{p}: line {line.number} is truncated or corrupt; skipped")
        else:
            rec.warnings.append(f"{p}: line {line.number} skipped: {exc}")
        return None


def require_recording(path: str) -> Recording:
    try:
        return load_recording(path)
    except UsageError:
        raise
    except Exception as exc:  # anything else about a user's file is still one line
        raise GputuiError(f"cannot replay {path}: {exc}") from None
