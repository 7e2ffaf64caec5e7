"""The terminal writer: what it sends makes the same screen as Textual's own output.

A minimal terminal (cells, SGR attributes, wide characters, auto-wrap) is fed Textual's
real output of the monitor (8 GPUs, ticks fed by hand, a wide-character process name)
and, separately, what the writer makes of it; after every write both screens must be
identical, and the writer must send far fewer bytes. The writer's model was a dict of
cells; what it sends must stay what it sent then, byte for byte: that writer is kept as
a reference (tests/ui/screen_diff_reference.py) and every write here goes through both.
"""

from __future__ import annotations

import random
from typing import ClassVar

import pytest
from rich.cells import cell_len
from textual.drivers.headless_driver import HeadlessDriver

from gputui.telemetry.sampler import Sampler
from gputui.ui.app import GputuiApp
from gputui.ui.options import AppOptions
from gputui.ui.terminal_writer import SYNC_END, SYNC_START, DiffingDriver, ScreenDiff
from tests.ui import screen_diff_reference
from tests.ui.helpers import feed, gpu, proc, snap

WIDTH, HEIGHT = 160, 50


class Terminal:
    """Just enough of a VT100/xterm to see what a screen shows."""

    def __init__(self, width: int = WIDTH, height: int = HEIGHT) -> None:
        self.width, self.height = width, height
        self.cells = [[(" ", ())] * width for _ in range(height)]
        self.row = self.col = 0
        self.attrs: dict[str, object] = {}

    def screen(self) -> list[list[tuple[str, tuple[object, ...]]]]:
        return [list(row) for row in self.cells]

    def feed(self, data: str) -> None:
        i = 0
        while i < len(data):
            ch = data[i]
            if data.startswith("\x1b[", i):
                j = i + 2
                while not ("@" <= data[j] <= "~"):
                    j += 1
                self.csi(data[i + 2:j], data[j])
                i = j + 1
            elif data.startswith(("\x1b]", "\x1bP"), i):  # strings: no cells
                ends = [e for e in (data.find("\x07", i), data.find("\x1b\\", i + 1)) if e > 0]
                i = min(ends) + (1 if min(ends) == data.find("\x07", i) else 2)
            elif ch == "\r":
                self.col, i = 0, i + 1
            elif ch == "\n":
                self.row, i = min(self.row + 1, self.height - 1), i + 1
            elif ch < " ":
                i += 1
            else:
                self.put(ch)
                i += 1

    def put(self, ch: str) -> None:
        width = cell_len(ch)
        if width == 0:
            return  # a combining mark joins the cell before: not drawn here
        if self.col + width > self.width:  # auto-wrap
            self.col, self.row = 0, min(self.row + 1, self.height - 1)
        row, style = self.cells[self.row], tuple(sorted(self.attrs.items()))
        for c in (self.col, self.col + width - 1):  # a half-overwritten wide char is blanked
            if row[c][0] == "" and c > 0:
                row[c - 1] = (" ", row[c - 1][1])
            if c + 1 < self.width and row[c + 1][0] == "" and cell_len(row[c][0]) == 2:
                row[c + 1] = (" ", row[c + 1][1])
        row[self.col] = (ch, style)
        if width == 2:
            row[self.col + 1] = ("", style)
        self.col += width

    def csi(self, params: str, final: str) -> None:
        if params.startswith("?") or final not in "HmJ":
            return
        if final == "H":
            r, _, c = params.partition(";")
            self.row, self.col = int(r or 1) - 1, int(c or 1) - 1
        elif final == "J":
            self.cells = [[(" ", ())] * self.width for _ in range(self.height)]
        else:
            self.sgr([int(p or 0) for p in params.split(";")] if params else [0])

    def sgr(self, codes: list[int]) -> None:
        names = {1: "bold", 2: "dim", 3: "italic", 4: "underline", 5: "blink", 7: "reverse",
                 8: "conceal", 9: "strike", 53: "overline"}
        while codes:
            code = codes.pop(0)
            if code == 0:
                self.attrs.clear()
            elif code in names:
                self.attrs[names[code]] = True
            elif code in (38, 48):
                kind = codes.pop(0)
                value = codes.pop(0) if kind == 5 else tuple(codes.pop(0) for _ in range(3))
                self.attrs["fg" if code == 38 else "bg"] = value
            elif 30 <= code <= 37 or 90 <= code <= 97:
                self.attrs["fg"] = code
            elif 40 <= code <= 47 or 100 <= code <= 107:
                self.attrs["bg"] = code
            else:
                self.attrs[f"sgr{code}"] = True


def check_same(writes: list[str], size: tuple[int, int] = (WIDTH, HEIGHT)) -> tuple[int, int]:
    """Feed `writes` to one terminal as they are and to another through the writer;
    the screens agree after every write, and the writer sends what the reference sends.
    Returns (bytes Textual wrote, bytes sent)."""
    full, reduced = Terminal(*size), Terminal(*size)
    diff, reference = ScreenDiff(), screen_diff_reference.ScreenDiff()
    diff.resize(size)
    reference.resize(size)
    sent = 0
    for data in writes:
        out = diff.write(data)
        assert out == reference.write(data)
        full.feed(data)
        reduced.feed(out)
        sent += len(out.encode())
        if data != SYNC_START:
            assert reduced.screen() == full.screen()
    return sum(len(d.encode()) for d in writes), sent


class Recording(HeadlessDriver):
    """Textual's output as it would go to a terminal, kept instead of written."""

    writes: ClassVar[list[str]] = []

    @property
    def is_headless(self) -> bool:
        return False  # Textual renders frames only for a driver with output

    def write(self, data: str) -> None:
        Recording.writes.append(data)


async def test_monitor_ticks_look_the_same_with_far_fewer_bytes() -> None:
    Recording.writes = []
    sampler = Sampler(interval=1.0, nvml=None)
    app = GputuiApp(AppOptions(), sampler=sampler)
    assert app.driver_class is DiffingDriver  # what a real terminal gets
    app.driver_class = Recording
    procs = [proc(31337, 0, 61.5, command="python 训练.py --模型 resnet50"),
             proc(4711, 3, 18.25, user="bob", command="python serve.py")]
    async with app.run_test(size=(WIDTH, HEIGHT), headless=False) as pilot:
        for t in range(12):
            feed(sampler, t, t + 1, lambda t: snap(t, [gpu(i, t) for i in range(8)], procs))
            await pilot.pause()
    frames = [w for w in Recording.writes if len(w) > 1000]
    assert len(frames) >= 12  # a first full screen and repaints on every tick
    first = Recording.writes.index(frames[0])
    textual_bytes, sent = check_same(Recording.writes)
    # After the first full screen, each tick changes a few digits per GPU.
    _, steady = check_same(Recording.writes[:first + 1])
    assert "训练" in "".join(frames)
    assert sent - steady < (textual_bytes - steady) / 5


def test_an_unchanged_frame_sends_nothing_and_a_change_sends_its_cells() -> None:
    diff = ScreenDiff()
    diff.resize((20, 3))
    frame = "\x1b[1;1H\x1b[1;38;5;9mGPU 0\x1b[0m\x1b[0;7m 42%\x1b[0m\x1b[3;1H"
    assert diff.write(SYNC_START) == ""
    assert diff.write(frame).startswith(SYNC_START)
    assert diff.write(SYNC_END) == SYNC_END
    for part in (SYNC_START, frame, SYNC_END):
        assert diff.write(part) == ""  # the marks of an empty frame are dropped too
    out = diff.write(frame.replace("42", "43"))
    assert out == "\x1b[1;8H\x1b[0;7m3\x1b[0m\x1b[3;1H"


def test_wide_characters_are_written_whole() -> None:
    writes = ["\x1b[1;1Hab训练cd\x1b[2;1Hxx", "\x1b[1;1Hab训x cd", "\x1b[1;1Ha训练 cd",
              "\x1b[1;1Ha训练 ce", "\x1b[1;1H训练训练"]
    check_same(writes)


def test_plain_text_over_half_of_a_wide_character_leaves_the_same_screen() -> None:
    # Runs of one-cell characters written over wide ones: starting on a second half,
    # ending on a first half, covering both, and unchanged runs beside them.
    base = "\x1b[1;1Hab训练cd\x1b[2;1H训x练"
    check_same([base, "\x1b[1;3Hxyz", base, "\x1b[1;4Hq", base, "\x1b[1;2Hbxy",
                base, "\x1b[2;2Hx", base, "\x1b[2;1Hab", "\x1b[1;1Hab训练cd"])


def random_writes(rng: random.Random, width: int, height: int) -> list[str]:
    """Writes in Textual's grammar and around it: styled runs with wide characters over
    the halves of others, the same frame again, runs to the margin, a zero-width
    character, modes, strings, line ends, styles the model does not follow; each ends
    with the style reset, as Textual's do."""
    chars = "ab x█é训练"

    def frame() -> str:
        parts = []
        for _ in range(rng.randint(1, 8)):
            runs = []
            for _ in range(rng.randint(1, 3)):
                style = rng.choice(["", "0", "1", "0;7", "97;40", "1;38;2;1;2;3", "38;5;9"])
                text = "".join(rng.choice(chars) for _ in range(rng.randint(1, 4)))
                if rng.random() < 0.01:
                    style = ";1"  # not followed
                if rng.random() < 0.01:
                    text += "\u0301"
                reset = rng.choice(["\x1b[0m", "\x1b[0m", "\x1b[m", ""])
                runs.append(f"\x1b[{style}m{text}{reset}")
            # Mostly where the runs fit; now and then to the margin and past it.
            last = width if rng.random() < 0.03 else max(1, width - 2 * len(runs) * 4)
            parts.append(f"\x1b[{rng.randint(1, height)};{rng.randint(1, last)}H")
            parts += runs
            parts.append(rng.choice(["", "", "", "\r\n", "\x1b[?25l", "\x1b]9;hi\x07"]))
        return "".join(parts) + "\x1b[0m"  # as Textual's: no style left for the next write

    repeated = frame()
    writes = []
    for _ in range(rng.randint(2, 12)):
        writes.append(rng.choice([SYNC_START, SYNC_END]) if rng.random() < 0.1 else
                      repeated if rng.random() < 0.3 else frame())
    return writes


def test_random_writes_are_sent_as_the_reference_sends_them() -> None:
    rng = random.Random(1)
    followed = total = 0
    for _ in range(100):
        width, height = rng.choice([(30, 3), (40, 2), (60, 4)])
        check_same(random_writes(rng, width, height), (width, height))
        writes = random_writes(rng, width, height)  # the terminal's size not known
        diff, reference = ScreenDiff(), screen_diff_reference.ScreenDiff()
        sent = [diff.write(w) for w in writes]
        assert sent == [reference.write(w) for w in writes]
        followed += sum(out != w for out, w in zip(sent, writes, strict=True))
        total += len(writes)
    assert followed > total / 4  # not mostly sent as they were: the model was used


def test_unknown_output_goes_out_as_is_and_the_screen_is_redrawn_after() -> None:
    frame = "\x1b[1;1Hhello\x1b[2;1Hworld"
    diff = ScreenDiff()
    diff.resize((20, 3))
    diff.write(frame)
    clear = "\x1b[2J\x1b[1;1Hhello"
    assert diff.write(clear) == clear  # a clear: not modelled, sent as Textual wrote it
    assert "world" in diff.write(frame)  # the model was forgotten: all of it again
    diff.resize((30, 3))  # the terminal was resized: nothing is known any more
    assert "hello" in diff.write(frame)
    check_same([frame, clear, frame, "\x1b[1;3H\x1b[5Amore", frame])


def test_modes_and_notifications_pass_through_in_order() -> None:
    diff = ScreenDiff()
    diff.resize((20, 3))
    diff.write("\x1b[1;1Hhi")
    data = "\x1b[?25l\x1b]9;done\x07\x1b[1;1Hho\x07\x1bPtmux;x\x1b\\"
    assert diff.write(data) == ("\x1b[?25l\x1b]9;done\x07\x1b[1;2Ho\x07\x1bPtmux;x\x1b\\"
                                "\x1b[1;3H")
    assert diff.write("\x1b[?1049h") == "\x1b[?1049h"  # the other screen: nothing known
    assert diff.write("\x1b[1;1Hho") == "\x1b[1;1Hho"  # as Textual wrote it


def test_the_writer_runs_only_on_a_textual_version_the_adapter_knows(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Its grammar is Textual's output as the tested versions write it: on another
    version the monitor and the fleet view run with Textual's own driver."""
    from textual.app import App

    from gputui.fleet.poller import FleetPoller
    from gputui.ui import textual_adapter
    from gputui.ui.fleet_app import FleetApp

    poller = FleetPoller([])  # never started
    assert GputuiApp(AppOptions()).driver_class is DiffingDriver
    assert FleetApp(poller).driver_class is DiffingDriver
    monkeypatch.setattr(textual_adapter, "textual_version", lambda: (99, 0))
    textuals_own = App().get_driver_class()
    assert textuals_own is not DiffingDriver
    assert GputuiApp(AppOptions()).driver_class is textuals_own
    assert FleetApp(poller).driver_class is textuals_own
