"""`?`: every key, in one table."""

from __future__ import annotations

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

# (key, what it does, section). The app's bindings are built from the same facts,
# but this list also names the keys other widgets own (table navigation, palette).
KEYS: tuple[tuple[str, str, str], ...] = (
    ("q", "quit", "General"),
    ("?", "this help", "General"),
    ("ctrl+p", "command palette (themes, window, compact, alerts)", "General"),
    ("ctrl+l", "redraw the whole screen (after another program wrote over it)", "General"),
    ("a", "alerts: throttle episodes and active alerts", "General"),
    ("b", "benchmarks: run, queue, cancel (x), mark (space) and compare (c) results",
     "General"),
    ("d", "doctor: configuration and health checks of every GPU (r again, x stop)",
     "General"),
    ("h", "history: line charts of one GPU (w window, n/p next/previous GPU)", "View"),
    ("i", "GPU info: everything NVML gives for one GPU (n/p next/previous GPU)", "View"),
    ("c", "compact / full GPU panels (automatic by size until pressed)", "View"),
    ("w", "history window: 1 / 5 / 15 min", "View"),
    ("t", "next theme", "View"),
    ("tab", "focus the GPU panels when they do not fit, then ↑ ↓ PgUp PgDn scroll them",
     "View"),
    ("↑ ↓ PgUp PgDn", "move in the process table", "Processes"),
    ("s / S", "sort by next column / reverse order (or click a header)", "Processes"),
    ("k", "send SIGTERM to the selected process (asks first)", "Processes"),
    ("K", "send SIGKILL to the selected process (asks first)", "Processes"),
    ("g", "group by user, container or pod, with totals (again: the next; then none)",
     "Processes"),
    ("enter", "run the picked benchmark (on the list or in a field)", "Benchmarks"),
    ("ctrl+r", "run now, or after the queue if one is running", "Benchmarks"),
    ("ctrl+n", "add to the queue", "Benchmarks"),
    ("x / ctrl+g", "cancel the running benchmark (partial result kept)", "Benchmarks"),
    ("X", "clear the queue", "Benchmarks"),
    ("delete", "remove the highlighted queued run", "Benchmarks"),
    ("space / m", "mark a result (two: A then B)", "Benchmarks"),
    ("c", "compare the two marked results", "Benchmarks"),
    ("esc", "back to the monitor (a run goes on)", "Benchmarks"),
    ("space", "pause / play", "Replay"),
    (". / ,", "step one snapshot forward / back", "Replay"),
    ("→ / ←", "seek 10 s forward / back", "Replay"),
    ("] / [", "speed ×2 / ÷2", "Replay"),
    ("home / end", "jump to start / end", "Replay"),
)
# Keys that do nothing in replay (the monitor screen disables k and K there; b and d say
# they are not available).
REPLAY_HIDDEN = frozenset({"k", "K", "b", "d"})


class HelpScreen(ModalScreen[None]):
    DEFAULT_CSS = """
    HelpScreen { align: center middle; }
    HelpScreen > VerticalScroll {
        width: 84; max-width: 96%; height: auto; max-height: 90%;
        border: round $primary; background: $surface; padding: 0 1;
    }
    """
    BINDINGS = [  # noqa: RUF012
        Binding("escape,q,question_mark", "dismiss", "Close"),
    ]

    def __init__(self, replay: bool = False) -> None:
        super().__init__()
        self.replay = replay

    def compose(self) -> ComposeResult:
        table = Table(box=None, show_header=False, pad_edge=False)
        table.add_column(style="bold", no_wrap=True)
        table.add_column()
        section = ""
        for key, what, sec in KEYS:
            if sec == "Replay" and not self.replay:
                continue
            if self.replay and (sec == "Benchmarks" or key in REPLAY_HIDDEN):
                continue  # a recorded PID is not a process to signal; no runs in replay
            if sec != section:
                section = sec
                table.add_row(Text(sec, style="underline"), "")
            table.add_row(key, what)
        with VerticalScroll() as v:
            v.border_title = "Keys (esc closes)"
            yield Static(table)
