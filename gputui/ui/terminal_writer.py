"""Write to the terminal only the cells that changed, as curses does.

Textual repaints a widget's whole line from the widget's left edge whenever anything in
it changes, every segment as "set style, text, reset". Over ssh that is what the link
carries: a compact GPU row costs ~700 bytes a second when one digit changes. `ScreenDiff`
keeps what the terminal shows (character and style of each cell written) and turns each
of Textual's writes into the cells that differ from it, with a cursor move per run of
changed cells and a style sequence only where the style changes. Most of what Textual
sends is what the terminal already shows, so that case is made cheap: Textual's usual
segment (style, text, reset) is read as one token, and the model keeps each row as a
string of its characters and a list of their styles, so an unchanged run of one-cell
characters is two slice comparisons; cell by cell only where a run changed.

Textual's screen output is a small language: absolute cursor moves (CSI row;col H),
SGR styles (CSI ... m), text, and "\\r\\n" between the lines of a full repaint. Mode
switches, synchronized-output marks, OSC/DCS strings (titles, notifications) and the
bell pass through untouched, in order. Anything else (a clear, a relative move, text
where the cursor is not known, a zero-width character, text at the right margin) makes
the whole write go out as Textual wrote it and the model is forgotten, so the screen is
always what Textual's own output would have made it. The model is also forgotten when the
terminal's size changes, when the alternate screen is entered or left, and when the
application mode (re)starts (after ctrl+z, say).

`DiffingDriver` is Textual's Linux driver with this filter in front of its writer (and
the adapter's input thread, which sleeps until there is input); the apps pick it through
Textual's public `App(driver_class=diffing_driver())`. The grammar above is Textual's
output as the Textual versions the adapter is tested with write it, so `diffing_driver()`
gives it only there (`textual_adapter.supported`); on any other version the apps run with
Textual's own driver and its bytes go out as Textual made them.
"""

from __future__ import annotations

import os
import re
import sys
import threading
from dataclasses import dataclass, field
from functools import lru_cache

from rich.cells import cell_len

from gputui.ui import textual_adapter

# Text never holds a control character: in the model's rows two stand for what is not text.
UNKNOWN = "\x00"  # a cell not known (never written, or erased as a side effect)
WIDE_TAIL = "\x01"  # the second cell of a wide character
GAP = 4  # unchanged cells rewritten rather than skipped with a cursor move (~8 bytes)
SYNC_START, SYNC_END = "\x1b[?2026h", "\x1b[?2026l"
_ALT_SCREEN = {"47", "1047", "1049"}
_TOKEN = re.compile(
    # Textual's usual segment, read as one token: a style, text, the reset.
    r"\x1b\[([0-9;]*)m([^\x00-\x1f\x7f\x1b]+)\x1b\[0?m"
    r"|\x1b\[([0-?]*)([ -/]*)([@-~])"  # CSI: parameters, intermediates, final
    r"|(\x1b[\]P_^X][^\x07\x1b]*(?:\x07|\x1b\\)"  # OSC / DCS / APC / PM / SOS strings
    r"|\x1b"  # any other escape: not understood
    r"|[\x00-\x1f\x7f]"  # a control character
    r"|[^\x00-\x1f\x7f\x1b]+)")  # text


class _Unknown(Exception):
    """A write holds something the model does not follow."""


@dataclass(slots=True)
class _Line:
    """One row of what the terminal shows, as long as its last cell written."""

    chars: str = ""  # a character per cell, UNKNOWN or WIDE_TAIL where not text
    pens: list[str] = field(default_factory=list)  # each cell's SGR parameters

    def reach(self, end: int) -> None:
        """Make the line at least `end` cells long (the new cells not known)."""
        if len(self.chars) < end:
            self.pens.extend([""] * (end - len(self.chars)))
            self.chars = self.chars.ljust(end, UNKNOWN)


class ScreenDiff:
    """What the terminal shows; `reduce(data)` is `data` less what is already there."""

    def __init__(self) -> None:
        self.lines: dict[int, _Line] = {}  # rows with a cell written since `forget`
        self.size: tuple[int, int] | None = None
        self.cursor: tuple[int, int] | None = None  # where the terminal's cursor is
        self.sync_pending = False  # a synchronized-output start not sent yet
        self._unread: list[str] = []  # writes sent as they were, not yet in the model

    def forget(self) -> None:
        """Nothing on the screen is known: the next writes go out whole."""
        self.lines.clear()
        self.cursor = None
        self._unread.clear()

    def resize(self, size: tuple[int, int] | None) -> None:
        """The terminal is `size` (columns, rows) now; a change forgets the model."""
        if size != self.size:
            self.size = size
            self.forget()

    def write(self, data: str) -> str:
        """What to send for Textual's `data`. Textual writes a frame as three calls
        (synchronized-output start, the frame, end): a frame that changes nothing is
        dropped with its marks."""
        self.catch_up()
        if data == SYNC_START:
            self.sync_pending = True
            return ""
        if data == SYNC_END and self.sync_pending:
            self.sync_pending = False  # nothing in between: neither mark is needed
            return ""
        data = self.reduce(data)
        if data and self.sync_pending:
            self.sync_pending = False
            return SYNC_START + data
        return data

    def reduce(self, data: str) -> str:
        if not self.lines:
            # Nothing on the screen is known (the first frame, a resize, ctrl+l): no cell
            # can be left out, so Textual's bytes go out as they are, without waiting for
            # the model, which reads them afterwards (`catch_up`).
            self._unread.append(data)
            return data
        try:
            return self._reduce(data)
        except _Unknown:
            # Not followed: Textual's bytes as they are; the screen is no longer known.
            self.forget()
            return data

    def catch_up(self) -> None:
        """Read into the model what went out as it was (done before the next write at
        the latest; the driver does it as soon as the bytes are on their way)."""
        while self._unread:
            data = self._unread.pop(0)
            try:
                self._reduce(data, sent=True)
            except _Unknown:
                self.forget()

    def _reduce(self, data: str, *, sent: bool = False) -> str:
        """`data` less what is already on screen; `sent`: `data` went out as it is, only
        the model is brought up to date."""
        out: list[str] = []
        changed: set[tuple[int, int]] = set()
        pen = ""  # Textual's style in effect while its bytes are read
        row: int | None = None
        col = 0
        width = self.size[0] if self.size else None
        moved = False  # a cursor move seen: the cursor's end position is known
        # Each token: a segment's style and text, a CSI's parts, or any other token.
        for style, styled, params, inter, final, token in _TOKEN.findall(data):
            if styled:  # style, text, reset
                if row is None:
                    raise _Unknown
                col = self._text(row, col, styled, _sgr(pen, style), width, changed)
                pen = ""
            elif final:  # a CSI sequence
                if final == "m" and not inter:
                    pen = _sgr(pen, params)
                elif final == "H" and not inter:
                    numbers = params.split(";")
                    if len(numbers) > 2 or not all(n.isdigit() or n == "" for n in numbers):
                        raise _Unknown
                    row = int(numbers[0] or 1) - 1
                    col = int(numbers[1] or 1) - 1 if len(numbers) == 2 else 0
                    if row < 0 or col < 0:
                        raise _Unknown  # a 0 Textual does not write
                    moved = True
                elif self._harmless(params, inter, final):
                    out.append(self._flush(changed, sent))
                    out.append(f"\x1b[{params}{inter}{final}")
                    if final in "hl" and params[:1] == "?" and \
                            _ALT_SCREEN & set(params[1:].split(";")):
                        self.forget()
                else:
                    raise _Unknown
            elif token == "\x1b":
                raise _Unknown
            elif token[0] == "\x1b" or token == "\x07":  # OSC/DCS strings, the bell
                out.append(self._flush(changed, sent))
                out.append(token)
            elif token == "\r":
                col = 0
            elif token == "\n":
                row = None  # the next line starts with a cursor move
            elif len(token) == 1 and (token < " " or token == "\x7f"):
                raise _Unknown
            else:
                if row is None:
                    raise _Unknown
                col = self._text(row, col, token, pen, width, changed)
        out.append(self._flush(changed, sent))
        end = (row, col) if moved and row is not None else None
        if sent:  # the terminal's cursor is where Textual's bytes left it
            self.cursor = end if width is None or col < width else None
            return ""
        if end is not None and end != self.cursor and (width is None or col < width):
            out.append(f"\x1b[{row + 1};{col + 1}H")
            self.cursor = end
        return "".join(out)

    @staticmethod
    def _harmless(params: str, inter: str, final: str) -> bool:
        """A CSI that changes no cell and no cursor position: modes, queries, the
        cursor's shape."""
        if params[:1] in ("?", ">", "=", "<"):
            return True
        return (final, inter) in {("n", ""), ("q", " "), ("t", "")}

    def _line(self, row: int, end: int) -> _Line:
        """Row `row` of the model, at least `end` cells long."""
        line = self.lines.get(row)
        if line is None:
            line = self.lines[row] = _Line()
        line.reach(end)
        return line

    def _text(self, row: int, col: int, text: str, pen: str, width: int | None,
              changed: set[tuple[int, int]]) -> int:
        """Write a run of text at (row, col) into the model; the next column."""
        n = len(text)
        end = col + n
        if (width is None or end <= width) and _narrow(text):
            # The common case, a cell per character: compared in one go, and cell by
            # cell only where the run changed.
            line = self.lines.get(row)
            if line is not None and line.chars[col:end] == text and \
                    line.pens[col:end] == [pen] * n:
                return end
            line = self._line(row, end)
            chars, pens = line.chars, line.pens
            # Over half of a wide character, cell by cell: the terminal blanks the other.
            if WIDE_TAIL not in chars[col:end] and chars[end:end + 1] != WIDE_TAIL and (
                    col == 0 or _char_cells(chars[col - 1]) != 2):
                for c in range(col, end):
                    if chars[c] != text[c - col] or pens[c] != pen:
                        changed.add((row, c))
                line.chars = chars[:col] + text + chars[end:]
                pens[col:end] = [pen] * n
                return end
        for char in text:  # wide characters, or a run over one: cell by cell
            col = self._put(row, col, char, pen, width, changed)
        return col

    def _put(self, row: int, col: int, char: str, pen: str, width: int | None,
             changed: set[tuple[int, int]]) -> int:
        """Write one character at (row, col) into the model; the next column."""
        w = _char_cells(char)
        if w not in (1, 2) or (width is not None and col + w > width):
            raise _Unknown  # zero-width, or wrapping at the margin
        line = self._line(row, col + w)
        for i in range(w):
            new = WIDE_TAIL if i else char
            old = line.chars[col + i]
            if old == new and line.pens[col + i] == pen:
                continue
            # Overwriting half of a wide character erases the other half on the terminal.
            if old == WIDE_TAIL and i == 0:
                self._erase(row, col - 1, changed)
            if _char_cells(old) == 2 and i == w - 1:
                self._erase(row, col + i + 1, changed)
            self._set(line, col + i, new, pen)
            changed.add((row, col + i))
        return col + w

    @staticmethod
    def _set(line: _Line, col: int, char: str, pen: str) -> None:
        """One cell of `line` is `char` in `pen` now."""
        line.chars = line.chars[:col] + char + line.chars[col + 1:]
        line.pens[col] = pen

    def _erase(self, row: int, col: int, changed: set[tuple[int, int]]) -> None:
        """The half of a wide character left when the other half is overwritten: the
        terminal blanks it; what it shows is not modelled."""
        if (row, col) in changed:
            raise _Unknown  # a cell written twice in one write: Textual's bytes as they are
        line = self.lines[row]
        if 0 <= col < len(line.chars):
            self._set(line, col, UNKNOWN, "")

    def _flush(self, changed: set[tuple[int, int]], sent: bool = False) -> str:
        """The changed cells, in runs, left to right; the pen reset at the end (none
        when the write that changed them was `sent` as it was)."""
        if not changed:
            return ""
        if sent:
            changed.clear()
            return ""
        out: list[str] = []
        pen = ""
        for row, start, end in self._runs(changed):
            out.append(f"\x1b[{row + 1};{start + 1}H")
            line = self.lines[row]
            for col in range(start, end):
                char, style = line.chars[col], line.pens[col]
                if char == WIDE_TAIL:
                    continue  # the second half of a wide character
                if style != pen:
                    out.append(f"\x1b[0;{style}m" if style else "\x1b[0m")
                    pen = style
                out.append(char)
            self.cursor = None  # (possibly at the margin, waiting to wrap)
        if pen:
            out.append("\x1b[0m")
        changed.clear()
        return "".join(out)

    def _runs(self, changed: set[tuple[int, int]]) -> list[tuple[int, int, int]]:
        """(row, start, end) runs covering `changed`, whole wide characters, joined
        across short stretches of known cells."""
        runs: list[list[int]] = []
        for row, col in sorted(changed):
            chars = self.lines[row].chars
            char = chars[col]
            if char == UNKNOWN:
                continue
            start = col
            if char == WIDE_TAIL and col > 0 and chars[col - 1] != UNKNOWN:
                start = col - 1  # a wide character starts one cell earlier
            end = col + 1
            if end < len(chars) and chars[end] == WIDE_TAIL and _char_cells(char) == 2:
                end += 1
            last = runs[-1] if runs else None
            if last is not None and last[0] == row and (start <= last[2] or (
                    start - last[2] <= GAP and UNKNOWN not in chars[last[2]:start])):
                last[2] = max(last[2], end)  # next to the run (the common case), or a gap
            else:
                runs.append([row, start, end])
        result = []
        for row, start, end in runs:
            chars = self.lines[row].chars
            if chars[start] == WIDE_TAIL and start > 0 and chars[start - 1] != UNKNOWN:
                start -= 1  # a bridged gap may begin inside a wide character
            result.append((row, start, end))
        return result


class DiffingDriver(textual_adapter.QuietInputDriver):
    """Textual's Linux driver writing only the cells that changed (see module doc), its
    input thread asleep until there is input."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.screen_diff = ScreenDiff()
        self._lock = threading.Lock()  # notifications write from their own thread

    def start_application_mode(self) -> None:
        with self._lock:
            self.screen_diff.forget()
        super().start_application_mode()

    def write(self, data: str) -> None:
        with self._lock:  # (the writer's queue takes the bytes in the order they were made)
            self.screen_diff.resize(_terminal_size())
            data = self.screen_diff.write(data)
            if data:
                super().write(data)
            self.screen_diff.catch_up()

    def forget_screen(self) -> None:
        """Something else wrote to the terminal: the next frame goes out whole (ctrl+l)."""
        with self._lock:
            self.screen_diff.forget()


def _sgr(pen: str, params: str) -> str:
    """The pen (SGR parameters in effect) after "CSI params m" is written with `pen`."""
    if params in ("", "0"):
        return ""
    if params.startswith("0;"):
        return params[2:]
    if not params[:1].isdigit():
        raise _Unknown
    return f"{pen};{params}" if pen else params


def diffing_driver() -> type[DiffingDriver] | None:
    """The driver an app runs with: DiffingDriver on a Textual version the adapter is
    tested with, else None (Textual's own)."""
    return DiffingDriver if textual_adapter.supported() else None


@lru_cache(maxsize=4096)
def _narrow(text: str) -> bool:
    """Every character of `text` takes exactly one cell. Remembered: a frame's runs are
    mostly the same box lines, bars and labels as the frame before."""
    if text.isascii():
        return text.isprintable()
    return all(_char_cells(char) == 1 for char in text)


_WIDTHS: dict[str, int] = {}


def _char_cells(char: str) -> int:
    width = _WIDTHS.get(char)
    if width is None:
        width = _WIDTHS[char] = cell_len(char)
    return width


def _terminal_size() -> tuple[int, int] | None:
    """(columns, rows) of the terminal Textual writes to (stderr), else of stdin."""
    for stream in (sys.__stderr__, sys.__stdin__):
        try:
            return tuple(os.get_terminal_size(stream.fileno()))  # type: ignore[union-attr,return-value]
        except (AttributeError, OSError, ValueError):
            continue
    return None
