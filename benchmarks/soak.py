#!/usr/bin/env python3
"""Long-run soak of the monitor: does `gputui` keep its memory and CPU flat?

Runs the real `gputui` in a 160×50 tmux pane against the fake NVML library with 8
GPUs (tests/fakenvml, scenario eight_gpus.conf) at `--interval` (1 s, the default a
user gets) for `--minutes`, the way a user leaves it over a long training run:

- GPU 0's memory swinging across the memory_full threshold, so that an alert starts
  and ends every `--alert-period` seconds (120; 0: none);
- a dead webhook in config.toml (a closed port on 127.0.0.1) for those alerts: the
  webhook sink tries, fails and gives up on each (`--no-webhook`: none);
- a training job reporting through `gputui.track` ten times a second (`--no-job`).

Every `--every` seconds it samples the process: RSS (MB), the part of it in the main
heap (`[heap]` in /proc/PID/smaps) and in other anonymous mappings (glibc's
per-thread arenas, thread stacks, Python's arenas), threads, open file descriptors,
CPU as a % of one core. At the end it reports the **RSS slope in MB/h**, a
least-squares fit over the samples after `--warmup` minutes, and the same for the
anonymous memory (heap + other anonymous: what the process itself allocated), the heap
and the other anonymous memory, so that a slope says where it grows. RSS also counts
file-backed pages (the interpreter's and libraries' code), which the kernel drops and
reads back as the machine's other processes need memory: on a shared machine RSS can
step down by a megabyte or two in every process at once, while the anonymous memory does
not move. The anonymous slope is the one that says whether gputui leaks. The monitor's
history fills its window first (an hour at 1 s: `gputui.telemetry.history`), growing
RSS by design, so the default warm-up is that window and a little more, and the default
run that warm-up plus an hour (~2 h 10 min at 1 s).

    python benchmarks/soak.py [--minutes M] [--interval 1] [--every 60] [--json]
        [--log samples.jsonl] [--env MALLOC_ARENA_MAX=2] [--source DIR]

`--malloc-info` adds glibc's own view from inside gputui (a `sitecustomize` on its
PYTHONPATH starts a thread that reads `mallinfo2()` and counts the arenas in
`malloc_info()` every 10 s): bytes malloc holds in use, bytes it holds free, and how
many arenas. Python's small objects live in its own mmap'd arenas, outside malloc, so
"in use" growing means larger buffers (arrays, strings over 512 bytes) or C code;
"free" growing with "in use" flat means fragmentation.

`--source DIR` runs the `gputui` of another checkout (`python -m gputui` from DIR),
so a before/after pair runs side by side in one machine's conditions. `--log` writes
each sample as one JSON line as it is taken (read a long run while it runs).

With `--resize-storm S`, the pane is first resized back and forth for S seconds
(what a user dragging a terminal window does) and the RSS retained 10 s after the
storm is reported.

Needs tmux and gcc. Not a test: numbers depend on the machine and its load (printed).
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TextIO

import psutil

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from gputui.telemetry.history import history_capacity  # noqa: E402
from tests.e2e.tmux import TmuxSession, gputui_command, tmux_available  # noqa: E402
from tests.fakenvml.harness import build_library, derive_scenario  # noqa: E402

WIDTH, HEIGHT = 160, 50
GPUS = 8

def alerting(period_s: float) -> dict[str, object]:
    """GPU 0 of eight_gpus has 85.5 GB; this swings its use between 78.4 and 82.4 GB,
    across memory_full's 95 % (81.2 GB) and its re-arm at 93 % (79.5 GB): an alert
    starts and ends once a period."""
    return {"gpu.0.mem_used": 80_400_000_000, "gpu.0.mem_used.wave": (2_000_000_000, period_s)}

# A training job that reports ten steps a second until its parent (this script) goes.
JOB = """\
import os, sys, time
import gputui.track as track
track.start("soak-job")
parent = os.getppid()
while os.getppid() == parent:
    track.step(samples=32, tokens=32 * 1024)
    time.sleep(0.1)
"""


# Written next to gputui as sitecustomize.py with --malloc-info. It acts only in the
# process that has the variable (it removes it, so no child inherits it).
MALLOC_PROBE = """\
import os
_path = os.environ.pop("GPUTUI_SOAK_MALLOC_INFO", None)
if _path:
    import ctypes, json, tempfile, threading, time

    class _Info(ctypes.Structure):
        _fields_ = [(n, ctypes.c_size_t) for n in ("arena", "ordblks", "smblks", "hblks",
                    "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks", "keepcost")]

    _libc = ctypes.CDLL(None)
    _libc.mallinfo2.restype = _Info
    _libc.fopen.restype = ctypes.c_void_p
    _libc.fopen.argtypes = [ctypes.c_char_p, ctypes.c_char_p]
    _libc.malloc_info.argtypes = [ctypes.c_int, ctypes.c_void_p]
    _libc.fclose.argtypes = [ctypes.c_void_p]

    def _arenas():
        fd, xml = tempfile.mkstemp()
        os.close(fd)
        fp = _libc.fopen(xml.encode(), b"w")
        _libc.malloc_info(0, fp)
        _libc.fclose(fp)
        with open(xml) as f:
            n = f.read().count("<heap nr=")
        os.unlink(xml)
        return n

    def _run():
        while True:
            m = _libc.mallinfo2()
            row = {"in_use_mb": (m.uordblks + m.hblkhd) / 1e6, "free_mb": m.fordblks / 1e6,
                   "arenas": _arenas()}
            with open(_path + ".tmp", "w") as f:
                json.dump(row, f)
            os.replace(_path + ".tmp", _path)
            time.sleep(10)

    threading.Thread(target=_run, name="soak-malloc-info", daemon=True).start()
"""


@dataclass(frozen=True, slots=True)
class Sample:
    minute: float
    rss_mb: float
    heap_mb: float  # the main heap ([heap] in smaps): glibc's main arena
    anon_mb: float  # every other anonymous mapping: thread arenas, stacks, pymalloc arenas
    threads: int
    fds: int
    cpu_pct: float | None  # % of one core since the previous sample
    # With --malloc-info: glibc's mallinfo2() (all arenas), and how many arenas.
    malloc_in_use_mb: float | None = None  # allocated chunks, mmap'd ones included
    malloc_free_mb: float | None = None  # free chunks malloc keeps
    malloc_arenas: int | None = None


def _memory_parts(pid: int) -> tuple[float, float]:
    """(heap, other anonymous) resident MB from /proc/PID/smaps."""
    heap = anon = 0
    name = ""
    try:
        with open(f"/proc/{pid}/smaps") as f:
            for line in f:
                head = line.split(None, 1)[0]
                if "-" in head and not head.endswith(":"):  # a mapping's first line
                    fields = line.split()
                    name = fields[5] if len(fields) > 5 else ""
                elif head == "Rss:":
                    kb = int(line.split()[1])
                    if name == "[heap]":
                        heap += kb
                    elif name == "" or name.startswith("[anon"):
                        anon += kb
    except (OSError, ValueError, IndexError):
        pass
    return heap / 1000, anon / 1000  # kB → MB (RSS is reported in 10^6 bytes too)


def _hwm_mb(pid: int) -> float | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024 / 1e6
    except (OSError, ValueError, IndexError):
        pass
    return None


def slope_per_hour(points: list[tuple[float, float]]) -> float | None:
    """Least-squares slope of (minute, MB) points, in MB per hour; None under 3 points."""
    if len(points) < 3:
        return None
    n = len(points)
    mx = sum(x for x, _ in points) / n
    my = sum(y for _, y in points) / n
    sxx = sum((x - mx) ** 2 for x, _ in points)
    if sxx == 0:
        return None
    sxy = sum((x - mx) * (y - my) for x, y in points)
    return 60 * sxy / sxx


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


def _closed_port() -> int:
    """A local port nothing listens on: connections to it are refused."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _malloc_row(path: Path | None) -> dict[str, float]:
    if path is None:
        return {}
    try:
        row = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return {"malloc_in_use_mb": round(row["in_use_mb"], 2),
            "malloc_free_mb": round(row["free_mb"], 2), "malloc_arenas": row["arenas"]}


def _sample(proc: psutil.Process, t0: float, prev: tuple[float, float] | None,
            malloc_info: Path | None) -> tuple[Sample, tuple[float, float]]:
    cpu = proc.cpu_times()
    now = time.monotonic()
    used = cpu.user + cpu.system
    heap, anon = _memory_parts(proc.pid)
    pct = None if prev is None else round(100 * (used - prev[1]) / (now - prev[0]), 1)
    smp = Sample(minute=round((now - t0) / 60, 2), rss_mb=round(proc.memory_info().rss / 1e6, 2),
                 heap_mb=round(heap, 2), anon_mb=round(anon, 2), threads=proc.num_threads(),
                 fds=proc.num_fds(), cpu_pct=pct,
                 **_malloc_row(malloc_info))  # type: ignore[arg-type]
    return smp, (now, used)


def soak(minutes: float, interval: float, every: float, storm_s: float, *,
         alert_period: float, webhook: bool,
         job: bool, warmup: float, extra_env: dict[str, str], source: Path | None,
         log: TextIO | None, malloc_info: bool) -> dict[str, object]:
    lib = build_library()
    with tempfile.TemporaryDirectory(prefix="gputui-soak-") as tmp_name:
        tmp = Path(tmp_name)
        base = {k: v for k, v in os.environ.items()
                if not k.startswith(("FAKENVML_", "GPUTUI_", "TMUX", "MALLOC_"))}
        for var in ("XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME", "XDG_CACHE_HOME",
                    "XDG_RUNTIME_DIR"):
            base[var] = str(tmp / var.lower())
            Path(base[var]).mkdir(mode=0o700)
        base.update(extra_env)
        paths = []
        if source is not None:
            # `python -m gputui` run from DIR imports DIR's gputui first (sys.path[0]).
            paths.append(str(source))
        info_file = None
        if malloc_info:
            (tmp / "probe").mkdir()
            (tmp / "probe" / "sitecustomize.py").write_text(MALLOC_PROBE)
            paths.append(str(tmp / "probe"))
            info_file = tmp / "malloc-info.json"
        if paths:
            base["PYTHONPATH"] = os.pathsep.join(paths)
        scenario = derive_scenario("eight_gpus", alerting(alert_period) if alert_period else {},
                                   tmp / "scenario.conf")
        env = lib.env(scenario, base=base)
        if webhook:
            config = tmp / "xdg_config_home" / "gputui" / "config.toml"
            config.parent.mkdir(parents=True)
            config.write_text(f'[notify]\nwebhooks = ["http://127.0.0.1:{_closed_port()}'
                              '/hook/soak"]\nkinds = ["memory_full"]\n')
        command = ([sys.executable, "-m", "gputui"] if source is not None
                   else gputui_command()) + ["--interval", str(interval)]
        job_proc = subprocess.Popen([sys.executable, "-c", JOB], env=env, cwd=source or ROOT,
                                    stdin=subprocess.DEVNULL) if job else None
        if info_file is not None:
            env["GPUTUI_SOAK_MALLOC_INFO"] = str(info_file)  # gputui's alone, not the job's
        try:
            with TmuxSession(command, env=env, width=WIDTH, height=HEIGHT, name="soak",
                             cwd=source) as s:
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
                t0 = time.monotonic()
                samples: list[Sample] = []
                prev: tuple[float, float] | None = None
                end = t0 + minutes * 60
                while True:
                    smp, prev = _sample(proc, t0, prev, info_file)
                    samples.append(smp)
                    if log is not None:
                        log.write(json.dumps(asdict(smp)) + "\n")
                        log.flush()
                    now = time.monotonic()
                    if now >= end:
                        break
                    time.sleep(min(every, end - now))
                hwm = _hwm_mb(pid)
                screen = s.capture()
                s.send_keys("q")
                status = s.wait_exit(timeout=30)
        finally:
            if job_proc is not None:
                job_proc.terminate()
                job_proc.wait(timeout=10)
    fitted = [smp for smp in samples if smp.minute >= warmup]
    return {
        "interval_s": interval, "gpus": GPUS, "terminal": f"{WIDTH}x{HEIGHT}",
        "minutes": minutes, "warmup_min": warmup, "alert_period_s": alert_period,
        "webhook": webhook, "job": job,
        "env": extra_env, "source": None if source is None else str(source),
        "job_on_screen": job and "soak-job" in screen, "malloc_info": malloc_info,
        "rss_slope_mb_per_h": _round(slope_per_hour([(p.minute, p.rss_mb) for p in fitted])),
        "anonymous_slope_mb_per_h": _round(slope_per_hour(
            [(p.minute, p.heap_mb + p.anon_mb) for p in fitted])),
        "heap_slope_mb_per_h": _round(slope_per_hour([(p.minute, p.heap_mb) for p in fitted])),
        "anon_slope_mb_per_h": _round(slope_per_hour([(p.minute, p.anon_mb) for p in fitted])),
        "malloc_in_use_slope_mb_per_h": _round(slope_per_hour(
            [(p.minute, p.malloc_in_use_mb) for p in fitted if p.malloc_in_use_mb is not None])),
        "malloc_free_slope_mb_per_h": _round(slope_per_hour(
            [(p.minute, p.malloc_free_mb) for p in fitted if p.malloc_free_mb is not None])),
        "fitted_samples": len(fitted),
        "fit_from": asdict(fitted[0]) if fitted else None,
        "fit_to": asdict(fitted[-1]) if fitted else None,
        "samples": [asdict(p) for p in samples],
        "peak_rss_mb": None if hwm is None else round(hwm, 1), "resize_storm": storm,
        "exit_status": status, "load_avg_1m": round(os.getloadavg()[0], 2),
        "cpus": os.cpu_count(),
    }


def _round(x: float | None) -> float | None:
    return None if x is None else round(x, 3)


def report(r: dict[str, object]) -> str:
    extras = [k for k in ("webhook", "job") if r[k]]
    if r["alert_period_s"]:
        extras.insert(0, f"an alert every {r['alert_period_s']:g}s")
    lines = [f"gputui soak: {r['gpus']} fake GPUs, every {r['interval_s']:g}s, "
             f"{r['terminal']}, {r['minutes']:g} min, with {' and '.join(extras) or 'nothing'}"
             f"{' env ' + str(r['env']) if r['env'] else ''}"
             f"{' from ' + str(r['source']) if r['source'] else ''} "
             f"(machine load {r['load_avg_1m']} on {r['cpus']} CPUs)",
             "minute  RSS MB  heap MB  anon MB  threads  fds  CPU % of a core"
             + ("  malloc: in use MB  free MB  arenas" if r["malloc_info"] else "")]
    for smp in r["samples"]:  # type: ignore[union-attr]
        cpu = "-" if smp["cpu_pct"] is None else f"{smp['cpu_pct']:.1f}"
        line = (f"{smp['minute']:>6.2f}  {smp['rss_mb']:>6.1f}  {smp['heap_mb']:>7.1f}  "
                f"{smp['anon_mb']:>7.1f}  {smp['threads']:>7}  {smp['fds']:>3}  {cpu:>15}")
        if smp["malloc_in_use_mb"] is not None:
            line += (f"  {smp['malloc_in_use_mb']:>17.2f}  {smp['malloc_free_mb']:>7.2f}  "
                     f"{smp['malloc_arenas']:>6}")
        lines.append(line)

    def mbh(key: str) -> str:
        v = r[key]
        return "-" if v is None else f"{v:+.2f} MB/h"

    a, b = r["fit_from"], r["fit_to"]
    span = "no samples" if not a else (
        f"minutes {a['minute']:g}–{b['minute']:g}, {r['fitted_samples']} samples, "  # type: ignore[index]
        f"RSS {a['rss_mb']:.1f} → {b['rss_mb']:.1f} MB")  # type: ignore[index]
    lines.append(f"slope after the {r['warmup_min']:g}-minute warm-up ({span}): "
                 f"RSS {mbh('rss_slope_mb_per_h')}, anonymous "
                 f"{mbh('anonymous_slope_mb_per_h')} (heap {mbh('heap_slope_mb_per_h')}, "
                 f"other {mbh('anon_slope_mb_per_h')})"
                 + (f"; malloc in use {mbh('malloc_in_use_slope_mb_per_h')}, free "
                    f"{mbh('malloc_free_slope_mb_per_h')}" if r["malloc_info"] else ""))
    lines.append(f"peak RSS (VmHWM) {r['peak_rss_mb']} MB; exit status {r['exit_status']}"
                 + ("" if not r["job"] else
                    f"; job on screen: {'yes' if r['job_on_screen'] else 'NO'}"))
    st = r.get("resize_storm")
    if st:
        lines.append(f"resize storm: {st['resizes']} resizes in {st['seconds']:g}s, RSS "  # type: ignore[index]
                     f"{st['rss_before_mb']} → {st['rss_after_mb']} MB "  # type: ignore[index]
                     f"(retained {st['retained_mb']} MB)")  # type: ignore[index]
    return "\n".join(lines)


def _env_pair(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"expected NAME=VALUE: {text!r}")
    return key, value


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--minutes", type=float, default=None,
                    help="how long to run (default: the warm-up and an hour)")
    ap.add_argument("--interval", type=float, default=1.0, help="gputui --interval (1)")
    ap.add_argument("--every", type=float, default=60.0, help="seconds between samples (60)")
    ap.add_argument("--warmup", type=float, default=None, metavar="MIN",
                    help="fit the slope from this minute on (default: once the history "
                    "has filled its window, at least 5)")
    ap.add_argument("--alert-period", type=float, default=120.0, metavar="S",
                    help="a memory_full alert starts and ends every S seconds (120; 0: none)")
    ap.add_argument("--webhook", action=argparse.BooleanOptionalAction, default=True,
                    help="a dead webhook for the alerts (default: yes)")
    ap.add_argument("--job", action=argparse.BooleanOptionalAction, default=True,
                    help="a training job reporting through gputui.track (default: yes)")
    ap.add_argument("--env", type=_env_pair, action="append", default=[], metavar="NAME=VALUE",
                    help="set a variable for gputui (e.g. MALLOC_ARENA_MAX=2); repeatable")
    ap.add_argument("--source", type=Path, metavar="DIR",
                    help="run the gputui of this checkout instead of the installed one")
    ap.add_argument("--malloc-info", action="store_true",
                    help="also sample glibc's mallinfo2() and arena count from inside gputui")
    ap.add_argument("--log", type=Path, metavar="FILE",
                    help="append each sample to FILE as a JSON line as it is taken")
    ap.add_argument("--resize-storm", type=float, default=0.0, metavar="S",
                    help="resize the pane back and forth for S seconds first (0: no)")
    ap.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = ap.parse_args(argv)
    if not tmux_available():
        print("soak: tmux is not installed", file=sys.stderr)
        return 2
    warmup = args.warmup
    if warmup is None:
        # The window, and 10 % for the slack the history trims in steps of (1/16).
        warmup = max(5.0, round(1.1 * history_capacity(args.interval) * args.interval / 60))
    minutes = args.minutes if args.minutes is not None else warmup + 60
    log = args.log.open("a") if args.log else None
    try:
        r = soak(minutes, args.interval, args.every, args.resize_storm,
                 alert_period=args.alert_period, webhook=args.webhook, job=args.job,
                 warmup=warmup,
                 extra_env=dict(args.env), source=args.source, log=log,
                 malloc_info=args.malloc_info)
    finally:
        if log is not None:
            log.close()
    print(json.dumps(r, indent=2) if args.json else report(r))
    return 0


if __name__ == "__main__":
    sys.exit(main())
