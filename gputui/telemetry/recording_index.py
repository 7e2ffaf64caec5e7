"""A recording file read on demand: an index of its lines, snapshots parsed when asked.

`gputui replay` of a long recording must not hold every snapshot in memory (160 MB
of JSON lines became 583 MB of objects) nor parse them all before the first frame.
One pass over the bytes notes where each line starts and its time (read from the
line's head, `{"time":"…"`, as the recorder writes it; other lines are parsed whole);
a snapshot is parsed when the player reaches it, with a small cache for seeks.

A line whose time could be read but whose body turns out to be damaged (a string
where a number belongs, say) is reported once, naming the file and line, and the
previous good snapshot is shown at its time instead: replay goes on.
"""

from __future__ import annotations

import json
import re
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path
from typing import overload

from gputui.telemetry.model import Snapshot, parse_iso
from gputui.telemetry.schema import SchemaError, snapshot_from_dict

_TIME_HEAD = re.compile(rb'^\s*\{\s*"time"\s*:\s*"([^"\\]{10,40})"')
CACHE_SIZE = 256


@dataclass(frozen=True, slots=True)
class IndexedLine:
    offset: int  # byte offset of the line in the file
    number: int  # 1-based line number, for messages
    time: datetime


class LazySnapshots(Sequence[Snapshot]):
    """The snapshots of a recording, parsed from the file when first asked for."""

    def __init__(self, path: Path, lines: list[IndexedLine], first: Snapshot,
                 warn: Callable[[str], None], *, t0: datetime) -> None:
        self.path = path
        self._t0 = t0
        self._lines = lines
        self._cache: OrderedDict[int, Snapshot] = OrderedDict()
        self._cache[0] = first
        self._warn = warn
        self._bad: set[int] = set()

    def times(self) -> list[datetime]:
        return [ln.time for ln in self._lines]

    def __len__(self) -> int:
        return len(self._lines)

    @overload
    def __getitem__(self, i: int) -> Snapshot: ...

    @overload
    def __getitem__(self, i: slice) -> list[Snapshot]: ...

    def __getitem__(self, i: int | slice) -> Snapshot | list[Snapshot]:
        if isinstance(i, slice):
            return [self._get(j) for j in range(*i.indices(len(self._lines)))]
        if i < 0:
            i += len(self._lines)
        if not 0 <= i < len(self._lines):
            raise IndexError(i)
        return self._get(i)

    def __iter__(self) -> Iterator[Snapshot]:
        for i in range(len(self._lines)):
            yield self._get(i)

    def _get(self, i: int) -> Snapshot:
        got = self._cache.get(i)
        if got is not None:
            self._cache.move_to_end(i)
            return got
        line = self._lines[i]
        snap = self._parse(i, line)
        self._cache[i] = snap
        if len(self._cache) > CACHE_SIZE:
            self._cache.popitem(last=False)
        return snap

    def _parse(self, i: int, line: IndexedLine) -> Snapshot:
        try:
            with open(self.path, "rb") as fh:
                fh.seek(line.offset)
                raw = fh.readline()
            obj = json.loads(raw)
            if not isinstance(obj, dict):
                raise SchemaError("not an object")
            # Replays need a monotonic clock; recordings carry wall time, so derive it.
            return snapshot_from_dict(obj, mono=(line.time - self._t0).total_seconds(),
                                      seq=i + 1)
        except (OSError, ValueError) as exc:  # SchemaError and JSONDecodeError included
            if i not in self._bad:
                self._bad.add(i)
                self._warn(f"{self.path}: line {line.number} skipped: {exc}")
            # The reading before it, at this line's time: the replay's clock goes on.
            prev = self._get(i - 1) if i > 0 else None
            if prev is None:  # pragma: no cover - line 0 is parsed when indexing
                raise
            return replace(prev, time=line.time, seq=i + 1)


def index_lines(raw_lines: Iterator[tuple[int, int, bytes]],
                on_warning: Callable[[str], None], path: Path,
                ) -> tuple[list[IndexedLine], list[tuple[int, dict[str, object]]]]:
    """(snapshot lines, header objects with their line numbers) of a recording.

    `raw_lines` yields (offset, line number, bytes). Lines whose time cannot be read
    from their head are parsed whole; one that is not JSON is skipped with a warning
    (the caller decides whether a bad first line means "not a recording")."""
    out: list[IndexedLine] = []
    headers: list[tuple[int, dict[str, object]]] = []
    pending: int | None = None  # a line that is not JSON: truncated if it is the last
    for offset, number, raw in raw_lines:
        if not raw.strip():
            continue
        if pending is not None:
            on_warning(f"{path}: line {pending} is corrupt; skipped")
            pending = None
        m = _TIME_HEAD.match(raw)
        if m is not None:
            try:
                out.append(IndexedLine(offset, number, parse_iso(m.group(1).decode())))
                continue
            except ValueError:
                pass
        try:
            obj = json.loads(raw)
        except ValueError:
            pending = number
            continue
        if isinstance(obj, dict) and "time" not in obj:
            headers.append((number, obj))
            continue
        try:
            t = parse_iso(obj["time"])  # type: ignore[index]
        except (KeyError, TypeError, ValueError, AttributeError):
            on_warning(f"{path}: line {number} skipped: no valid time")
            continue
        out.append(IndexedLine(offset, number, t))
    if pending is not None:  # the recorder crashed mid-line
        on_warning(f"{path}: line {pending} is truncated or corrupt; skipped")
    return out, headers
