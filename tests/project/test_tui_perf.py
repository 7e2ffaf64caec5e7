"""benchmarks/tui_perf.py: gputui and nvitop measured the same way and
shown side by side; medians over alternating rounds; bad arguments are one line."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from types import ModuleType

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "tui_perf.py"


def _module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("tui_perf", SCRIPT)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("tui_perf", mod)  # its dataclasses look their module up
    spec.loader.exec_module(mod)
    return mod


def _run(program: str, cpu: float, term: float) -> dict[str, object]:
    return {"program": program, "cpu_pct": cpu, "term_bytes_per_s": term,
            "peak_rss_mb": 50.0, "nvml_calls_per_s": 100.0, "first_frame_s": 0.5,
            "details": {"load_avg_1m": 1.5}}


def test_medians_and_a_column_per_program() -> None:
    tp = _module()
    ours = tp.median_of([_run("gputui", 3.0, 1500.0), _run("gputui", 1.0, 900.0),
                         _run("gputui", 1.5, 1200.0)])
    theirs = tp.median_of([_run("nvitop", 5.0, 600.0), _run("nvitop", 7.0, 1100.0),
                           _run("nvitop", 6.0, 700.0)])
    assert ours["cpu_pct"] == 1.5 and ours["term_bytes_per_s"] == 1200.0
    assert theirs["cpu_pct"] == 6.0 and theirs["rounds"] == 3
    text, ok = tp.report([ours, theirs], interval=1.0, duration=20.0, settle=5.0)
    header, cpu_row = text.splitlines()[:2]
    assert header.split()[:3] == ["metric", "gputui", "nvitop"]
    assert "1.5 % of one core" in cpu_row and "6 % of one core" in cpu_row
    assert "median of 3 alternating rounds" in text
    assert ok  # the targets are checked on the first column (this gputui): 1.5 < 2 %


def test_bad_arguments_are_one_line_and_exit_2() -> None:
    proc = subprocess.run([sys.executable, str(SCRIPT), "--rounds", "0"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert proc.stderr.strip().startswith("tui_perf:") and len(proc.stderr.splitlines()) == 1


def test_scenario_for_32_gpus_has_32_distinct_gpus() -> None:
    tp = _module()
    text = tp.scenario_text(32)
    assert "device_count = 32" in text
    uuids = {ln.split("=", 1)[1].strip() for ln in text.splitlines() if ".uuid" in ln}
    buses = {ln.split("=", 1)[1].strip() for ln in text.splitlines() if ".pci_bus_id" in ln}
    assert len(uuids) == 32 and len(buses) == 32
    # GPU 9 copies GPU 1's figures (eight_gpus.conf repeated)
    assert "gpu.9.mem_used = 61000000000" in text


def test_gpu_processes_are_real_named_in_the_scenario_and_gone_afterwards() -> None:
    import psutil

    tp = _module()
    with tp.gpu_processes(2, 2) as pids:
        assert [len(row) for row in pids] == [2, 2]
        flat = [pid for row in pids for pid in row]
        assert len(set(flat)) == 4
        cmdlines = [psutil.Process(pid).cmdline() for pid in flat]
        assert cmdlines[3] == ["train-gpu1-rank1", "86400"]
        text = tp.scenario_text(2, pids)
        mem = 58000000000  # eight_gpus.conf's GPU 0: the first process, then half of it
        assert f"gpu.0.processes = {pids[0][0]}:{mem},{pids[0][1]}:{mem // 2}" in text
        assert f"gpu.1.processes = {pids[1][0]}:" in text
    assert not any(psutil.pid_exists(pid) and psutil.Process(pid).status() != "zombie"
                   for pid in flat)
    # Without real processes: the scenario's own one per GPU, a PID of its own.
    assert "gpu.1.processes = 10001:" in tp.scenario_text(2)
