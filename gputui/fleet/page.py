"""Prometheus text format, read as it streams in, bounded in series and in time.

A metrics page can be huge (a node exporter with every systemd unit, a dcgm-exporter
with profiling fields on 8 GPUs × 7 MIG instances, or a hostile host): parsing all of
it into objects took seconds of CPU and a gigabyte of memory and froze the fleet view.
So this parser keeps only the series the fleet reads (`wanted`), checks every other
line only for its shape (a metric name first), stops with a clear error after
`max_series` kept series, and checks the request's deadline on every chunk: parsing
is inside the same timeout as fetching.
"""

from __future__ import annotations

import codecs
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Protocol

from gputui.fleet.errors import ScrapeError

# A host with 8 GPUs × 7 MIG instances serves a few thousand of the series the fleet
# reads; ten times that is not a GPU host's page.
MAX_SERIES = 20_000


@dataclass(frozen=True, slots=True)
class Series:
    """One sample: a metric name, its labels and its value (NaN and ±Inf kept as read)."""

    name: str
    labels: dict[str, str]
    value: float


class _Deadline(Protocol):
    def check(self) -> None: ...


_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
_LABEL = re.compile(r'\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*=\s*"((?:[^"\\\n]|\\.)*)"\s*(,|\})')
_UNESCAPE = re.compile(r"\\(.)")


def _unescape(value: str) -> str:
    if "\\" not in value:
        return value
    return _UNESCAPE.sub(lambda m: "\n" if m.group(1) == "n" else m.group(1), value)


class PageParser:
    """Feed text as it arrives; `close()` gives the wanted series.

    Raises ScrapeError (down=False) on a line that is not Prometheus text format, on
    more than `max_series` wanted series, and (down=True) when `deadline` has passed.
    """

    def __init__(self, wanted: Iterable[str], *, deadline: _Deadline | None = None,
                 max_series: int = MAX_SERIES) -> None:
        self.wanted = frozenset(wanted)
        self.deadline = deadline
        self.max_series = max_series
        self.series: list[Series] = []
        self.lines = 0
        self.seen_metrics = 0  # sample lines of any metric
        self._tail = ""

    def feed(self, text: str) -> None:
        if self.deadline is not None:
            self.deadline.check()
        text = self._tail + text
        lines = text.split("\n")
        self._tail = lines.pop()
        for line in lines:
            self._line(line)

    def close(self) -> list[Series]:
        if self._tail:
            self._line(self._tail)
            self._tail = ""
        if self.deadline is not None:
            self.deadline.check()
        return self.series

    def _bad(self, why: str) -> ScrapeError:
        return ScrapeError(f"malformed metrics page: line {self.lines}: {why}", down=False)

    def _line(self, line: str) -> None:
        self.lines += 1
        line = line.strip()
        if not line or line[0] == "#":
            return
        m = _NAME.match(line)
        end = m.end() if m else 0
        if m is None or end == len(line) or line[end] not in "{ \t":
            raise self._bad(f"not a metric sample: {line[:60]!r}")
        self.seen_metrics += 1
        name = m.group()
        if name not in self.wanted:
            return  # only its shape is checked: the fleet never reads it
        if len(self.series) >= self.max_series:
            raise ScrapeError(f"more than {self.max_series:,} GPU series on the page: too "
                              "large to be one host's GPUs, not read", down=False)
        labels: dict[str, str] = {}
        pos = end
        if line[pos] == "{":
            pos += 1
            if line[pos:pos + 1] == "}":
                pos += 1
            while line[pos - 1] != "}":
                lm = _LABEL.match(line, pos)
                if lm is None:
                    raise self._bad(f"bad labels in {line[:60]!r}")
                labels[lm.group(1)] = _unescape(lm.group(2))
                pos = lm.end()
                if lm.group(3) == "," and line[pos:].lstrip().startswith("}"):
                    pos = line.index("}", pos) + 1  # a trailing comma is allowed
        parts = line[pos:].split()
        if not 1 <= len(parts) <= 2:
            raise self._bad(f"no value in {line[:60]!r}")
        try:
            value = float(parts[0])
        except ValueError:
            raise self._bad(f"not a number: {parts[0][:30]!r}") from None
        self.series.append(Series(name, labels, value))


def parse_text(text: str, wanted: Iterable[str], *, max_series: int = MAX_SERIES
               ) -> PageParser:
    """A whole page at once (tests, files); the parser holds the series and the counts."""
    parser = PageParser(wanted, max_series=max_series)
    parser.feed(text)
    parser.close()
    return parser


def decoder(charset: str | None) -> codecs.IncrementalDecoder:
    """Decodes a page's bytes as they arrive (UTF-8 unless the page says otherwise)."""
    try:
        return codecs.getincrementaldecoder(charset or "utf-8")(errors="replace")
    except LookupError:  # a charset Python does not know
        return codecs.getincrementaldecoder("utf-8")(errors="replace")
