"""Recordings: every snapshot as one JSON line, and reading them back for replay.

A recording starts with a header line; each later line is the public snapshot
schema. Lines are flushed every tick so a crash loses at most the last one, and
a replay skips a truncated last line with a warning instead of failing.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import IO

from gputui.errors import GputuiError, UsageError
from gputui.telemetry.model import Snapshot, iso_utc
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
    path: Path
    snapshots: list[Snapshot]
    warnings: list[str] = field(default_factory=list)
    interval_s: float | None = None

    @property
    def duration_s(self) -> float:
        if len(self.snapshots) < 2:
            return 0.0
        return (self.snapshots[-1].time - self.snapshots[0].time).total_seconds()


def load_recording(path: str | os.PathLike[str]) -> Recording:
    """Read a whole recording. A file that is not one → UsageError (one line)."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        raise UsageError(f"no such recording: {p}") from None
    except OSError as exc:
        raise UsageError(f"cannot read recording {p}: {exc.strerror}") from None
    lines = text.splitlines()
    snaps: list[Snapshot] = []
    warnings: list[str] = []
    interval = None
    saw_header = False
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        last = n == len(lines)
        try:
            obj = json.loads(line)
        except json.JSONDecodeError:
            if last and (saw_header or snaps):
                warnings.append(f"{p}: line {n} is truncated or corrupt; skipped")
                continue
            if not (saw_header or snaps):
                raise UsageError(f"{p} is not a gputui recording (line {n} is not JSON)") from None
            warnings.append(f"{p}: line {n} is corrupt; skipped")
            continue
        if isinstance(obj, dict) and HEADER_KEY in obj:
            saw_header = True
            interval = obj.get("interval_s") or interval
            continue
        if not isinstance(obj, dict):
            raise UsageError(f"{p} is not a gputui recording (line {n} is not an object)")
        try:
            snap = snapshot_from_dict(obj, seq=len(snaps) + 1)
        except SchemaError as exc:
            if not (saw_header or snaps):
                raise UsageError(f"{p} is not a gputui recording: {exc}") from None
            warnings.append(f"{p}: line {n} skipped: {exc}")
            continue
        snaps.append(snap)
    if not snaps:
        raise UsageError(f"{p} is not a gputui recording (no snapshots in it)")
    # Replays need a monotonic clock; recordings carry wall time, so derive it.
    t0 = snaps[0].time
    fixed = [replace(s, mono=(s.time - t0).total_seconds()) for s in snaps]
    return Recording(path=p, snapshots=fixed, warnings=warnings, interval_s=interval)


def require_recording(path: str) -> Recording:
    try:
        return load_recording(path)
    except UsageError:
        raise
    except Exception as exc:  # anything else about a user's file is still one line
        raise GputuiError(f"cannot replay {path}: {exc}") from None
