#!/usr/bin/env python3
"""How much the monitor costs the machine it watches: `gputui` in tmux, 8 fake GPUs,
optionally side by side with nvitop (or another gputui checkout) in the same setup.

Runs the real `gputui` in a 160×50 tmux pane (`--size`) against the fake NVML library
(tests/fakenvml, scenario eight_gpus.conf; `--gpus N` repeats its GPUs up to N) at its
default interval (`--interval` sets one for every program) for 20 s and measures:

- first frame: from exec'ing the program until `capture-pane` shows a GPU name;
- the measured window starts `--settle` seconds (5) after the first frame: start-up and
  the first layout passes are excluded, what is measured is the steady cost of leaving
  the monitor open;
- CPU: the process's user+system CPU time over the measured window, as a % of one core
  (psutil cpu_times delta / wall time);
- peak RSS: the kernel's high-water mark (VmHWM) at the end, else the largest sample;
- terminal output: bytes the program wrote to the pane (`tmux pipe-pane`) over the
  measured window, per second — what an SSH link has to carry;
- NVML calls/s: the fake library's call count (FAKENVML_STATS_FILE, written at exit,
  so the program is quit with `q`) over the whole run from start to `q`, start-up
  included.

GPU processes: each GPU runs `--procs-per-gpu` (2) real processes — idle `sleep`s of this
user, started for the run and killed at its end, named `train-gpuK-rankR` in their
command line — whose PIDs the scenario gives the fake GPUs, so that each monitor looks
their user, name, command, CPU % and memory up through psutil as on a real box.
`--procs-per-gpu 0` keeps the scenario's own process (one per GPU, a PID that is not
running: what the script measured before it started real ones).

`--compare nvitop` runs nvitop 1.7.2 (`nvitop --monitor auto`, at its default intervals:
devices read every 1 s, processes every 2 s, the screen redrawn every 0.2 s) the same
way, against the same fake GPUs, measured identically. It is installed from PyPI once
into build/tui-perf-nvitop/ (a venv of its own, ignored by git) and reused.
`--compare PATH` runs another gputui source tree (e.g. `git worktree add`), for
before/after figures; `--compare` may be given more than once (a tree and nvitop).
Each gputui tree is installed as `pip install .` installs it, into
a venv of its own under build/tui-perf-gputui/ (see `gputui_program`). `--rounds N`
alternates the two N times and reports each metric's median (the machine is shared and
noisy).

    python benchmarks/tui_perf.py [--duration 20] [--interval S] [--compare nvitop|PATH]...
                                  [--procs-per-gpu 2] [--rounds 3] [--json] [--strict]

Needs tmux and gcc (the fake library is built with the test harness). Not a test:
numbers depend on the machine and its load, which is printed alongside.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tests.e2e.tmux import TmuxSession, tmux_available  # noqa: E402
from tests.fakenvml.harness import build_library, read_stats, scenario_path  # noqa: E402

WIDTH, HEIGHT = 160, 50  # the default pane; --size changes it
GPU_NAME = "H100"  # eight_gpus.conf: "NVIDIA H100 80GB HBM3" (compact layouts may shorten)
NVITOP_VERSION = "1.7.2"
NVITOP_VENV = ROOT / "build" / "tui-perf-nvitop"
GPUTUI_VENVS = ROOT / "build" / "tui-perf-gputui"

# metric → (target, unit); lower is better for all of them
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


@dataclass(frozen=True)
class Program:
    label: str
    command: tuple[str, ...]
    env: tuple[tuple[str, str], ...] = ()  # added to the pane's environment
    ready: str = GPU_NAME  # on screen once the first frame with the GPUs is drawn


class SetupError(RuntimeError):
    """The comparison program could not be prepared (one line for the user)."""


def _vm_hwm_bytes(pid: int) -> int | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def nvitop_program(interval: float | None = None) -> Program:
    """nvitop from its own venv, created (once) with this interpreter and pip."""
    exe = NVITOP_VENV / "bin" / "nvitop"
    if not exe.is_file():
        python = NVITOP_VENV / "bin" / "python"
        try:
            subprocess.run([sys.executable, "-m", "venv", str(NVITOP_VENV)], check=True,
                           capture_output=True, text=True, timeout=300)
            subprocess.run([str(python), "-m", "pip", "install", "--quiet",
                            f"nvitop=={NVITOP_VERSION}"], check=True, capture_output=True,
                           text=True, timeout=600)
        except (OSError, subprocess.SubprocessError) as exc:
            detail = getattr(exc, "stderr", "") or str(exc)
            last = detail.strip().splitlines()[-1] if detail.strip() else str(exc)
            raise SetupError(f"cannot install nvitop {NVITOP_VERSION} into {NVITOP_VENV}: "
                             f"{last}") from exc
        if not exe.is_file():
            raise SetupError(f"nvitop was installed but {exe} is missing")
    # Its defaults (no --interval): devices read every 1 s, processes every 2 s (each
    # panel's thread polls its cache every 0.5 s), the host every 0.5 s, the screen loop
    # every 0.2 s. With --interval S the process panel reads every S s and polls every S/3.
    # In 160×50 with 8 GPUs its auto mode picks the compact device rows (no name shown):
    # ready once the device rows are on screen ("560W / 700W"; the process panel is below
    # the pane with many GPUs). nvitop draws a whole frame with one curses refresh.
    flags = () if interval is None else ("--interval", f"{interval:g}")
    return Program("nvitop", (str(exe), "--monitor", "auto", *flags), ready="W / 700W")


def gputui_program(interval: float | None = None, tree: Path | None = None) -> Program:
    """gputui from `tree` (this checkout by default), installed the way a user's
    `pip install .` installs it, into a venv of its own under build/tui-perf-gputui/
    that borrows this interpreter's dependencies through a .pth file. Not this
    checkout's editable install: its import hook costs every start ~17 ms that users
    never pay, and in a second checkout it would measure the other one's code."""
    tree = ROOT if tree is None else tree
    label = "gputui" if tree == ROOT else f"gputui@{tree.name}"
    if not (tree / "gputui" / "__init__.py").is_file():
        raise SetupError(f"{tree} is not a gputui source tree (no gputui/__init__.py)")
    venv = GPUTUI_VENVS / re.sub(r"[^A-Za-z0-9_.-]", "_", label)
    python = venv / "bin" / "python"
    try:
        shutil.rmtree(venv, ignore_errors=True)
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)],
                       check=True, capture_output=True, text=True, timeout=120)
        site = subprocess.run([str(python), "-c", "import sysconfig; "
                               "print(sysconfig.get_paths()['purelib'])"], check=True,
                              capture_output=True, text=True, timeout=60).stdout.strip()
        # pip byte-compiles what it installs, as it does for a user.
        subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps",
                        "--no-build-isolation", "--no-index", "--target", site, str(tree)],
                       check=True, capture_output=True, text=True, timeout=600)
    except (OSError, subprocess.SubprocessError) as exc:
        detail = getattr(exc, "stderr", "") or str(exc)
        last = detail.strip().splitlines()[-1] if detail.strip() else str(exc)
        raise SetupError(f"cannot install {tree} into {venv}: {last}") from exc
    deps = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
    (Path(site) / "gputui-deps.pth").write_text("".join(f"{d}\n" for d in sorted(deps)))
    flags = () if interval is None else ("--interval", f"{interval:g}")
    return Program(label, (str(python), "-m", "gputui", *flags))


@contextmanager
def gpu_processes(gpus: int, per_gpu: int) -> Iterator[list[list[int]]]:
    """`per_gpu` idle processes of this user for each of `gpus` GPUs (their PIDs, by
    GPU), killed on the way out. `sleep` with a command line of its own: the monitors
    read a real process's user, name, command line, CPU and memory, as on a real box."""
    procs: list[subprocess.Popen[bytes]] = []
    try:
        pids: list[list[int]] = []
        for k in range(gpus):
            row = []
            for r in range(per_gpu):
                p = subprocess.Popen([f"train-gpu{k}-rank{r}", "86400"], executable="sleep",
                                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL)
                procs.append(p)
                row.append(p.pid)
            pids.append(row)
        for p in procs:
            _until_exec_done(p.pid)
        yield pids
    finally:
        for p in procs:
            p.kill()
        for p in procs:
            p.wait()


def _until_exec_done(pid: int, timeout: float = 5.0) -> None:
    """Wait until `pid` shows its own command line. Popen returns once the child has
    begun its exec (vfork), but the kernel sets the new command line a moment later: a
    monitor reading it at once would see none."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if Path(f"/proc/{pid}/cmdline").read_bytes():
                return
        except OSError:
            return  # gone: nothing to wait for
        time.sleep(0.005)


def scenario_text(gpus: int, pids: list[list[int]] | None = None) -> str:
    """eight_gpus.conf widened (or narrowed) to `gpus` GPUs: GPU k copies GPU k % 8's
    values and waves, with its own UUID, PCI bus id and processes: `pids[k]` (each with
    the scenario's memory, halved for each further one), else the scenario's one
    process with a PID of its own (10000 + k, not a running process)."""
    base = scenario_path("eight_gpus").read_text().splitlines()
    head = [ln for ln in base if not ln.startswith("gpu.") and "device_count" not in ln]
    per: dict[int, list[tuple[str, str]]] = {}
    for ln in base:
        m = re.match(r"gpu\.(\d+)\.(\S+)\s*=\s*(.*)$", ln)
        if m:
            per.setdefault(int(m.group(1)), []).append((m.group(2), m.group(3)))
    out = [*head, f"device_count = {gpus}"]
    for k in range(gpus):
        for key, value in per[k % 8]:
            if key == "uuid":
                value = f"GPU-8c0a5e1d-0000-4000-8000-{k:012x}"
            elif key == "pci_bus_id":
                value = f"00000000:{k + 0x10:02X}:00.0"
            elif key == "processes":
                mem = int(value.split(":", 1)[1])
                value = (",".join(f"{pid}:{mem >> r}" for r, pid in enumerate(pids[k]))
                         if pids else f"{10000 + k}:{mem}")
            out.append(f"gpu.{k}.{key} = {value}")
    return "\n".join(out) + "\n"


def program_base_env(tmp: Path) -> dict[str, str]:
    """The environment a measured program starts from, its XDG folders under `tmp`.
    Nothing of ours reaches it: no PYTHON* settings (a user's shell has no
    PYTHONUNBUFFERED); the caller also starts it in `tmp`, not in this checkout
    (`python -m` would import the checkout's gputui instead of the installed one)."""
    base = {k: v for k, v in os.environ.items()
            if not k.startswith(("FAKENVML_", "GPUTUI_", "TMUX", "PYTHON"))}
    for var in ("XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME", "XDG_CACHE_HOME"):
        base[var] = str(tmp / var.lower())
    return base


def measure(program: Program, duration: float, settle: float = 5.0, gpus: int = 8,
            size: tuple[int, int] = (WIDTH, HEIGHT), pids: list[list[int]] | None = None,
            ) -> dict[str, object]:
    width, height = size
    lib = build_library()
    with tempfile.TemporaryDirectory(prefix="gputui-perf-") as tmp_name:
        tmp = Path(tmp_name)
        stats_file = tmp / "nvml-stats.txt"
        pipe_file = tmp / "terminal.out"
        base = program_base_env(tmp)
        scenario = tmp / f"{gpus}_gpus.conf"
        scenario.write_text(scenario_text(gpus, pids))
        env = lib.env(scenario, stats_file=stats_file, base=base)
        env.update(dict(program.env))
        # Gated: the program starts only once pipe-pane is attached, so no byte is
        # missed and the clock starts when the program does, not when tmux does.
        with TmuxSession(list(program.command), env=env, width=width, height=height,
                         name="perf", gated=True, cwd=tmp) as s:
            s.tmux("pipe-pane", "-o", "-t", s.name, f"cat >> '{pipe_file}'")
            s.release()
            t0 = time.monotonic()
            s.wait_for(program.ready, timeout=60, interval=0.02)
            first_frame_s = time.monotonic() - t0
            pid = s.pid
            if pid is None:
                raise RuntimeError(f"{program.label} is not running: " + s.capture()[-500:])
            proc = psutil.Process(pid)
            time.sleep(settle)
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
        "program": program.label,
        "first_frame_s": round(first_frame_s, 3),
        "cpu_pct": round(100.0 * cpu_s / wall, 2),
        "peak_rss_mb": round((hwm or peak_rss) / 1e6, 1),
        "term_bytes_per_s": round((bytes1 - bytes0) / wall, 1),
        "nvml_calls_per_s": None if calls is None else round(calls / run_s, 1),
        "details": {
            "command": " ".join(program.command),
            "measured_s": round(wall, 2),
            "settle_s": settle,
            "run_s": round(run_s, 2),
            "terminal": f"{width}x{height}",
            "gpus": gpus,
            "gpu_processes": sum(map(len, pids)) if pids else gpus,
            "real_processes": bool(pids),
            "exit_status": status,
            "nvml_calls_total": calls,
            "nvml_top_calls": dict(top),
            "terminal_bytes_total": bytes1,
            "peak_rss_source": "VmHWM" if hwm else "sampled",
            "load_avg_1m": round(os.getloadavg()[0], 2),
            "cpus": os.cpu_count(),
            "screen_ready": program.ready in screen,
        },
    }


def median_of(runs: list[dict[str, object]]) -> dict[str, object]:
    """Each metric's median over the rounds; details of every round kept."""
    out: dict[str, object] = {"program": runs[0]["program"]}
    for key in TARGETS:
        values = [v for r in runs if isinstance(v := r.get(key), int | float)]
        out[key] = round(statistics.median(values), 2) if values else None
    out["rounds"] = len(runs)
    out["runs"] = runs
    out["load_avg_1m"] = [r["details"]["load_avg_1m"] for r in runs  # type: ignore[index]
                          if isinstance(r.get("details"), dict)]
    return out


def _table(rows: list[tuple[str, ...]]) -> list[str]:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip()
            for r in rows]


def _shown(value: object, unit: str) -> str:
    return "n/a" if not isinstance(value, int | float) else f"{value:g} {unit}"


def report(results: list[dict[str, object]], interval: float | None, duration: float,
           settle: float, gpus: int = 8, size: tuple[int, int] = (WIDTH, HEIGHT),
           procs_per_gpu: int = 2) -> tuple[str, bool]:
    """One column per program; the target is checked for the first (this gputui)."""
    header = ("metric", *(str(r["program"]) for r in results), "target", "")
    rows: list[tuple[str, ...]] = [header]
    all_ok = True
    for key, (target, unit) in TARGETS.items():
        value = results[0].get(key)
        ok = isinstance(value, int | float) and value < target
        all_ok &= ok
        rows.append((LABELS[key], *(_shown(r.get(key), unit) for r in results),
                     f"< {target:g} {unit}", "ok" if ok else "MISSED"))
    lines = _table(rows)
    loads = [x for r in results for x in _loads(r)]
    rounds = results[0].get("rounds", 1)
    every = "each at its default interval" if interval is None else f"every {interval:g}s"
    procs = (f"{procs_per_gpu} real processes per GPU" if procs_per_gpu
             else "1 process per GPU that is not running")
    lines.append(f"({gpus} fake GPUs, {procs}, {size[0]}x{size[1]}, {every}, measured over "
                 f"{duration:g}s from {settle:g}s after the first frame"
                 + (f", median of {rounds} alternating rounds" if rounds != 1 else "")
                 + f"; machine load {min(loads):g}–{max(loads):g} on {os.cpu_count()} CPUs)")
    return "\n".join(lines), all_ok


def _loads(result: dict[str, object]) -> list[float]:
    if isinstance(result.get("load_avg_1m"), list):
        return list(result["load_avg_1m"])  # type: ignore[arg-type]
    d = result.get("details")
    return [d["load_avg_1m"]] if isinstance(d, dict) else []


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--duration", type=float, default=20.0, help="seconds measured (20)")
    ap.add_argument("--interval", type=float, default=None,
                    help="refresh interval for every program (default: each its own)")
    ap.add_argument("--settle", type=float, default=5.0,
                    help="seconds after the first frame before measuring (5)")
    ap.add_argument("--compare", metavar="nvitop|PATH", action="append", default=[],
                    help="also run nvitop, or another gputui source tree, the same way "
                         "(may be repeated)")
    ap.add_argument("--procs-per-gpu", type=int, default=2,
                    help="real idle processes per GPU in the scenario; 0: the scenario's "
                         "own process, not running (2)")
    ap.add_argument("--rounds", type=int, default=1,
                    help="alternate the programs this many times; report medians (1)")
    ap.add_argument("--gpus", type=int, default=8, help="fake GPUs, 1-64 (8)")
    ap.add_argument("--size", default=f"{WIDTH}x{HEIGHT}",
                    help=f"tmux pane, COLSxROWS ({WIDTH}x{HEIGHT})")
    ap.add_argument("--json", action="store_true", help="print the figures as JSON")
    ap.add_argument("--strict", action="store_true", help="exit 1 if a target is missed")
    args = ap.parse_args(argv)
    size = re.fullmatch(r"(\d+)x(\d+)", args.size)
    if (args.duration <= 0 or (args.interval is not None and args.interval <= 0)
            or args.rounds < 1 or args.settle < 0 or not 1 <= args.gpus <= 64
            or size is None or not 0 <= args.procs_per_gpu <= 8):
        print("tui_perf: --duration and --interval must be > 0, --settle >= 0, "
              "--rounds >= 1, --gpus 1-64, --procs-per-gpu 0-8, --size COLSxROWS",
              file=sys.stderr)
        return 2
    pane = (int(size.group(1)), int(size.group(2)))
    if not tmux_available():
        print("tui_perf: tmux is not installed", file=sys.stderr)
        return 2
    programs = [gputui_program(args.interval)]
    try:
        for other in args.compare:
            programs.append(nvitop_program(args.interval) if other == "nvitop"
                            else gputui_program(args.interval, Path(other)))
    except SetupError as exc:
        print(f"tui_perf: {exc}", file=sys.stderr)
        return 1
    runs: list[list[dict[str, object]]] = [[] for _ in programs]
    with gpu_processes(args.gpus, args.procs_per_gpu) as pids:
        for rnd in range(args.rounds):
            # Alternate which goes first, so a drift in the machine's load favours none.
            order = range(len(programs)) if rnd % 2 == 0 else reversed(range(len(programs)))
            for i in order:
                runs[i].append(measure(programs[i], args.duration, args.settle, args.gpus,
                                       pane, pids))
    results = [r[0] if args.rounds == 1 else median_of(r) for r in runs]
    text, ok = report(results, args.interval, args.duration, args.settle, args.gpus, pane,
                      args.procs_per_gpu)
    if args.json:
        print(json.dumps(results[0] if len(results) == 1 else
                         {str(r["program"]): r for r in results}, indent=2))
    else:
        print(text)
    return 1 if args.strict and not ok else 0


if __name__ == "__main__":
    sys.exit(main())
