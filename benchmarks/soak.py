#!/usr/bin/env python3
"""Long-run soak of the monitor: does `gputui` keep its memory and CPU flat?

Runs the real `gputui` in a 160×50 tmux pane against the fake NVML library with 8
GPUs (tests/fakenvml, scenario eight_gpus.conf) at `--interval` (0.2 s) for
`--minutes`, and samples the process every `--every` seconds:

- RSS (MB) from psutil, and the kernel's high-water mark (VmHWM) at the end;
- CPU as a % of one core over each sample period (psutil cpu_times deltas).

With `--resize-storm S`, the pane is first resized back and forth for S seconds
(what a user dragging a terminal window does) and the RSS retained 10 s after the
storm is reported.

    python benchmarks/soak.py [--minutes 30] [--interval 0.2] [--every 60] [--json]

Needs tmux and gcc. Not a test: numbers depend on the machine and its load (printed).
The history ring buffers fill for 15 minutes (the longest sparkline window), so RSS
grows until then by design; past that it should be flat.
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
from tests.fakenvml.harness import build_library, scenario_path  # noqa: E402

WIDTH, HEIGHT = 160, 50


def _hwm_mb(pid: int) -> float | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024 / 1e6
    except (OSError, ValueError, IndexError):
        pass
    return None


def _resize_storm(s: TmuxSession, seconds: float) -> int:
    sizes = [(80, 24), (200, 60), (120, 40), (100, 30), (160, 50)]
    n = 0
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        w, h = sizes[n % len(sizes)]
        s.tmux("resize-window", "-t", s.name, "-x", str(w), "-y", str(h))
        n += 1
        time.sleep(0.05)
    s.tmux("resize-window", "-t", s.name, "-x", str(WIDTH), "-y", str(HEIGHT))
    return n


def soak(minutes: float, interval: float, every: float, storm_s: float) -> dict[str, object]:
    lib = build_library()
    with tempfile.TemporaryDirectory(prefix="gputui-soak-") as tmp_name:
        tmp = Path(tmp_name)
        base = {k: v for k, v in os.environ.items()
                if not k.startswith(("FAKENVML_", "GPUTUI_", "TMUX"))}
        for var in ("XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME", "XDG_CACHE_HOME"):
            base[var] = str(tmp / var.lower())
        env = lib.env(scenario_path("eight_gpus"), base=base)
        command = [*gputui_command(), "--interval", str(interval)]
        with TmuxSession(command, env=env, width=WIDTH, height=HEIGHT, name="soak") as s:
            s.wait_for("H100", timeout=60, interval=0.05)
            pid = s.pid
            if pid is None:
                raise RuntimeError("gputui is not running: " + s.capture()[-500:])
            proc = psutil.Process(pid)
            storm: dict[str, object] | None = None
            if storm_s > 0:
                time.sleep(5)
                before = proc.memory_info().rss / 1e6
                resizes = _resize_storm(s, storm_s)
                time.sleep(10)
                after = proc.memory_info().rss / 1e6
                storm = {"seconds": storm_s, "resizes": resizes, "rss_before_mb":
                         round(before, 1), "rss_after_mb": round(after, 1),
                         "retained_mb": round(after - before, 1)}
            samples = []
            t0 = time.monotonic()
            cpu_prev = proc.cpu_times()
            w_prev = t0
            samples.append({"minute": 0.0, "rss_mb": round(proc.memory_info().rss / 1e6, 1),
                            "cpu_pct": None})
            end = t0 + minutes * 60
            while (now := time.monotonic()) < end:
                time.sleep(min(every, end - now))
                cpu = proc.cpu_times()
                w = time.monotonic()
                used = (cpu.user + cpu.system) - (cpu_prev.user + cpu_prev.system)
                samples.append({
                    "minute": round((w - t0) / 60, 2),
                    "rss_mb": round(proc.memory_info().rss / 1e6, 1),
                    "cpu_pct": round(100 * used / (w - w_prev), 1),
                })
                cpu_prev, w_prev = cpu, w
            hwm = _hwm_mb(pid)
            s.send_keys("q")
            status = s.wait_exit(timeout=30)
    return {
        "interval_s": interval, "gpus": 8, "terminal": f"{WIDTH}x{HEIGHT}",
        "minutes": minutes, "samples": samples, "peak_rss_mb": None if hwm is None
        else round(hwm, 1), "resize_storm": storm, "exit_status": status,
        "load_avg_1m": round(os.getloadavg()[0], 2), "cpus": os.cpu_count(),
    }


def report(r: dict[str, object]) -> str:
    lines = [f"gputui soak: 8 fake GPUs, every {r['interval_s']:g}s, {r['terminal']}, "
             f"{r['minutes']:g} min (machine load {r['load_avg_1m']} on {r['cpus']} CPUs)",
             "minute  RSS MB  CPU % of a core"]
    for smp in r["samples"]:  # type: ignore[union-attr]
        cpu = "-" if smp["cpu_pct"] is None else f"{smp['cpu_pct']:.1f}"
        lines.append(f"{smp['minute']:>6.2f}  {smp['rss_mb']:>6.1f}  {cpu:>6}")
    lines.append(f"peak RSS (VmHWM) {r['peak_rss_mb']} MB; exit status {r['exit_status']}")
    st = r.get("resize_storm")
    if st:
        lines.append(f"resize storm: {st['resizes']} resizes in {st['seconds']:g}s, RSS "  # type: ignore[index]
                     f"{st['rss_before_mb']} → {st['rss_after_mb']} MB "  # type: ignore[index]
                     f"(retained {st['retained_mb']} MB)")  # type: ignore[index]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--minutes", type=float, default=30.0, help="how long to run (30)")
    ap.add_argument("--interval", type=float, default=0.2, help="gputui --interval (0.2)")
    ap.add_argument("--every", type=float, default=60.0, help="seconds between samples (60)")
    ap.add_argument("--resize-storm", type=float, default=0.0, metavar="S",
                    help="resize the pane back and forth for S seconds first (0: no)")
    ap.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = ap.parse_args(argv)
    if not tmux_available():
        print("soak: tmux is not installed", file=sys.stderr)
        return 2
    r = soak(args.minutes, args.interval, args.every, args.resize_storm)
    print(json.dumps(r, indent=2) if args.json else report(r))
    return 0


if __name__ == "__main__":
    sys.exit(main())
