"""MIG devices on screen: a one-line summary for the GPU panel and a table of the MIG
devices under their GPU for the GPU detail screen.

`mig_summary` and `mig_table_lines` are pure (a sample in, text out), so that the panel,
the detail screen and tests read the same words; `MigTable` is the widget the detail
screen mounts and feeds with `update_sample`. Profile names and UUIDs come from the driver:
they are shown through `safe_text`.
"""

from __future__ import annotations

from rich.text import Text
from textual.widgets import Static

from gputui.safe_text import printable
from gputui.telemetry.mig import MigDevice, instance_count_text
from gputui.telemetry.model import GpuSample
from gputui.telemetry.units import NA, fmt_pct, gib

# Column headers and widths of the MIG table (a width of 0: the rest of the line).
COLUMNS: tuple[tuple[str, int], ...] = (
    ("MIG", 4), ("PROFILE", 12), ("GI/CI", 6), ("MEMORY (GiB)", 14), ("SMs", 5),
    ("SM ACT", 7), ("TENSOR", 7), ("PROCESSES", 0))
MAX_PIDS = 4  # PIDs listed per MIG device before "+N more"


def mig_summary(sample: GpuSample) -> str | None:
    """"MIG on · 3 instances" for a GPU in MIG mode with MIG devices; None otherwise
    (the panel then shows no MIG line)."""
    if not sample.mig_devices:
        return None
    return f"MIG on · {instance_count_text(sample.mig_devices)}"


def _ids(m: MigDevice) -> str:
    if m.gpu_instance_id is None and m.compute_instance_id is None:
        return NA
    gi = NA if m.gpu_instance_id is None else str(m.gpu_instance_id)
    ci = NA if m.compute_instance_id is None else str(m.compute_instance_id)
    return f"{gi}/{ci}"


def _memory(m: MigDevice) -> str:
    if m.mem_used_bytes is None and m.mem_total_bytes is None:
        return NA
    return f"{gib(m.mem_used_bytes)}/{gib(m.mem_total_bytes)}"


def _processes(m: MigDevice) -> str:
    if m.processes is None:
        return NA
    if not m.processes:
        return "none"
    pids = [str(p.pid) for p in m.processes[:MAX_PIDS]]
    more = len(m.processes) - MAX_PIDS
    return " ".join(pids) + (f" +{more} more" if more > 0 else "")


def mig_row(m: MigDevice) -> tuple[str, ...]:
    """One MIG device's cells, in `COLUMNS` order."""
    return (str(m.index), printable(m.label), _ids(m), _memory(m),
            NA if m.sm_count is None else str(m.sm_count),
            fmt_pct(m.sm_active_pct), fmt_pct(m.tensor_active_pct), _processes(m))


def _line(cells: tuple[str, ...]) -> str:
    out = []
    for (_, width), cell in zip(COLUMNS, cells, strict=True):
        out.append(cell.ljust(width) if width else cell)
    return " ".join(out).rstrip()


def mig_table_lines(sample: GpuSample) -> list[str]:
    """The MIG devices of a GPU as table lines (header first); [] when it has none."""
    if not sample.mig_devices:
        return []
    return [_line(tuple(h for h, _ in COLUMNS)),
            *(_line(mig_row(m)) for m in sample.mig_devices)]


class MigTable(Static):
    """The MIG devices of one GPU (GPU detail screen); empty and hidden without MIG."""

    DEFAULT_CSS = """
    MigTable { height: auto; }
    MigTable.-empty { display: none; }
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__("", id=id)
        self.add_class("-empty")
        self.lines: list[str] = []

    def update_sample(self, sample: GpuSample) -> None:
        lines = mig_table_lines(sample)
        if lines == self.lines:
            return
        self.lines = lines
        self.set_class(not lines, "-empty")
        summary = mig_summary(sample)
        text = Text()
        if summary:
            text.append(summary + "\n", style="bold")
        if lines:
            text.append(lines[0] + "\n", style="dim")
            text.append("\n".join(lines[1:]))
        # A Text, not a markup string: nothing from the driver is parsed as markup.
        self.update(text)
