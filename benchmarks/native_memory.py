#!/usr/bin/env python3
"""Memory per tick without the UI: hours of the monitor's ticks in a minute, in-process.

The fake NVML library (tests/fakenvml, 8 GPUs of eight_gpus.conf) runs on a fake clock
advanced by one second a tick, as fast as the CPU allows, so each 3,600 ticks are an
hour of the monitor at 1 s:

- `--mode pynvml`: the fake library alone, through pynvml: the 9 reads a tick of the
  monitor's fields per GPU (utilization, memory, temperature, power, two clocks,
  clocks-event reasons, P-state, processes) in a plain loop, one thread;
- `--mode sampler` (default): gputui's `Sampler` as the monitor runs it (one reader thread
  per GPU, alerts on, a frame per tick) feeding the view's `History`, all but Textual
  (`--no-history`: the sampler alone, what `gputui watch` keeps).

Every `--every` ticks it prints RSS, the main heap ([heap] in /proc/self/smaps, glibc's
main arena), the other anonymous memory (per-thread arenas, stacks, Python's own
arenas), glibc's `mallinfo2()` (in use, free) and how many arenas `malloc_info()` lists;
at the end, the RSS slope in MB per 3,600 ticks (an hour at 1 s) after `--warmup`
ticks, by least squares. Run it with `MALLOC_ARENA_MAX=2` in the environment to compare
glibc's arenas; with `PYTHONPATH=DIR` to measure another checkout's gputui.

    python benchmarks/native_memory.py [--mode sampler|pynvml] [--ticks 20000]
        [--every 1000] [--warmup 4000] [--no-history]

Needs gcc. Not a test.
"""

from __future__ import annotations

import argparse
import ctypes
import os
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if not os.environ.get("PYTHONPATH"):  # else the tree PYTHONPATH names (a before/after run)
    sys.path.insert(0, str(ROOT))

from tests.fakenvml.harness import FakeNvml, build_library, scenario_path  # noqa: E402

TICKS_PER_HOUR = 3600


class _MallInfo2(ctypes.Structure):
    _fields_ = [(n, ctypes.c_size_t) for n in (
        "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks",
        "fordblks", "keepcost")]


_libc = ctypes.CDLL(None)
_libc.mallinfo2.restype = _MallInfo2
_libc.fopen.restype = ctypes.c_void_p
_libc.fopen.argtypes = [ctypes.c_char_p, ctypes.c_char_p]
_libc.malloc_info.argtypes = [ctypes.c_int, ctypes.c_void_p]
_libc.fclose.argtypes = [ctypes.c_void_p]


@dataclass(frozen=True, slots=True)
class Row:
    tick: int
    rss_mb: float
    heap_mb: float
    anon_mb: float
    malloc_in_use_mb: float
    malloc_free_mb: float
    arenas: int
    threads: int


def _arenas() -> int:
    with tempfile.NamedTemporaryFile("r") as xml:
        fp = _libc.fopen(xml.name.encode(), b"w")
        _libc.malloc_info(0, fp)
        _libc.fclose(fp)
        return xml.read().count("<heap nr=")


def measure(tick: int) -> Row:
    rss = heap = anon = 0
    name = ""
    with open("/proc/self/smaps") as f:
        for line in f:
            head = line.split(None, 1)[0]
            if "-" in head and not head.endswith(":"):
                fields = line.split()
                name = fields[5] if len(fields) > 5 else ""
            elif head == "Rss:":
                kb = int(line.split()[1])
                rss += kb
                if name == "[heap]":
                    heap += kb
                elif name == "":
                    anon += kb
    m = _libc.mallinfo2()
    return Row(tick, rss / 1000, heap / 1000, anon / 1000, (m.uordblks + m.hblkhd) / 1e6,
               m.fordblks / 1e6, _arenas(), len(os.listdir("/proc/self/task")))


def slope_per_hour(rows: list[Row]) -> float | None:
    """Least-squares slope of RSS against ticks, in MB per 3,600 ticks."""
    if len(rows) < 3:
        return None
    n = len(rows)
    mx = sum(r.tick for r in rows) / n
    my = sum(r.rss_mb for r in rows) / n
    sxx = sum((r.tick - mx) ** 2 for r in rows)
    sxy = sum((r.tick - mx) * (r.rss_mb - my) for r in rows)
    return TICKS_PER_HOUR * sxy / sxx if sxx else None


def pynvml_ticker(fake: FakeNvml) -> Callable[[int], object]:
    import pynvml as nv

    nv.nvmlInit()
    handles = [nv.nvmlDeviceGetHandleByIndex(i) for i in range(nv.nvmlDeviceGetCount())]

    def tick(t: int) -> None:
        fake.set_time(float(t))
        for h in handles:
            nv.nvmlDeviceGetUtilizationRates(h)
            nv.nvmlDeviceGetMemoryInfo(h)
            nv.nvmlDeviceGetTemperature(h, nv.NVML_TEMPERATURE_GPU)
            nv.nvmlDeviceGetPowerUsage(h)
            nv.nvmlDeviceGetClockInfo(h, nv.NVML_CLOCK_SM)
            nv.nvmlDeviceGetClockInfo(h, nv.NVML_CLOCK_MEM)
            nv.nvmlDeviceGetCurrentClocksEventReasons(h)
            nv.nvmlDeviceGetPerformanceState(h)
            nv.nvmlDeviceGetComputeRunningProcesses(h)

    return tick


def sampler_ticker(fake: FakeNvml, history: bool) -> Callable[[int], object]:
    from gputui.telemetry.history import History, history_capacity
    from gputui.telemetry.nvml import MONITOR_FIELDS, NvmlSource
    from gputui.telemetry.sampler import Sampler

    now = [0.0]
    src = NvmlSource(process_every=3, slow_every=10, fields=MONITOR_FIELDS)
    src.gpm_clock = lambda: now[0]  # type: ignore[method-assign]
    src.open_system()
    sampler = Sampler(interval=1.0, nvml=src, alerts=True, clock=lambda: now[0])
    if history:
        view = History(history_capacity(1.0))
        sampler.subscribe_frames(view.take)
    else:
        sampler.subscribe_frames(lambda frame: None)

    def tick(t: int) -> None:
        now[0] = float(t)
        fake.set_time(float(t))
        sampler.tick()

    return tick


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mode", choices=("sampler", "pynvml"), default="sampler")
    ap.add_argument("--ticks", type=int, default=20_000, help="ticks in all (20000)")
    ap.add_argument("--every", type=int, default=1000, help="ticks between rows (1000)")
    ap.add_argument("--warmup", type=int, default=4000,
                    help="fit the slope from this tick on (4000: the view's hour of "
                    "history and its trimming slack are full)")
    ap.add_argument("--history", action=argparse.BooleanOptionalAction, default=True,
                    help="feed the view's History as the monitor does (sampler mode)")
    args = ap.parse_args()
    lib = build_library()
    rows: list[Row] = []
    with tempfile.TemporaryDirectory() as tmp:
        fake = FakeNvml(lib, Path(tmp))
        fake.use(scenario_path("eight_gpus"), frozen_time=0.0)
        tick = (pynvml_ticker(fake) if args.mode == "pynvml"
                else sampler_ticker(fake, args.history))
        what = args.mode + ("" if args.mode == "pynvml" or args.history else ", no history")
        arena_max = os.environ.get("MALLOC_ARENA_MAX")
        print(f"{what}: 8 fake GPUs, {args.ticks} ticks of 1 s (fake clock)"
              + (f", MALLOC_ARENA_MAX={arena_max}" if arena_max else ""))
        print("   tick  RSS MB  heap MB  anon MB  malloc in use MB  free MB  arenas  threads")
        for t in range(args.ticks + 1):
            if t % args.every == 0:
                r = measure(t)
                rows.append(r)
                print(f"{r.tick:>7}  {r.rss_mb:>6.2f}  {r.heap_mb:>7.2f}  {r.anon_mb:>7.2f}  "
                      f"{r.malloc_in_use_mb:>16.2f}  {r.malloc_free_mb:>7.2f}  {r.arenas:>6}  "
                      f"{r.threads:>7}", flush=True)
            tick(t)
    fitted = [r for r in rows if r.tick >= args.warmup]
    slope = slope_per_hour(fitted)
    print(f"RSS slope from tick {args.warmup}: "
          + ("-" if slope is None else f"{slope:+.3f} MB per 3,600 ticks (an hour at 1 s)"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
