"""Rich renderables for `gputui snapshot` (headless; no Textual)."""

from __future__ import annotations

from collections.abc import Iterator

from rich.console import RenderableType
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from gputui.safe_text import printable
from gputui.telemetry.model import GpuSample, Snapshot
from gputui.telemetry.throttle import is_throttling, state_words
from gputui.telemetry.units import (
    NA,
    fmt_bytes,
    fmt_duration,
    fmt_j,
    fmt_j_per,
    fmt_mhz,
    fmt_pct,
    fmt_per_s,
    fmt_rate,
    fmt_step_time,
    fmt_temp,
    fmt_w,
)


def _t(value: object, style: str = "") -> Text:
    """Text from outside gputui (driver, process table, hostname): control characters
    escaped, and a Text, so Rich never reads it as markup."""
    return Text(printable(value), style=style)


def _of(a: str, b: str) -> str:
    return a if b == NA else f"{a} / {b}"


def _temp(g: GpuSample) -> str:
    t = fmt_temp(g.temp_c)
    if g.info.temp_slowdown_c is not None:
        t += f" (slowdown {g.info.temp_slowdown_c}°C)"
    return t


def _pcie(g: GpuSample) -> str:
    if g.pcie_gen is None and g.pcie_width is None:
        return NA
    gen = "?" if g.pcie_gen is None else str(g.pcie_gen)
    width = "?" if g.pcie_width is None else str(g.pcie_width)
    cap = ""
    if g.info.pcie_gen_max is not None and g.info.pcie_width_max is not None:
        cap = f" (max Gen{g.info.pcie_gen_max} x{g.info.pcie_width_max})"
    return f"Gen{gen} x{width}{cap}"


def _throttled(g: GpuSample) -> Text:
    """The throttled flag as the JSON's `throttling` has it: yes / no / N/A (unknown)."""
    if g.throttle_mask is None:
        return _t(NA)
    return _t("⚠ yes", "bold red") if is_throttling(g.throttle_mask) else _t("no")


def _stale_words(g: GpuSample) -> str:
    age = fmt_duration(g.stale_s or 0.0)
    if g.error:
        return f"not answering for {age} (driver call hung); no values"
    return f"STALE: not answering for {age}; values are the last good reading"


# Below this many columns the two wide GPU tables cannot show every column: use one
# card per GPU instead (nvidia-smi -q style), so a narrow terminal loses nothing.
WIDE_MIN_COLUMNS = 150


def _card(grid: Table, title: Text) -> Panel:
    # Every card as wide as the terminal: cards sized to their content had uneven edges.
    return Panel(grid, title=title, title_align="left", expand=True)


def _gpu_card(g: GpuSample) -> RenderableType:
    grid = Table.grid(padding=(0, 2))
    for _ in range(2):
        grid.add_column(style="bold", no_wrap=True)
        grid.add_column(overflow="fold")
    title = _t(f"GPU {g.index} · {g.info.name} · {g.info.pci_bus_id}")
    if g.lost or (g.error and not g.stale):
        why = "GPU is lost" if g.lost else f"unavailable: {g.error}"
        grid.add_row(_t(why, "bold red"), "", "", "")
        return _card(grid, title)
    if g.stale:
        grid.add_row(_t(_stale_words(g), "bold red"), "", "", "")
        if g.error:  # never answered: there are no values to show
            return _card(grid, title)
    rows = [
        ("Util", fmt_pct(g.util_gpu_pct), "Mem-Ctl", fmt_pct(g.util_mem_pct)),
        ("Memory", _of(fmt_bytes(g.mem_used_bytes, unit="MiB"),
                       fmt_bytes(g.mem_total_bytes, unit="MiB")),
         "Power", _of(fmt_w(g.power_w), fmt_w(g.power_limit_w))),
        ("Temp", _temp(g), "Fan", fmt_pct(g.fan_pct)),
        ("SM clock", _of(fmt_mhz(g.clock_sm_mhz), fmt_mhz(g.info.clock_sm_max_mhz)),
         "Mem clock", _of(fmt_mhz(g.clock_mem_mhz), fmt_mhz(g.info.clock_mem_max_mhz))),
        ("Perf", NA if g.pstate is None else f"P{g.pstate}", "PCIe", _pcie(g)),
        ("PCIe RX", fmt_rate(g.pcie_rx_bps), "PCIe TX", fmt_rate(g.pcie_tx_bps)),
        ("Energy", fmt_j(g.energy_j), "ECC uncorr.",
         NA if g.ecc_uncorrected is None else str(g.ecc_uncorrected)),
    ]
    for row in rows:
        grid.add_row(*row)
    words = state_words(g.throttle_mask)
    grid.add_row("Throttled", _throttled(g), "", "")
    grid.add_row("Clocks events", Text(words, style="bold red" if is_throttling(
        g.throttle_mask) else ""), "", "")
    return _card(grid, title)


def render_snapshot(s: Snapshot, width: int = WIDE_MIN_COLUMNS) -> Iterator[RenderableType]:
    sysinfo = s.system
    head = Text()
    head.append(f"{printable(s.host.hostname)}  ", style="bold")
    head.append(f"{s.time.astimezone():%Y-%m-%d %H:%M:%S %Z}  ")
    if sysinfo.driver_version or not sysinfo.amd_driver_version:
        head.append(printable(f"Driver {sysinfo.driver_version or NA}  NVML "
                              f"{sysinfo.nvml_version or NA}  CUDA "
                              f"{sysinfo.cuda_driver_version or NA}"))
    if sysinfo.amd_driver_version:
        head.append(printable(f"{'  ' if sysinfo.driver_version else ''}amdgpu "
                              f"{sysinfo.amd_driver_version}"))
    yield head
    if s.nvml_error and not s.gpus:  # an AMD box has no NVML, and needs no word on it
        yield _t(f"No GPU data: {s.nvml_error}", "bold yellow")
    if s.gpus and width < WIDE_MIN_COLUMNS:
        for g in s.gpus:
            yield _gpu_card(g)
    elif s.gpus:
        main = Table(title="GPUs", title_justify="left", expand=False, pad_edge=False)
        for col in ("GPU", "Name", "Bus-Id", "Util", "Mem-Ctl", "Memory used / total",
                    "Power / limit", "Temp", "Fan", "SM clock / max", "Perf", "Throttled"):
            main.add_column(col, no_wrap=col not in ("Name",), overflow="fold")
        more = Table(title="Links, counters and clock events", title_justify="left",
                     pad_edge=False)
        stale_notes: list[Text] = []
        for col in ("GPU", "Mem clock / max", "PCIe link", "PCIe RX", "PCIe TX",
                    "Energy", "ECC uncorr.", "Clocks event reasons"):
            more.add_column(col, overflow="fold")
        for g in s.gpus:
            idx = str(g.index)
            if g.lost or g.error:
                why = ("GPU is lost" if g.lost else _stale_words(g) if g.stale
                       else f"unavailable: {g.error}")
                main.add_row(idx, _t(g.info.name), _t(g.info.pci_bus_id),
                             _t(why, "bold red"), *[""] * 8)
                more.add_row(idx, *[""] * 7)
                continue
            if g.stale:
                idx += " STALE"  # last good values, not current ones (see the note below)
                stale_notes.append(_t(f"GPU {g.index}: {_stale_words(g)}", "bold red"))
            main.add_row(
                idx, _t(g.info.name), _t(g.info.pci_bus_id),
                fmt_pct(g.util_gpu_pct), fmt_pct(g.util_mem_pct),
                _of(fmt_bytes(g.mem_used_bytes, unit="MiB"),
                    fmt_bytes(g.mem_total_bytes, unit="MiB")),
                _of(fmt_w(g.power_w), fmt_w(g.power_limit_w)),
                _temp(g), fmt_pct(g.fan_pct),
                _of(fmt_mhz(g.clock_sm_mhz), fmt_mhz(g.info.clock_sm_max_mhz)),
                NA if g.pstate is None else f"P{g.pstate}",
                _throttled(g),
            )
            words = state_words(g.throttle_mask)
            more.add_row(
                idx,
                _of(fmt_mhz(g.clock_mem_mhz), fmt_mhz(g.info.clock_mem_max_mhz)),
                _pcie(g), fmt_rate(g.pcie_rx_bps), fmt_rate(g.pcie_tx_bps),
                fmt_j(g.energy_j), NA if g.ecc_uncorrected is None else str(g.ecc_uncorrected),
                Text(words, style="bold red" if is_throttling(g.throttle_mask) else ""),
            )
        yield main
        yield more
        yield from stale_notes
    elif not s.nvml_error:
        yield Text("No GPUs found.")
    h = s.host
    host = Table(title="Host", title_justify="left", pad_edge=False)
    for col in ("CPU", "RAM used / total", "Swap used / total", "Load average"):
        host.add_column(col)
    host.add_row(
        fmt_pct(h.cpu_pct) + f" of {len(h.cpu_per_core_pct) or '?'} cores",
        _of(fmt_bytes(h.mem_used_bytes), fmt_bytes(h.mem_total_bytes)),
        _of(fmt_bytes(h.swap_used_bytes), fmt_bytes(h.swap_total_bytes)),
        " ".join(f"{x:.2f}" for x in h.load_avg) if h.load_avg else NA,
    )
    yield host
    if s.jobs:
        yield _jobs_table(s)
    if not s.gpus:
        return
    procs = Table(title="GPU processes", title_justify="left", pad_edge=False)
    # Pod and container columns where some process runs in one (as the monitor's table).
    pods = any(p.pod_name for p in s.processes)
    containers = any(p.container for p in s.processes)
    for col in ("GPU", "PID", "User", "GPU memory", *(("Pod",) if pods else ()),
                *(("Container",) if containers else ()), "Command"):
        procs.add_column(col, overflow="fold")
    for p in sorted(s.processes, key=lambda p: (p.gpu_index, p.pid)):
        # User names, command lines and pod names are anyone's (argv is set by the process
        # itself, a log directory's name by whoever named the pod).
        where = ([_t(p.pod_name or "—")] if pods else []) + (
            [_t(p.container or "—")] if containers else [])
        procs.add_row(str(p.gpu_index), str(p.pid), _t(p.user or NA),
                      fmt_bytes(p.gpu_mem_bytes, unit="MiB") if p.gpu_mem_bytes is not None
                      else NA, *where, _t(p.command or NA))
    if not s.processes:
        procs.add_row("", "", "", "", "no processes")
    yield procs


def _jobs_table(s: Snapshot) -> Table:
    """Training jobs reporting with gputui.track (the TUI's Jobs box, as a table)."""
    t = Table(title="Jobs", title_justify="left", pad_edge=False)
    energy = any(j.energy_j is not None for j in s.jobs)
    for col in ("PID", "Name", "GPU", "Step", "Samples/s", "Tokens/s", "Step p50",
                *(("Power", "J/step") if energy else ())):
        t.add_column(col, overflow="fold")
    for j in s.jobs:
        # "~": an estimate (a GPU the job shared), as in the monitor's Jobs box.
        mark = "~" if j.energy_estimate else ""
        t.add_row(str(j.pid), _t(j.name), ",".join(map(str, j.gpus)) or NA, str(j.step),
                  fmt_per_s(j.samples_per_s), fmt_per_s(j.tokens_per_s),
                  fmt_step_time(j.step_time_s),
                  *((NA if j.power_w is None else mark + fmt_w(j.power_w),
                     NA if j.energy_per_step_j is None
                     else mark + fmt_j_per(j.energy_per_step_j)) if energy else ()))
    return t
