"""`gputui fleet`: several real exporters, one host down, one serving garbage."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from textual.widgets import DataTable

from gputui.fleet.errors import ScrapeError, TargetError
from gputui.fleet.model import FleetSnapshot, HostReading, HostState
from gputui.fleet.poller import FleetPoller, backoff_s
from gputui.fleet.scrape import parse_metrics
from gputui.fleet.targets import Target, parse_target
from gputui.ui.fleet_app import FleetApp
from gputui.ui.screens.fleet_host import FleetHostScreen
from gputui.ui.widgets.host_list import HostList
from tests.cli import CliRunner
from tests.fleet.conftest import (
    LOOPBACK,
    ExporterFactory,
    GarbageServer,
    free_port,
)

MIB = 1024 * 1024


@dataclass
class Fleet:
    good: list[str]  # targets of the two exporters (node-a: two_gpus, node-b: throttle)
    down: str
    garbage: str

    @property
    def all(self) -> list[str]:
        return [*self.good, self.down, self.garbage]


@pytest.fixture
def fleet(start_exporter: ExporterFactory, garbage_server: GarbageServer) -> Iterator[Fleet]:
    a = start_exporter("two_gpus", hostname="node-a")
    b = start_exporter("eight_gpus", hostname="node-b")
    yield Fleet([a.target, b.target], f"{LOOPBACK}:{free_port()}", garbage_server.target)


def _by_target(doc: dict) -> dict[str, dict]:
    return {h["target"]: h for h in doc["hosts"]}


def test_once_json_shows_good_hosts_down_host_and_garbage_host(fleet: Fleet,
                                                               cli: CliRunner) -> None:
    proc = cli("fleet", "--once", "--json", *fleet.all)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    hosts = _by_target(doc)
    a, b = hosts[fleet.good[0]], hosts[fleet.good[1]]
    assert (a["state"], a["hostname"], a["exporter"]) == ("up", "node-a", "gputui")
    assert [g["gpu"] for g in a["gpus"]] == ["0", "1"]
    g0 = a["gpus"][0]
    assert g0["model"] == "NVIDIA A100-SXM4-80GB"
    assert g0["util_gpu_pct"] == 87
    assert g0["power_w"] == 312.0
    assert g0["temp_c"] == 64
    assert g0["mem_used_bytes"] == 40960 * MIB
    assert g0["mem_total_bytes"] == 81920 * MIB
    assert g0["throttle_reasons_text"] == "none" and g0["throttling"] is False
    assert a["gpus"][1]["throttle_reasons_text"] == "GPU idle"
    assert b["state"] == "up" and len(b["gpus"]) == 8
    down = hosts[fleet.down]
    assert down["state"] == "down" and down["gpus"] == [] and down["last_seen"] is None
    assert down["error"]
    bad = hosts[fleet.garbage]
    assert bad["state"] == "error" and "malformed" in bad["error"]
    kinds = {(al["kind"], al["host"]) for al in doc["alerts"]}
    assert ("down", fleet.down) in kinds
    assert ("error", fleet.garbage) in kinds
    assert not any(al["host"] in ("node-a", "node-b") for al in doc["alerts"])


def test_once_table_and_exit_1_when_nothing_answers(cli: CliRunner) -> None:
    proc = cli("fleet", "--once", f"{LOOPBACK}:{free_port()}")
    assert proc.returncode == 1
    assert "DOWN" in proc.stdout
    assert proc.stderr.strip().splitlines() == ["gputui: no host answered"]


@pytest.mark.parametrize("args", [
    ["nohost"], ["host:port"], ["ftp://x:1/metrics"], ["a:0"], ["a b:9400"], [],
    ["--prometheus", "ftp://x"], ["--json", "a:1"],
])
def test_bad_targets_are_one_line_and_exit_2(args: list[str], cli: CliRunner) -> None:
    proc = cli("fleet", *args)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("gputui: ")


async def _wait_until(pilot, cond, timeout: float = 20.0) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, "timed out waiting in the fleet app"
        await pilot.pause(0.1)


async def test_fleet_app_shows_each_host_for_itself(fleet: Fleet) -> None:
    poller = FleetPoller([parse_target(t) for t in fleet.all], interval=0.5, timeout=2.0)
    app = FleetApp(poller, interval=0.5)
    try:
        async with app.run_test(size=(180, 50)) as pilot:
            def settled() -> bool:
                snap = app.snapshot
                return snap is not None and all(
                    h.state is not HostState.PENDING for h in snap.hosts)

            await _wait_until(pilot, settled)
            hosts = app.query_one(HostList)
            lines = {s.target: hosts.line_text(i) for i, s in enumerate(hosts.rows)}
            # The host that is down and the one serving garbage come first.
            assert {s.target for s in hosts.rows[:2]} == {fleet.down, fleet.garbage}
            assert "DOWN: " in lines[fleet.down] and "never seen" in lines[fleet.down]
            assert "ERROR: malformed metrics" in lines[fleet.garbage]
            assert lines[fleet.good[0]].startswith("node-a ")
            b = next(s for s in hosts.rows if s.target == fleet.good[1])
            assert (b.name, b.gpus) == ("node-b", 8)
            # Enter on node-a: its GPUs, each with its figures.
            await pilot.press(*["down"] * hosts.rows.index(
                next(s for s in hosts.rows if s.target == fleet.good[0])), "enter")
            await _wait_until(pilot, lambda: isinstance(app.screen, FleetHostScreen)
                              and app.screen.query_one("#gpus", DataTable).row_count == 2)
            table = app.screen.query_one("#gpus", DataTable)
            a0 = [str(c) for c in table.get_row(
                f"{fleet.good[0]}|0|GPU-11111111-2222-3333-4444-555555555555")]
            assert a0 == ["0", "NVIDIA A100-SXM4-80GB", "87%", "N/A", "40.0/80GiB", "312W",
                          "64°C", "none"]
            await pilot.press("escape")
            assert isinstance(app.screen.query_one(HostList), HostList)
            # The others keep updating while one host is down and one is broken.
            polls = app.polls
            await _wait_until(pilot, lambda: app.polls >= polls + 2)
            snap = app.snapshot
            assert snap is not None
            states = {h.target: h.state for h in snap.hosts}
            assert states[fleet.good[0]] is HostState.UP and states[fleet.good[1]] is HostState.UP
            assert states[fleet.down] is HostState.DOWN
            await pilot.press("q")
    finally:
        poller.close()


# --- units, no subprocesses ------------------------------------------------------------

DCGM_PAGE = """\
# HELP DCGM_FI_DEV_GPU_UTIL GPU utilization (in %).
# TYPE DCGM_FI_DEV_GPU_UTIL gauge
DCGM_FI_DEV_GPU_UTIL{gpu="0",UUID="GPU-x",device="nvidia0",modelName="NVIDIA H100",Hostname="n1"} 99
# HELP DCGM_FI_DEV_FB_USED Framebuffer memory used (in MiB).
# TYPE DCGM_FI_DEV_FB_USED gauge
DCGM_FI_DEV_FB_USED{gpu="0",UUID="GPU-x",device="nvidia0",modelName="NVIDIA H100",Hostname="n1"} 1024
# HELP DCGM_FI_DEV_FB_FREE Framebuffer memory free (in MiB).
# TYPE DCGM_FI_DEV_FB_FREE gauge
DCGM_FI_DEV_FB_FREE{gpu="0",UUID="GPU-x",device="nvidia0",modelName="NVIDIA H100",Hostname="n1"} 3072
# HELP DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION Total energy consumption since boot (in mJ).
# TYPE DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION counter
DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{gpu="0",UUID="GPU-x",device="nvidia0",modelName="NVIDIA H100",Hostname="n1"} 5
# TYPE DCGM_FI_DEV_CLOCKS_EVENT_REASONS gauge
DCGM_FI_DEV_CLOCKS_EVENT_REASONS{gpu="0",UUID="GPU-x",device="nvidia0",modelName="NVIDIA H100",Hostname="n1"} 68
"""  # noqa: E501


def test_parse_a_dcgm_exporter_page() -> None:
    r = parse_metrics(DCGM_PAGE)
    assert (r.hostname, r.exporter) == ("n1", "dcgm-exporter")
    (g,) = r.gpus
    assert (g.gpu, g.uuid, g.model, g.util_pct) == ("0", "GPU-x", "NVIDIA H100", 99)
    assert (g.mem_used_bytes, g.mem_total_bytes) == (1024 * MIB, 4096 * MIB)
    assert g.throttling and g.state_text == "HW thermal slowdown, SW power cap"


@pytest.mark.parametrize("page", ["", "<html>nope</html>\n", "up 1\nnode_load1 0.5\n",
                                  "DCGM_FI_DEV_GPU_UTIL{gpu=0} 1\n"])
def test_unusable_pages_are_errors(page: str) -> None:
    with pytest.raises(ScrapeError) as info:
        parse_metrics(page)
    assert not info.value.down


@pytest.mark.parametrize(("text", "url"), [
    ("node1:9400", "http://node1:9400/metrics"),
    ("10.0.0.5:9400", "http://10.0.0.5:9400/metrics"),
    ("[::1]:9400", "http://[::1]:9400/metrics"),
    ("http://node1:9400", "http://node1:9400/metrics"),
    ("https://node1/custom/path", "https://node1/custom/path"),
])
def test_parse_target(text: str, url: str) -> None:
    assert parse_target(text).url == url


@pytest.mark.parametrize("text", ["node1", "node1:", ":9400", "node1:70000", "a_b:1",
                                  "ftp://node1:21", "http://:9400"])
def test_parse_target_rejects(text: str) -> None:
    with pytest.raises(TargetError):
        parse_target(text)


def test_down_host_is_retried_with_backoff_and_keeps_last_seen() -> None:
    now = [0.0]
    answers = {"up": True}
    calls: list[float] = []

    def fake_scrape(target: Target, timeout: float) -> HostReading:
        calls.append(now[0])
        if not answers["up"]:
            raise ScrapeError("Connection refused", down=True)
        return HostReading(hostname="n1")

    poller = FleetPoller([Target("n1:1", "http://n1:1/metrics")], interval=1.0,
                         clock=lambda: now[0], scrape_fn=fake_scrape)
    try:
        snap: FleetSnapshot = poller.poll()
        assert snap.hosts[0].state is HostState.UP
        seen = snap.hosts[0].last_seen
        answers["up"] = False
        for t in range(1, 20):
            now[0] = float(t)
            snap = poller.poll()
        host = snap.hosts[0]
        assert host.state is HostState.DOWN and host.last_seen == seen
        # attempts at 1, then 1+1=2, 2+2=4, 4+4=8, 8+8=16 (interval doubling)
        assert calls == [0.0, 1.0, 2.0, 4.0, 8.0, 16.0]
        answers["up"] = True
        now[0] = 40.0
        assert poller.poll().hosts[0].state is HostState.UP
    finally:
        poller.close()
    assert backoff_s(1, 2.0) == 2.0 and backoff_s(3, 2.0) == 8.0 and backoff_s(30, 2.0) == 60.0
