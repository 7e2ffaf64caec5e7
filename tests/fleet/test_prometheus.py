"""`gputui fleet --prometheus` against a real Prometheus server scraping real exporters.

Needs the `prometheus` binary (Debian package `prometheus`, /usr/bin/prometheus);
skipped only where it is absent.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from gputui.fleet.model import HostState
from gputui.fleet.prometheus import PrometheusPoller, short_error
from gputui.ui.fleet_app import FleetApp
from tests.cli import CliRunner
from tests.fakenvml.harness import FakeNvmlLib
from tests.fleet.conftest import (
    LOOPBACK,
    ExporterFactory,
    GarbageServer,
    exporter_factory,
    free_port,
    http_get,
    needs_prometheus,
    prometheus_query,
    running_prometheus,
    wait_for,
)

pytestmark = needs_prometheus


@dataclass
class PromSetup:
    url: str
    good: list[str]
    down: str
    garbage: str


@pytest.fixture(scope="module")
def prom(fake_nvml_lib: FakeNvmlLib,
         tmp_path_factory: pytest.TempPathFactory) -> Iterator[PromSetup]:
    """Two exporters, a port nobody listens on and a garbage server, scraped by one
    Prometheus for the module (its first scrape takes ~5 s)."""
    tmp = tmp_path_factory.mktemp("prom")
    with exporter_factory(fake_nvml_lib, tmp) as start_exporter, \
            contextlib.closing(GarbageServer()) as garbage_server:
        yield from _scraped(start_exporter, garbage_server, tmp)


def _scraped(start_exporter: ExporterFactory, garbage_server: GarbageServer,
             tmp_path: Path) -> Iterator[PromSetup]:
    a = start_exporter("two_gpus", hostname="node-a")
    b = start_exporter("throttle", hostname="node-b")
    down = f"{LOOPBACK}:{free_port()}"
    garbage = garbage_server.target
    with running_prometheus([a.target, b.target, down, garbage], tmp_path) as prom:
        def scraped() -> bool:
            instances = {r["metric"].get("instance")
                         for r in prometheus_query(prom.url, "DCGM_FI_DEV_GPU_UTIL")}
            downs = {r["metric"].get("instance") for r in prometheus_query(prom.url, "up == 0")}
            return {a.target, b.target} <= instances and {down, garbage} <= downs

        wait_for(scraped, 30, "Prometheus to scrape the exporters", step=0.3)
        yield PromSetup(prom.url, [a.target, b.target], down, garbage)


def test_once_json_from_prometheus(prom: PromSetup, cli: CliRunner) -> None:
    proc = cli("fleet", "--once", "--json", "--prometheus", prom.url)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    hosts = {h["target"]: h for h in doc["hosts"]}
    a, b = hosts[prom.good[0]], hosts[prom.good[1]]
    assert (a["state"], a["hostname"]) == ("up", "node-a")
    assert [g["gpu"] for g in a["gpus"]] == ["0", "1"]
    assert a["gpus"][0]["power_w"] == 312.0 and a["gpus"][0]["util_gpu_pct"] == 87
    assert a["gpus"][0]["mem_used_bytes"] == 40960 * 1024 * 1024
    assert (b["state"], b["hostname"], len(b["gpus"])) == ("up", "node-b", 2)
    assert hosts[prom.down]["state"] == "down"
    kinds = {(al["kind"], al["host"]) for al in doc["alerts"]}
    assert ("down", prom.down) in kinds
    # Each failing target carries Prometheus' own reason, matched by instance.
    errors = _last_errors(prom.url)
    assert errors[prom.garbage] and errors[prom.down] and errors[prom.garbage] != errors[prom.down]
    bad = hosts[prom.garbage]
    assert bad["state"] == "error", bad  # it answers, with something that is not metrics
    assert bad["error"] == f"Prometheus: {short_error(errors[prom.garbage])}"
    assert "up == 0" not in bad["error"]
    assert ("error", prom.garbage) in kinds
    assert hosts[prom.down]["error"] == f"Prometheus: {short_error(errors[prom.down])}"
    assert "connection refused" in hosts[prom.down]["error"]


def _last_errors(url: str) -> dict[str, str]:
    doc = json.loads(http_get(f"{url}/api/v1/targets?state=active"))
    return {t["labels"]["instance"]: t["lastError"] for t in doc["data"]["activeTargets"]}


def test_unreachable_prometheus_is_exit_1(cli: CliRunner) -> None:
    proc = cli("fleet", "--once", "--prometheus", f"http://{LOOPBACK}:{free_port()}")
    assert proc.returncode == 1
    assert proc.stderr.strip().splitlines()[-1].startswith("gputui: Prometheus at ")


async def test_fleet_app_over_prometheus(prom: PromSetup) -> None:
    app = FleetApp(PrometheusPoller(prom.url, interval=0.5), interval=0.5)
    async with app.run_test(size=(180, 40)) as pilot:
        # The first read comes as soon as it can, without Prometheus' reasons for the
        # failing targets (each shows "down" until then); the next read names them.
        def settled() -> bool:
            snap = app.snapshot
            return snap is not None and any(h.target == prom.garbage
                                            and h.state is HostState.ERROR
                                            for h in snap.summaries)
        for _ in range(200):
            if settled():
                break
            await pilot.pause(0.1)
        snap = app.snapshot
        assert snap is not None and snap.error is None
        states = {h.target: h.state for h in snap.summaries}
        assert states[prom.good[0]] is HostState.UP and states[prom.down] is HostState.DOWN
        assert states[prom.garbage] is HostState.ERROR
        await pilot.press("q")
