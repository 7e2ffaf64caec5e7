"""The hosts-first fleet view over a loopback farm of 32 synthetic 8-GPU hosts and a real
Prometheus scraping them with the shipped alert and recording rules, both started once for
the module (Prometheus takes ~5 s to its first scrape; nothing here sleeps beyond that).

The farm (tests/fleet/farm.py, `mix(32, period=32)`): node-17 is down, node-26 has a lost
GPU, node-29 an XID, node-19 two GPUs throttling (HW thermal), node-23 a GPU near its
slowdown temperature, node-07 idle GPUs holding memory, node-11 a training job, node-31
AMD GPUs (served under AMD Device Metrics Exporter's names), node-03 idle and empty.
"""

from __future__ import annotations

import json
import threading
import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

import pytest
from textual.widgets import DataTable, Input

from gputui.fleet.host_queries import recording_rules
from gputui.fleet.host_table import spark
from gputui.fleet.model import FleetSnapshot, HostReading, HostState, HostSummary, Problem
from gputui.fleet.poller import FleetPoller, direct_mode_advice
from gputui.fleet.prometheus import HistoryWindow, PrometheusPoller
from gputui.fleet.targets import Target, parse_target
from gputui.telemetry.throttle import reason_keys
from gputui.ui.fleet_app import FleetApp
from gputui.ui.screens.fleet_host import FleetHostScreen
from gputui.ui.widgets.host_list import HostList
from gputui.ui.widgets.text_lines import TextLines
from tests.cli import CliRunner
from tests.fleet.conftest import (
    ALERT_RULES,
    FLEET_RULES,
    LOOPBACK,
    Prometheus,
    free_port,
    http_get,
    needs_prometheus,
    prometheus_query,
    running_prometheus,
    wait_for,
)
from tests.fleet.farm import GPUS, Farm, mix

pytestmark = needs_prometheus

HOSTS = mix(32, period=32)
KIND = {h.kind: h for h in HOSTS if h.kind != "ok"}
# The problem hosts, most urgent first: what the view must put at the top.
PROBLEM_ORDER = ["down", "lost", "xid", "throttling", "hot", "idle_held"]


@dataclass
class Setup:
    farm: Farm
    prom: Prometheus

    def target(self, kind: str) -> str:
        return self.farm.target(KIND[kind].name)


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Setup]:
    with Farm(HOSTS) as farm, running_prometheus(
            [farm.target(h.name) for h in HOSTS], tmp_path_factory.mktemp("prom"),
            job="gputui", rules=(ALERT_RULES, FLEET_RULES)) as prom:
        up = len(HOSTS) - 1

        def ready() -> bool:
            return (_count(prom, "up == 1") == up and _count(prom, "gputui_host:gpus") == up
                    and {"GpuLost", "GpuXidError"} <= {
                        r["metric"]["alertname"] for r in prometheus_query(
                            prom.url, 'ALERTS{alertstate="firing"}')})

        wait_for(ready, 30, "Prometheus to scrape the farm and evaluate its rules", step=0.1)
        yield Setup(farm, prom)


def _count(prom: Prometheus, q: str) -> int:
    r = prometheus_query(prom.url, f"count({q})")
    return int(r[0]["value"][1]) if r else 0


def _by_name(snap: FleetSnapshot) -> dict[str, HostSummary]:
    return {s.name: s for s in snap.summaries}


def test_one_row_per_host_problems_first(fleet: Setup) -> None:
    # Prometheus evaluates each recording rule on its own schedule: read until every
    # problem host's rules have been evaluated once (a fresh farm), then check the rows.
    poller = PrometheusPoller(fleet.prom.url)
    wait_for(lambda: [s.target for s in poller.poll().summaries[:6]]
             == [fleet.target(k) for k in PROBLEM_ORDER], 30, "every problem host's rules",
             step=0.2)
    snap = poller.poll()
    assert snap.error is None and snap.aggregation == "recording rules"
    rows = snap.summaries
    assert len(rows) == len(HOSTS)
    # The down host (never seen: named by its target) first, then each kind of problem,
    # then everyone else by name.
    assert [s.target for s in rows[:6]] == [fleet.target(k) for k in PROBLEM_ORDER]
    assert [s.problem for s in rows[:6]] == [Problem.DOWN, Problem.LOST, Problem.XID,
                                             Problem.THROTTLING, Problem.HOT, Problem.IDLE_HELD]
    rest = [s.name for s in rows[6:]]
    assert rest == sorted(rest) and all(s.problem is Problem.NONE for s in rows[6:])
    hosts = _by_name(snap)
    down = next(s for s in rows if s.target == fleet.target("down"))
    assert down.state is HostState.DOWN and "connection refused" in (down.error or "")
    t = hosts[KIND["throttling"].name]
    assert (t.gpus, t.throttling) == (GPUS, 2)
    assert reason_keys(t.throttle_mask) == ["sw_power_cap", "hw_thermal_slowdown"]
    assert (t.hottest_c, t.hottest_gpu, t.margin_c) == (89.0, "7", -2.0)
    assert hosts["node-00"].hottest_c == 67.0 and hosts["node-00"].hottest_gpu == "7"
    util = KIND["throttling"].util
    assert t.util_mean_pct == pytest.approx(sum(util) / GPUS)
    assert t.util_min_pct == min(util) and t.busy == GPUS
    assert t.power_w == 550.0 * GPUS
    assert t.mem_used_bytes == 60000 * GPUS * 2**20
    lost = hosts[KIND["lost"].name]
    assert (lost.gpus, lost.lost, lost.busy) == (GPUS, 1, GPUS - 1)
    assert hosts[KIND["xid"].name].xids_1h == 1
    assert hosts[KIND["hot"].name].hot and hosts[KIND["hot"].name].margin_c == 1.0
    held = hosts[KIND["idle_held"].name]
    assert (held.busy, held.idle, held.idle_held) == (0, GPUS, GPUS)
    idle = hosts[KIND["idle"].name]
    assert (idle.busy, idle.idle, idle.idle_held, idle.problem) == (0, GPUS, 0, Problem.NONE)
    jobs = hosts[KIND["jobs"].name]
    assert (jobs.jobs, jobs.samples_per_s) == (1, 512.0)
    amd = hosts[KIND["amd"].name]  # gpu_* names: the same figures
    assert (amd.gpus, amd.busy, amd.power_w) == (GPUS, GPUS, 550.0 * GPUS)
    assert amd.util_mean_pct == pytest.approx(sum(KIND["amd"].util) / GPUS)
    assert (amd.mem_used_bytes, amd.mem_total_bytes) == (100000 * GPUS * 2**20,
                                                          196592 * GPUS * 2**20)
    assert amd.xids_1h == 0  # gputui's own series serve it: none, not N/A


def test_the_shipped_alert_rules_fire_on_their_hosts(fleet: Setup) -> None:
    hosts = _by_name(PrometheusPoller(fleet.prom.url).poll())
    assert [(a.name, a.severity) for a in hosts[KIND["lost"].name].alerts] == [
        ("GpuLost", "critical")]
    assert [a.name for a in hosts[KIND["xid"].name].alerts] == ["GpuXidError"]
    assert not hosts["node-00"].alerts


def test_recording_rules_and_live_aggregation_agree(fleet: Setup) -> None:
    """Without the recording rules the view aggregates the same expressions itself; and
    the shipped rules file is the one the code defines."""
    assert FLEET_RULES.read_text() == recording_rules(), (
        "regenerate deploy/prometheus/gputui-fleet.yml from host_queries.recording_rules()")
    recorded = PrometheusPoller(fleet.prom.url).poll()
    live = PrometheusPoller(fleet.prom.url, recorded=False).poll()
    assert (recorded.aggregation, live.aggregation) == ("recording rules", "live")

    def same(s: HostSummary) -> HostSummary:
        return replace(s, last_seen=None, history=None)

    assert [same(s) for s in live.summaries] == [same(s) for s in recorded.summaries]


def test_hosts_read_directly_read_the_same(fleet: Setup) -> None:
    """One fact, one number: Prometheus' aggregates and the figures from each host's page."""
    prom = _by_name(PrometheusPoller(fleet.prom.url).poll())
    targets = [parse_target(fleet.farm.target(h.name)) for h in HOSTS]
    direct = _by_name(FleetPoller(targets, timeout=5).poll(force=True))
    only_prometheus = {"xids_1h": None, "alerts": (), "history": None}
    for name, s in prom.items():
        if s.state is not HostState.UP:
            continue
        d = direct[name]
        assert replace(d, target=s.target, last_seen=None) == replace(
            s, last_seen=None, **only_prometheus), name


def test_the_history_column_comes_from_a_range_query(fleet: Setup) -> None:
    window = HistoryWindow(seconds=8, points=4, every_s=0)
    before = _log_size(fleet.prom)
    snap = PrometheusPoller(fleet.prom.url, history=window).poll()
    ranges = [e for e in _logged(fleet.prom, before) if e["httpRequest"]["path"].endswith(
        "/query_range")]
    assert len(ranges) == 1 and ranges[0]["params"]["step"] == 2
    node = _by_name(snap)["node-00"]
    assert node.history is not None and len(node.history) == 4
    known = [v for v in node.history if v is not None]
    assert known and all(v == pytest.approx(node.util_mean_pct) for v in known)
    assert node.history_mean_pct == pytest.approx(node.util_mean_pct)


def test_once_json_keeps_every_gpu_and_adds_the_hosts(fleet: Setup, cli: CliRunner) -> None:
    proc = cli("fleet", "--once", "--json", "--prometheus", fleet.prom.url)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    hosts = {h["hostname"]: h for h in doc["hosts"] if h["state"] == "up"}
    assert len(hosts) == len(HOSTS) - 1
    throttled = hosts[KIND["throttling"].name]["gpus"]
    assert len(throttled) == GPUS and [g["throttling"] for g in throttled] == [False] * 6 + [
        True] * 2
    assert doc["fleet"] == {"hosts": 32, "hosts_up": 31, "hosts_down": 1,
                            "gpus": 31 * GPUS, "gpus_busy": _busy(),
                            "gpus_idle": 31 * GPUS - 1 - _busy(), "gpus_throttling": 2,
                            "gpus_lost_or_stale": 1, "power_w": doc["fleet"]["power_w"],
                            "alerts_firing": 2}
    first = doc["summaries"][0]
    assert (first["target"], first["state"], first["problems"]) == (
        fleet.target("down"), "down", ["down"])
    t = next(s for s in doc["summaries"] if s["hostname"] == KIND["throttling"].name)
    assert (t["throttling"], t["throttle_reasons"]) == (2, ["sw_power_cap",
                                                            "hw_thermal_slowdown"])


def _busy() -> int:
    """GPUs at 5 % or more across the farm's hosts that answer (lost GPUs serve none)."""
    return sum(sum(1 for i, u in enumerate(h.util) if u >= 5 and i not in h.lost)
               for h in HOSTS if not h.down)


# --- the view -----------------------------------------------------------------------------


async def _until(pilot: Any, cond: Any, timeout: float = 20.0) -> None:
    await pilot.wait_for_scheduled_animations()
    deadline = datetime.now(UTC).timestamp() + timeout
    while not cond():
        assert datetime.now(UTC).timestamp() < deadline, "timed out waiting in the fleet view"
        await pilot.pause(0.05)


async def test_the_view_drills_down_filters_and_sends_only_per_host_queries(
        fleet: Setup) -> None:
    before = _log_size(fleet.prom)
    app = FleetApp(PrometheusPoller(fleet.prom.url, interval=0.5), interval=0.5)
    throttling = fleet.target("throttling")
    async with app.run_test(size=(200, 50)) as pilot:
        hosts = app.query_one(HostList)
        await _until(pilot, lambda: len(hosts.rows) == len(HOSTS))
        assert [s.target for s in hosts.rows[:6]] == [fleet.target(k) for k in PROBLEM_ORDER]
        lost_line = hosts.line_text(1)
        assert lost_line.startswith(KIND["lost"].name) and "1 lost" in lost_line
        assert "GpuLost" in lost_line  # the firing alert, on its host's row
        assert "2 HW thermal slowdown" in hosts.line_text(3)
        # The last hour's utilisation (Prometheus holds seconds of it: the last step).
        # The hour's history comes with the read after the first (the first is quick).
        await _until(pilot, lambda: all(s.history_mean_pct is not None
                                        for s in hosts.rows if s.name == "node-00"))
        node = next(i for i, s in enumerate(hosts.rows) if s.name == "node-00")
        mean = hosts.rows[node].util_mean_pct
        assert mean is not None and hosts.rows[node].history_mean_pct == pytest.approx(mean)
        assert f"{spark([None] * 11 + [mean])} {mean:3.0f} " in hosts.line_text(node)
        summary = app.query_one("#summary", TextLines).text
        assert summary.startswith("32 hosts: 31 up, 1 down · 248 GPUs:")
        # Enter on the throttling host: its eight GPUs, two of them throttling.
        await pilot.press("down", "down", "down", "enter")
        await _until(pilot, lambda: isinstance(app.screen, FleetHostScreen)
                     and app.screen.query_one("#gpus", DataTable).row_count == GPUS
                     and app.screen.host is not None)
        table = app.screen.query_one("#gpus", DataTable)
        states = [str(table.get_row_at(i)[-1]) for i in range(GPUS)]
        assert states[6:] == ["HW thermal slowdown", "HW thermal slowdown, SW power cap"]
        assert set(states[:6]) == {"none"}
        await pilot.press("escape")
        await _until(pilot, lambda: not isinstance(app.screen, FleetHostScreen))
        # The filter: "/" and a problem's word; Esc shows every host again.
        await pilot.press("slash", *"throttl")
        assert app.query_one("#filter", Input).value == "throttl"
        assert [s.target for s in hosts.rows] == [throttling]
        await pilot.press("enter", "escape")
        assert len(hosts.rows) == len(HOSTS)
        await pilot.press("s")  # by name
        assert [s.name for s in hosts.rows] == sorted(s.name for s in hosts.rows)
        await pilot.press("q")
    entries = _logged(fleet.prom, before)
    opened = [e for e in entries if f'instance="{throttling}"' in e["params"]["query"]]
    assert opened, "the open host's GPUs were never asked for"
    rest = [e for e in entries if e not in opened]
    assert any("gputui_host:" in e["params"]["query"] for e in rest)
    assert any(e["httpRequest"]["path"].endswith("/query_range") for e in rest)
    checked = 0
    for e in rest:  # asked again, each answers with per-host series only
        for series in _rerun(fleet.prom, e):
            checked += 1
            labels = series["metric"]
            assert "instance" in labels, (e["params"]["query"], labels)
            assert not {"UUID", "serial_number", "pci_bus_id", "device"} & set(labels), (
                e["params"]["query"], labels)
    assert checked >= len(HOSTS) * 9  # each host's figures, at least once


async def test_direct_mode_says_once_past_fifty_targets(fleet: Setup, cli: CliRunner) -> None:
    assert direct_mode_advice(50) is None
    targets = [fleet.farm.target(h.name) for h in HOSTS] + [
        f"{LOOPBACK}:{free_port()}" for _ in range(19)]
    proc = cli("fleet", "--once", "--timeout", "2", *targets)
    assert proc.returncode == 0, proc.stderr
    advice = [line for line in proc.stderr.splitlines() if "--prometheus" in line]
    assert advice == [f"gputui: {direct_mode_advice(51)}"]
    app = FleetApp(FleetPoller([parse_target(t) for t in targets], interval=1, timeout=2),
                   interval=1, advice=direct_mode_advice(len(targets)))
    async with app.run_test(size=(200, 40)) as pilot:
        await _until(pilot, lambda: app.snapshot is not None)
        assert "51 targets read directly" in app.query_one("#status", TextLines).text
        await pilot.press("q")


# --- the query log --------------------------------------------------------------------------


def _log_size(prom: Prometheus) -> int:
    return prom.query_log.stat().st_size if prom.query_log.exists() else 0


def _logged(prom: Prometheus, since: int) -> list[dict[str, Any]]:
    """The queries sent to Prometheus' API since the log was `since` bytes long (not its
    own rule evaluations)."""
    with prom.query_log.open("rb") as f:
        f.seek(since)
        lines = f.read().decode().splitlines()
    return [e for e in map(json.loads, lines) if "httpRequest" in e]


def _rerun(prom: Prometheus, entry: dict[str, Any]) -> list[dict[str, Any]]:
    """The answer to a logged query, asked again for the same time(s)."""
    p = entry["params"]
    if entry["httpRequest"]["path"].endswith("/query_range"):
        q = {"query": p["query"], "start": p["start"], "end": p["end"], "step": p["step"]}
        doc = json.loads(http_get(f"{prom.url}/api/v1/query_range?" + urllib.parse.urlencode(q)))
    else:
        q = {"query": p["query"], "time": p["start"]}
        doc = json.loads(http_get(f"{prom.url}/api/v1/query?" + urllib.parse.urlencode(q)))
    assert doc["status"] == "success", doc
    return list(doc["data"]["result"])


def test_direct_mode_reads_a_bounded_number_of_hosts_at_once() -> None:
    """Many targets cannot flood the machine (or starve the screen of the interpreter):
    at most `max_in_flight` reads run at once, and every host is still read."""
    cond = threading.Condition()
    running = [0, 0]  # now, most at once

    def slow_scrape(target: Target, timeout: float) -> HostReading:
        with cond:
            running[0] += 1
            running[1] = max(running)
            cond.notify_all()
            # A read that takes a while: long enough for a fourth to start beside it,
            # were there no bound.
            cond.wait_for(lambda: running[0] > 3, timeout=0.1)
            running[0] -= 1
        return HostReading(hostname=target.name)

    targets = [Target(f"n{i}:1", f"http://n{i}:1/metrics") for i in range(12)]
    snap = FleetPoller(targets, timeout=5, scrape_fn=slow_scrape, max_in_flight=3).poll()
    assert [h.state for h in snap.hosts] == [HostState.UP] * 12
    assert running[1] == 3
