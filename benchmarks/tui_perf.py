#!/usr/bin/env python3
"""How much the monitor costs the machine it watches: `gputui` in tmux, 8 fake GPUs.

Runs the real `gputui` in a 160×50 tmux pane against the fake NVML library
(tests/fakenvml, scenario eight_gpus.conf) at 1 Hz for 20 s and measures:

- first frame: from exec'ing gputui until `capture-pane` shows a GPU name;
- CPU: the gputui process's user+system CPU time over the measured window, as a % of
  one core (psutil cpu_times delta / wall time); start-up is excluded;
- peak RSS: the kernel's high-water mark (VmHWM) at the end, else the largest sample;
- terminal output: bytes gputui wrote to the pane (`tmux pipe-pane`) after the first
  frame, per second — what an SSH link has to carry;
- NVML calls/s: the fake library's call count (FAKENVML_STATS_FILE, written at exit,
  so gputui is quit with `q`) over the whole run from start to `q`, start-up included.

    python benchmarks/tui_perf.py [--duration 20] [--interval 1] [--json] [--strict]

Needs tmux and gcc (the fake library is built with the test harness). Not a test:
numbers depend on the machine and its load, which is printed alongside.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tests.e2e.tmux import TmuxSession, gputui_command, tmux_available  # noqa: E402
from tests.fakenvml.harness import build_library, read_stats, scenario_path  # noqa: E402

WIDTH, HEIGHT = 160, 50
GPU_NAME = "H100"  # eight_gpus.conf: "NVIDIA H100 80GB HBM3" (compact layouts may shorten)

# metric → (target, unit, lower is better)
TARGETS: dict[str, tuple[float, str]] = {
    "cpu_pct": (2.0, "% of one core"),
    "term_bytes_per_s": (4096.0, "B/s"),
    "peak_rss_mb": (100.0, "MB"),
    "nvml_calls_per_s": (120.0, "calls/s"),
    "first_frame_s": (1.0, "s"),
}
LABELS = {
    "cpu_pct": "CPU",
    "term_bytes_per_s": "terminal output",
    "peak_rss_mb": "peak RSS",
    "nvml_calls_per_s": "NVML calls",
    "first_frame_s": "first frame",
}


def _vm_hwm_bytes(pid: int) -> int | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def measure(duration: float, interval: float) -> dict[str, object]:
    lib = build_library()
    with tempfile.TemporaryDirectory(prefix="gputui-perf-") as tmp_name:
        tmp = Path(tmp_name)
        stats_file = tmp / "nvml-stats.txt"
        pipe_file = tmp / "terminal.out"
        base = {k: v for k, v in os.environ.items()
                if not k.startswith(("FAKENVML_", "GPUTUI_", "TMUX"))}
        for var in ("XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME", "XDG_CACHE_HOME"):
            base[var] = str(tmp / var.lower())
        env = lib.env(scenario_path("eight_gpus"), stats_file=stats_file, base=base)
        # Gated: gputui starts only once pipe-pane is attached, so no byte is missed and
        # the clock starts when gputui does, not when tmux does.
        command = [*gputui_command(), "--interval", str(interval)]
        with TmuxSession(command, env=env, width=WIDTH, height=HEIGHT, name="perf",
                         gated=True) as s:
            s.tmux("pipe-pane", "-o", "-t", s.name, f"cat >> '{pipe_file}'")
            s.release()
            t0 = time.monotonic()
            s.wait_for(GPU_NAME, timeout=60, interval=0.02)
            first_frame_s = time.monotonic() - t0
            pid = s.pid
            if pid is None:
                raise RuntimeError("gputui is not running: " + s.capture()[-500:])
            proc = psutil.Process(pid)
            bytes0 = pipe_file.stat().st_size if pipe_file.exists() else 0
            cpu0 = proc.cpu_times()
            w0 = time.monotonic()
            peak_rss = proc.memory_info().rss
            while (left := duration - (time.monotonic() - w0)) > 0:
                time.sleep(min(0.5, left))
                peak_rss = max(peak_rss, proc.memory_info().rss)
            cpu1 = proc.cpu_times()
            wall = time.monotonic() - w0
            bytes1 = pipe_file.stat().st_size if pipe_file.exists() else 0
            hwm = _vm_hwm_bytes(pid)
            screen = s.capture()
            s.send_keys("q")
            run_s = time.monotonic() - t0  # NVML calls after this are only the shutdown
            status = s.wait_exit(timeout=30)
        stats = read_stats(stats_file) if stats_file.exists() else {}
    cpu_s = (cpu1.user + cpu1.system) - (cpu0.user + cpu0.system)
    calls = stats.get("calls")
    top = sorted(((k, v) for k, v in stats.items() if k != "calls"), key=lambda kv: -kv[1])[:8]
    return {
        "first_frame_s": round(first_frame_s, 3),
        "cpu_pct": round(100.0 * cpu_s / wall, 2),
        "peak_rss_mb": round((hwm or peak_rss) / 1e6, 1),
        "term_bytes_per_s": round((bytes1 - bytes0) / wall, 1),
        "nvml_calls_per_s": None if calls is None else round(calls / run_s, 1),
        "details": {
            "measured_s": round(wall, 2),
            "run_s": round(run_s, 2),
            "interval_s": interval,
            "terminal": f"{WIDTH}x{HEIGHT}",
            "gpus": 8,
            "exit_status": status,
            "nvml_calls_total": calls,
            "nvml_top_calls": dict(top),
            "terminal_bytes_total": bytes1,
            "peak_rss_source": "VmHWM" if hwm else "sampled",
            "load_avg_1m": round(os.getloadavg()[0], 2),
            "cpus": os.cpu_count(),
            "screen_has_gpu": GPU_NAME in screen,
        },
    }


def report(result: dict[str, object]) -> tuple[str, bool]:
    rows = []
    all_ok = True
    for key, (target, unit) in TARGETS.items():
        value = result.get(key)
        ok = isinstance(value, int | float) and value < target
        all_ok &= ok
        shown = "n/a" if value is None else f"{value:g}"
        rows.append((LABELS[key], f"{shown} {unit}", f"< {target:g} {unit}",
                     "ok" if ok else "MISSED"))
    widths = [max(len(r[i]) for r in [*rows, ("metric", "value", "target", "")])
              for i in range(4)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(("metric", "value", "target", ""), widths,
                                                   strict=True)).rstrip()]
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip()
              for r in rows]
    d = result["details"]
    assert isinstance(d, dict)
    lines.append(f"({d['gpus']} fake GPUs, {d['terminal']}, every {d['interval_s']:g}s, "
                 f"measured over {d['measured_s']}s after the first frame; machine load "
                 f"{d['load_avg_1m']} on {d['cpus']} CPUs; gputui exit status "
                 f"{d['exit_status']})")
    return "\n".join(lines), all_ok


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--duration", type=float, default=20.0, help="seconds measured (20)")
    ap.add_argument("--interval", type=float, default=1.0, help="gputui --interval (1)")
    ap.add_argument("--json", action="store_true", help="print the figures as JSON")
    ap.add_argument("--strict", action="store_true", help="exit 1 if a target is missed")
    args = ap.parse_args(argv)
    if not tmux_available():
        print("tui_perf: tmux is not installed", file=sys.stderr)
        return 2
    result = measure(args.duration, args.interval)
    text, ok = report(result)
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print(text)
    return 1 if args.strict and not ok else 0


if __name__ == "__main__":
    sys.exit(main())
