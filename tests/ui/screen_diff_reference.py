"""The terminal writer's diff as it was with a dict of cells for its model, kept unchanged
as the reference for tests/ui/test_terminal_writer.py: the writer must send the same bytes
as this for the same writes. Not used by gputui."""

from __future__ import annotations

import re
from functools import lru_cache

from rich.cells import cell_len

# One cell: (character, SGR parameters in effect); a wide character's second cell is
# ("", style). None: not known (never written, or erased as a side effect).
Cell = tuple[str, str]
GAP = 4  # unchanged cells rewritten rather than skipped with a cursor move (~8 bytes)
SYNC_START, SYNC_END = "\x1b[?2026h", "\x1b[?2026l"
_ALT_SCREEN = {"47", "1047", "1049"}
_TOKEN = re.compile(
    r"\x1b\[([0-?]*)([ -/]*)([@-~])"  # CSI: parameters, intermediates, final
    r"|\x1b[\]P_^X][^\x07\x1b]*(?:\x07|\x1b\\)"  # OSC / DCS / APC / PM / SOS strings
    r"|\x1b"  # any other escape: not understood
    r"|[\x00-\x1f\x7f]"  # a control character
    r"|[^\x00-\x1f\x7f\x1b]+")  # text


class _Unknown(Exception):
    """A write holds something the model does not follow."""


class ScreenDiff:
    """What the terminal shows; `reduce(data)` is `data` less what is already there."""

    def __init__(self) -> None:
        self.cells: dict[tuple[int, int], Cell] = {}
        self.size: tuple[int, int] | None = None
        self.cursor: tuple[int, int] | None = None  # where the terminal's cursor is
        self.sync_pending = False  # a synchronized-output start not sent yet
        self._unread: list[str] = []  # writes sent as they were, not yet in the model

    def forget(self) -> None:
        """Nothing on the screen is known: the next writes go out whole."""
        self.cells.clear()
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
        if not self.cells:
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
        for match in _TOKEN.finditer(data):
            token = match.group()
            params, inter, final = match.groups()
            if final is not None:  # a CSI sequence
                if final == "H" and not inter:
                    numbers = params.split(";")
                    if len(numbers) > 2 or not all(n.isdigit() or n == "" for n in numbers):
                        raise _Unknown
                    row = int(numbers[0] or 1) - 1
                    col = int(numbers[1] or 1) - 1 if len(numbers) == 2 else 0
                    moved = True
                elif final == "m" and not inter:
                    if params in ("", "0"):
                        pen = ""
                    elif params.startswith("0;"):
                        pen = params[2:]
                    elif not params[:1].isdigit():
                        raise _Unknown
                    else:
                        pen = f"{pen};{params}" if pen else params
                elif self._harmless(params, inter, final):
                    out.append(self._flush(changed, sent))
                    out.append(token)
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

    def _text(self, row: int, col: int, text: str, pen: str, width: int | None,
              changed: set[tuple[int, int]]) -> int:
        """Write a run of text at (row, col) into the model; the next column."""
        n = len(text)
        end = col + n
        if (width is None or end <= width) and _narrow(text):
            # The common case, a cell per character: compared in one go, and cell by
            # cell only where the run changed.
            cells = self.cells
            keys = [(row, c) for c in range(col, end)]
            old = [cells.get(key) for key in keys]
            new = [(char, pen) for char in text]
            if old == new:
                return end
            left, right = cells.get((row, col - 1)), cells.get((row, end))
            if not any(cell is not None and cell[0] == "" for cell in old) and not (
                    left is not None and cell_len(left[0]) == 2) and not (
                    right is not None and right[0] == ""):
                for key, before, cell in zip(keys, old, new, strict=True):
                    if before != cell:
                        cells[key] = cell
                        changed.add(key)
                return end
        for char in text:  # wide characters, or a run over one: cell by cell
            col = self._put(row, col, char, pen, width, changed)
        return col

    def _put(self, row: int, col: int, char: str, pen: str, width: int | None,
             changed: set[tuple[int, int]]) -> int:
        """Write one character at (row, col) into the model; the next column."""
        w = cell_len(char)
        if w not in (1, 2) or (width is not None and col + w > width):
            raise _Unknown  # zero-width, or wrapping at the margin
        cells = self.cells
        new = [(char, pen)] + [("", pen)] * (w - 1)
        for i, cell in enumerate(new):
            key = (row, col + i)
            old = cells.get(key)
            if old == cell:
                continue
            # Overwriting half of a wide character erases the other half on the terminal.
            if old is not None and old[0] == "" and i == 0:
                self._erase(row, col - 1, changed)
            if old is not None and cell_len(old[0]) == 2 and i == w - 1:
                self._erase(row, col + i + 1, changed)
            cells[key] = cell
            changed.add(key)
        return col + w

    def _erase(self, row: int, col: int, changed: set[tuple[int, int]]) -> None:
        """The half of a wide character left when the other half is overwritten: the
        terminal blanks it; what it shows is not modelled."""
        if (row, col) in changed:
            raise _Unknown  # a cell written twice in one write: Textual's bytes as they are
        self.cells.pop((row, col), None)

    def _flush(self, changed: set[tuple[int, int]], sent: bool = False) -> str:
        """The changed cells, in runs, left to right; the pen reset at the end (none
        when the write that changed them was `sent` as it was)."""
        if not changed:
            return ""
        if sent:
            changed.clear()
            return ""
        cells = self.cells
        out: list[str] = []
        pen = ""
        for row, start, end in self._runs(changed):
            out.append(f"\x1b[{row + 1};{start + 1}H")
            for col in range(start, end):
                char, style = cells[(row, col)]
                if not char:
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
        cells = self.cells
        runs: list[list[int]] = []
        for row, col in sorted(changed):
            if (row, col) not in cells:
                continue
            start = col
            if cells[(row, col)][0] == "" and (row, col - 1) in cells:
                start = col - 1  # a wide character starts one cell earlier
            end = col + 1
            if (row, end) in cells and cells[(row, end)][0] == "" and \
                    cell_len(cells[(row, col)][0]) == 2:
                end += 1
            last = runs[-1] if runs else None
            if last is not None and last[0] == row and (start <= last[2] or (
                    start - last[2] <= GAP
                    and all((row, c) in cells for c in range(last[2], start)))):
                last[2] = max(last[2], end)  # next to the run (the common case), or a gap
            else:
                runs.append([row, start, end])
        result = []
        for row, start, end in runs:
            if cells[(row, start)][0] == "" and (row, start - 1) in cells:
                start -= 1  # a bridged gap may begin inside a wide character
            result.append((row, start, end))
        return result


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
