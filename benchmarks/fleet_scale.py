#!/usr/bin/env python3
"""What the fleet view costs at cluster scale: a loopback exporter farm, a real Prometheus
scraping it, and `gputui fleet --prometheus` in tmux.

For each size N (`--hosts 100,300,1000`):

- the farm: N endpoints on 127.0.0.1 (tests/fleet/farm.py, run as its own process), each
  serving one host's 8-GPU page the way `gputui export` does (~88 KB, every field it
  serves; `--lean` for only what the fleet reads), with a share of them throttling, hot,
  with a lost GPU, an XID, idle GPUs holding memory, a training job, AMD GPUs, and down
  (a bound port nobody listens on);
- Prometheus (the `prometheus` binary) scraping them every `--scrape-interval` (15s) with
  the shipped alert rules and, unless `--no-rules`, the fleet's recording rules
  (deploy/prometheus/gputui-fleet.yml), evaluated as often; measured once every target has
  been scraped and the rules evaluated;
- the view: `gputui fleet --prometheus URL --interval 2` in a 160x50 tmux pane (`--size`),
  installed as `pip install .` installs it (benchmarks/tui_perf.py's `gputui_program`),
  started gated so the clock starts at exec.

Measured per run:
- first screen: from exec until the pane shows the hosts (the fleet's summary line);
- CPU: the view's user+system CPU time over `--duration` s from `--settle` s after the
  first screen, as a % of one core;
- peak RSS: VmHWM at the end;
- refresh time: how long each refresh took to read (the view's own "read in X s", from
  the pane once a second; median and max);
- for context: Prometheus' and the farm's CPU over the same window, the time Prometheus
  spent on the view's queries (its query log), and the machine's load.

`--direct` points the view at the farm's endpoints instead (Prometheus still runs, for the
same load). `--compare PATH` runs another gputui tree (e.g. `git archive main` unpacked)
the same way, the two alternating `--rounds` times; medians are reported. Not a test: the
figures depend on the machine and its load, which are printed alongside.

    python benchmarks/fleet_scale.py [--hosts 100,300,1000] [--duration 30] [--rounds 1]
                                     [--compare PATH] [--no-rules] [--json]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parents[1]
for p in (ROOT, ROOT / "benchmarks"):
    if str(p) not in sys.path:
        sys.path.insert(0, str(p))

from tui_perf import SetupError, gputui_program, program_base_env  # noqa: E402

from tests.e2e.tmux import TmuxSession, tmux_available  # noqa: E402
from tests.fleet.conftest import (  # noqa: E402
    ALERT_RULES,
    FLEET_RULES,
    PROMETHEUS,
    Prometheus,
    http_get,
    running_prometheus,
    wait_for,
)
from tests.fleet.farm import raise_fd_limit  # noqa: E402

# On screen once the hosts are: this view's summary line ("1,000 hosts: 976 up"), or the
# per-GPU view's status line ("976/1000 hosts up") for a --compare tree from before.
READY = re.compile(r"\d hosts?: \d|\d+/\d+ hosts up")
READ_IN = re.compile(r"updated (\d\d:\d\d:\d\d) \(read in ([\d.]+) s\)")
GOALS = {"cpu_pct": 5.0, "first_screen_s": 2.0}
METRICS = ("first_screen_s", "cpu_pct", "peak_rss_mb", "refresh_median_s", "refresh_max_s",
           "refreshes", "prometheus_cpu_pct", "farm_cpu_pct", "prometheus_query_s_per_s",
           "queries_per_s", "measured_s")


@dataclass
class Farm:
    proc: subprocess.Popen[bytes]
    targets: list[str]
    up: int
    page_bytes: int


@contextlib.contextmanager
def farm(n: int, tmp: Path, *, lean: bool) -> Iterator[Farm]:
    out = tmp / "farm.json"
    cmd = [sys.executable, "-m", "tests.fleet.farm", "--hosts", str(n), "--out", str(out)]
    proc = subprocess.Popen([*cmd, *(["--lean"] if lean else [])], cwd=ROOT,
                            stdin=subprocess.DEVNULL)
    try:
        wait_for(lambda: proc.poll() is None and out.exists(), 120, "the farm to serve")
        doc = json.loads(out.read_text())
        hosts = doc["hosts"]
        yield Farm(proc, [f"127.0.0.1:{h['port']}" for h in hosts],
                   sum(1 for h in hosts if not h["down"]), doc["page_bytes"])
    finally:
        proc.terminate()
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(10)
        if proc.poll() is None:
            proc.kill()


def vm_hwm_bytes(pid: int) -> int | None:
    """The process's peak resident memory (the kernel's high-water mark)."""
    with contextlib.suppress(OSError, ValueError, IndexError):
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    return None


def _get(url: str) -> dict[str, object]:
    """A Prometheus API answer (a loaded machine may take its time)."""
    doc = json.loads(http_get(url, timeout=60))
    if doc.get("status") != "success":
        raise RuntimeError(f"{url}: {doc}")
    return doc["data"]  # type: ignore[no-any-return]


def _count(prom: Prometheus, q: str) -> int:
    r = _get(f"{prom.url}/api/v1/query?" + urllib.parse.urlencode({"query": f"count({q})"}))
    result = r["result"]
    return int(float(result[0]["value"][1])) if result else 0  # type: ignore[index]


def prometheus_pid(prom: Prometheus) -> int | None:
    for p in psutil.process_iter(["cmdline"]):
        if any(str(prom.dir) in a for a in p.info["cmdline"] or ()):
            return p.pid
    return None


def _cpu(pid: int | None) -> float:
    if pid is None:
        return 0.0
    try:
        t = psutil.Process(pid).cpu_times()
    except psutil.NoSuchProcess:
        return 0.0
    return t.user + t.system


def _query_seconds(prom: Prometheus, since: int) -> tuple[float, int]:
    """Seconds Prometheus spent evaluating API queries logged after byte `since`, and how
    many there were (its own rule evaluations are not counted)."""
    total, n = 0.0, 0
    with prom.query_log.open("rb") as f:
        f.seek(since)
        for line in f.read().decode(errors="replace").splitlines():
            with contextlib.suppress(ValueError, KeyError, TypeError):
                e = json.loads(line)
                if "httpRequest" in e:
                    total += float(e["stats"]["timings"]["evalTotalTime"])
                    n += 1
    return total, n


def measure(command: list[str], label: str, prom: Prometheus, fm: Farm, *, duration: float,
            settle: float, size: tuple[int, int]) -> dict[str, object]:
    with tempfile.TemporaryDirectory(prefix="gputui-fleet-perf-") as tmp_name:
        tmp = Path(tmp_name)
        env = program_base_env(tmp)
        with TmuxSession(command, env=env, width=size[0], height=size[1], name="fleet",
                         gated=True, cwd=tmp) as s:
            s.release()
            t0 = time.monotonic()
            deadline = t0 + 120
            screen = ""
            while not READY.search(screen := s.capture()):
                if time.monotonic() > deadline or s.exited():
                    raise RuntimeError(f"{label}: no hosts on screen after "
                                       f"{time.monotonic() - t0:.0f} s:\n{screen}")
                time.sleep(0.02)
            first_screen_s = time.monotonic() - t0
            pid = s.pid
            if pid is None:
                raise RuntimeError(f"{label} is not running: {screen[-500:]}")
            proc = psutil.Process(pid)
            time.sleep(settle)
            prom_pid, farm_pid = prometheus_pid(prom), fm.proc.pid
            log0 = prom.query_log.stat().st_size if prom.query_log.exists() else 0
            cpu0, prom0, farm0 = proc.cpu_times(), _cpu(prom_pid), _cpu(farm_pid)
            load0 = os.getloadavg()[0]
            w0 = time.monotonic()
            reads: dict[str, float] = {}
            while (left := duration - (time.monotonic() - w0)) > 0:
                time.sleep(min(1.0, left))
                for when, took in READ_IN.findall(s.capture()):
                    reads[when] = float(took)
            cpu1, prom1, farm1 = proc.cpu_times(), _cpu(prom_pid), _cpu(farm_pid)
            wall = time.monotonic() - w0
            query_s, queries = _query_seconds(prom, log0)
            hwm = vm_hwm_bytes(pid)
            rss = proc.memory_info().rss
            s.send_keys("q")
            s.wait_exit(timeout=30)
    cpu_s = (cpu1.user + cpu1.system) - (cpu0.user + cpu0.system)
    times = sorted(reads.values())
    return {
        "program": label,
        "first_screen_s": round(first_screen_s, 3),
        "cpu_pct": round(100 * cpu_s / wall, 2),
        "peak_rss_mb": round((hwm or rss) / 1e6, 1),
        "refresh_median_s": round(statistics.median(times), 3) if times else None,
        "refresh_max_s": round(max(times), 3) if times else None,
        "refreshes": len(times),
        "prometheus_cpu_pct": round(100 * (prom1 - prom0) / wall, 1),
        "farm_cpu_pct": round(100 * (farm1 - farm0) / wall, 1),
        "prometheus_query_s_per_s": round(query_s / wall, 3),
        "queries_per_s": round(queries / wall, 2),
        "load_avg_1m": [round(load0, 2), round(os.getloadavg()[0], 2)],
        "measured_s": round(wall, 1),
    }


def median_of(runs: list[dict[str, object]]) -> dict[str, object]:
    out: dict[str, object] = {"program": runs[0]["program"], "rounds": len(runs)}
    for key, value in runs[0].items():
        if (value is None or isinstance(value, int | float)) and key != "rounds":
            values = [v for r in runs if isinstance(v := r.get(key), int | float)]
            out[key] = round(statistics.median(values), 3) if values else None
    out["load_avg_1m"] = [x for r in runs for x in r["load_avg_1m"]]  # type: ignore[union-attr]
    out["runs"] = runs
    return out


def run_size(n: int, programs: list[tuple[str, list[str]]], args: argparse.Namespace,
             size: tuple[int, int]) -> dict[str, object]:
    rules = (ALERT_RULES,) if args.no_rules else (ALERT_RULES, FLEET_RULES)
    with tempfile.TemporaryDirectory(prefix="gputui-fleet-scale-") as tmp_name:
        tmp = Path(tmp_name)
        with farm(n, tmp, lean=args.lean) as fm, running_prometheus(
                fm.targets, tmp / "prom", job="gputui", interval=args.scrape_interval,
                rules=rules) as prom:
            started = time.monotonic()

            def scraped() -> bool:
                if _count(prom, "up") < n or _count(prom, "gputui_gpu_lost") < fm.up * 8 - 8:
                    return False
                return args.no_rules or _count(prom, "gputui_host:gpus") >= fm.up

            wait_for(scraped, 600, "Prometheus to scrape the farm", step=1.0)
            series = int(_get(f"{prom.url}/api/v1/status/tsdb")["headStats"][  # type: ignore[index]
                "numSeries"])
            print(f"# {n} hosts: scraped in {time.monotonic() - started:.0f} s, "
                  f"{series:,} series", file=sys.stderr)
            runs: list[list[dict[str, object]]] = [[] for _ in programs]
            for rnd in range(args.rounds):
                order = range(len(programs)) if rnd % 2 == 0 else reversed(range(len(programs)))
                for i in order:
                    label, command = programs[i]
                    source = fm.targets if args.direct else ["--prometheus", prom.url]
                    cmd = [*command, "fleet", *source,
                           "--interval", f"{args.interval:g}", "--timeout", f"{args.timeout:g}"]
                    try:
                        r = measure(cmd, label, prom, fm, duration=args.duration,
                                    settle=args.settle, size=size)
                    except RuntimeError as exc:  # e.g. no first screen in 120 s
                        r = {**dict.fromkeys(METRICS), "program": label,
                             "error": str(exc).splitlines()[0],
                             "load_avg_1m": [round(os.getloadavg()[0], 2)]}
                    print(f"#   {label}: {json.dumps(r)}", file=sys.stderr)
                    runs[i].append(r)
    return {"hosts": n, "gpus": n * 8, "series": series, "page_bytes": fm.page_bytes,
            "results": [r[0] if len(r) == 1 else median_of(r) for r in runs]}


def _shown(v: object, unit: str = "") -> str:
    return "n/a" if not isinstance(v, int | float) else f"{v:g}{unit}"


def report(sizes: list[dict[str, object]], args: argparse.Namespace) -> str:
    rows = [("hosts (GPUs)", "program", "CPU", "first screen", "refresh (median/max)",
             "peak RSS", "Prometheus CPU", "its query time", "farm CPU", "load")]
    for sz in sizes:
        for r in sz["results"]:  # type: ignore[attr-defined]
            loads = r["load_avg_1m"]
            rows.append((f"{sz['hosts']:,} ({sz['gpus']:,})", r["program"],
                         _shown(r["cpu_pct"], " %"), _shown(r["first_screen_s"], " s"),
                         f"{_shown(r['refresh_median_s'], ' s')} / "
                         f"{_shown(r['refresh_max_s'], ' s')}",
                         _shown(r["peak_rss_mb"], " MB"), _shown(r["prometheus_cpu_pct"], " %"),
                         _shown(r["prometheus_query_s_per_s"], " s/s"),
                         _shown(r["farm_cpu_pct"], " %"), f"{min(loads):g}–{max(loads):g}"))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = [" | ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)) for row in rows]
    lines.insert(1, "-+-".join("-" * w for w in widths))
    how = ("reading every endpoint directly" if args.direct else "recording rules"
           if not args.no_rules else "live aggregation (no recording rules)")
    lines.append(f"(every {args.interval:g} s, {how}, scrape every {args.scrape_interval}; "
                 f"measured over {args.duration:g} s from {args.settle:g} s after the first "
                 f"screen" + (f", median of {args.rounds} alternating rounds"
                              if args.rounds > 1 else "")
                 + f"; {os.cpu_count()} CPUs; goals: CPU < {GOALS['cpu_pct']:g} %, first "
                 f"screen < {GOALS['first_screen_s']:g} s)")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--hosts", default="100,300,1000", help="sizes, comma-separated")
    ap.add_argument("--duration", type=float, default=30.0, help="seconds measured (30)")
    ap.add_argument("--settle", type=float, default=5.0,
                    help="seconds after the first screen before measuring (5)")
    ap.add_argument("--interval", type=float, default=2.0, help="the view's refresh (2)")
    ap.add_argument("--timeout", type=float, default=10.0,
                    help="the view's --timeout for one read of Prometheus (10)")
    ap.add_argument("--scrape-interval", default="15s", help="Prometheus' (15s)")
    ap.add_argument("--rounds", type=int, default=1, help="alternating rounds; medians (1)")
    ap.add_argument("--compare", metavar="PATH", help="another gputui tree, the same way")
    ap.add_argument("--no-rules", action="store_true",
                    help="without the recording rules: the view aggregates live")
    ap.add_argument("--lean", action="store_true", help="pages with only what the fleet reads")
    ap.add_argument("--direct", action="store_true",
                    help="the view reads the farm's endpoints itself, not Prometheus")
    ap.add_argument("--size", default="160x50", help="tmux pane, COLSxROWS (160x50)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    size = re.fullmatch(r"(\d+)x(\d+)", args.size)
    try:
        sizes = [int(x) for x in args.hosts.split(",")]
    except ValueError:
        sizes = []
    if not sizes or size is None or args.rounds < 1 or args.duration <= 0:
        print("fleet_scale: --hosts N[,N...], --size COLSxROWS, --rounds >= 1, "
              "--duration > 0", file=sys.stderr)
        return 2
    if not tmux_available() or PROMETHEUS is None:
        print("fleet_scale: needs tmux and the prometheus binary", file=sys.stderr)
        return 2
    raise_fd_limit()
    try:
        programs = [("gputui", list(gputui_program(args.interval).command[:3]))]
        if args.compare:
            other = gputui_program(args.interval, Path(args.compare))
            programs.append((other.label, list(other.command[:3])))
    except SetupError as exc:
        print(f"fleet_scale: {exc}", file=sys.stderr)
        return 1
    pane = (int(size.group(1)), int(size.group(2)))
    results = [run_size(n, programs, args, pane) for n in sizes]
    print(json.dumps(results, indent=2) if args.json else report(results, args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
