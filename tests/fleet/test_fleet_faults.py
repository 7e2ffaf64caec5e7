"""`gputui fleet` against hosts that misbehave: trickling answers, non-HTTP replies, garbage
only, bad numbers on a page, and an exporter that goes away and comes back."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import threading
from collections.abc import Callable
from datetime import UTC, datetime
from types import CodeType, FrameType

import pytest

from gputui.commands.fleet import once_failure
from gputui.fleet.errors import ScrapeError
from gputui.fleet.model import FleetHost, FleetSnapshot, HostReading, HostState, local_clock
from gputui.fleet.poller import FleetPoller
from gputui.fleet.scrape import parse_metrics, scrape
from gputui.fleet.targets import Target, parse_target
from gputui.fleet.view import host_rows
from gputui.ui.fleet_app import FleetApp
from tests.fleet.conftest import (
    ExporterFactory,
    GarbageServer,
    StubbornServer,
    gputui_cmd,
    wait_for,
)

Stubborn = Callable[..., StubbornServer]


# --- a host that answers but never finishes -------------------------------------------------


@pytest.mark.parametrize("mode", ["trickle-body", "trickle-headers"])
def test_once_returns_and_reports_a_trickling_host_as_down(stubborn_server: Stubborn,
                                                          mode: str) -> None:
    srv = stubborn_server(mode)
    # Before the overall deadline existed this never returned: urllib's timeout is per
    # read, and each byte arrives well within it.
    proc = subprocess.run(gputui_cmd("fleet", "--once", "--json", "--timeout", "1", srv.target),
                          capture_output=True, text=True, timeout=60)
    assert srv.connections >= 1
    assert proc.returncode == 1, proc.stderr
    host = json.loads(proc.stdout)["hosts"][0]
    assert host["state"] == "down"
    assert "timed out" in host["error"]
    assert host["retry_in_s"] is None  # --once retries nothing
    assert proc.stderr.strip().splitlines() == ["gputui: no host answered"]


def test_once_table_does_not_promise_a_retry(stubborn_server: Stubborn) -> None:
    srv = stubborn_server("trickle-body")
    proc = subprocess.run(gputui_cmd("fleet", "--once", "--timeout", "1", srv.target),
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1
    assert "DOWN: timed out" in proc.stdout
    assert "retry" not in proc.stdout


def test_trickling_host_does_not_hold_up_the_poll_and_is_retried(
        stubborn_server: Stubborn) -> None:
    srv = stubborn_server("trickle-body")
    poller = FleetPoller([parse_target(srv.target)], interval=0.1, timeout=0.5)
    snaps: list[FleetSnapshot] = []

    def run() -> None:
        for _ in range(3):
            snaps.append(poller.poll(force=True))

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(30)  # a deadline for the test, not a duration being measured
    assert not t.is_alive(), "poll() waited on the trickling host"
    assert [s.hosts[0].state for s in snaps] == [HostState.DOWN] * 3
    assert all("timed out" in (s.hosts[0].error or "") for s in snaps)
    assert snaps[-1].hosts[0].failures == 3
    assert srv.connections == 3  # asked again each time, one request at a time


def test_a_request_that_outlives_the_poll_is_counted_once_then_retried() -> None:
    release = threading.Event()
    calls: list[int] = []

    def stuck_scrape(target: Target, timeout: float) -> HostReading:
        calls.append(1)
        if len(calls) == 1:
            release.wait(30)  # a host name lookup that hangs: no socket timeout applies
            raise ScrapeError("cannot resolve host name", down=True)
        return HostReading(hostname="n1")

    now = [0.0]
    poller = FleetPoller([Target("n1:1", "http://n1:1/metrics")], interval=1.0, timeout=0.2,
                         clock=lambda: now[0], scrape_fn=stuck_scrape)
    first = poller.poll()
    assert first.hosts[0].state is HostState.DOWN and "timed out" in (first.hosts[0].error or "")
    now[0] = 0.5  # not due yet, still stuck: no new request, no new failure
    assert poller.poll().hosts[0].failures == 1
    release.set()
    wait_for(lambda: poller.poll().hosts[0].failures == 1 and len(calls) == 1 and
             poller._states[0].inflight is None, 10, "the stuck request to be collected")
    now[0] = 2.0
    assert poller.poll().hosts[0].state is HostState.UP
    assert len(calls) == 2


async def test_quitting_the_app_does_not_wait_for_a_stuck_poll(
        stubborn_server: Stubborn) -> None:
    srv = stubborn_server("trickle-body")
    # A long timeout keeps the poll in flight while `q` is pressed.
    poller = FleetPoller([parse_target(srv.target)], interval=0.5, timeout=60)
    app = FleetApp(poller, interval=0.5)

    async def drive() -> None:
        async with app.run_test(size=(160, 30)) as pilot:
            while srv.connections < 1:
                await pilot.pause(0.05)
            await pilot.press("q")

    await asyncio.wait_for(drive(), 30)  # a deadline: without it a regression hangs the suite
    # The request to the trickling host is still in flight: quitting did not wait for it ...
    inflight = poller._states[0].inflight
    assert inflight is not None and not inflight.done()
    # ... and neither the target's polling thread nor the request's thread will keep the
    # process alive at exit.
    pollers = _threads_inside(FleetPoller._run.__code__) + _threads_inside(scrape.__code__)
    assert len(pollers) >= 2, "no thread is polling the host"
    assert all(t.daemon for t in pollers), [t.name for t in pollers if not t.daemon]


def _threads_inside(code: CodeType) -> list[threading.Thread]:
    """The live threads whose current stack includes a call of `code`."""
    frames = sys._current_frames()
    out = []
    for t in threading.enumerate():
        f: FrameType | None = frames.get(t.ident or -1)
        while f is not None and f.f_code is not code:
            f = f.f_back
        if f is not None:
            out.append(t)
    return out


# --- exit status of --once ------------------------------------------------------------------


def test_once_exits_1_when_every_host_serves_garbage(garbage_server: GarbageServer,
                                                     stubborn_server: Stubborn) -> None:
    other = stubborn_server("not-http")
    proc = subprocess.run(gputui_cmd("fleet", "--once", garbage_server.target, other.target),
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1
    assert "ERROR: malformed metrics page" in proc.stdout
    assert proc.stderr.strip().splitlines() == [
        "gputui: no host could be read (0 down, 2 not serving a usable metrics page)"]


def _snap(*states: HostState, error: str | None = None) -> FleetSnapshot:
    return FleetSnapshot(time=datetime.now(UTC), source="targets", error=error, hosts=tuple(
        FleetHost(target=f"h{i}:1", url=None, state=s) for i, s in enumerate(states)))


def test_once_failure_contract() -> None:
    assert once_failure(_snap(HostState.UP, HostState.DOWN, HostState.ERROR)) is None
    assert once_failure(_snap(HostState.UP)) is None
    assert once_failure(_snap(HostState.DOWN, HostState.DOWN)) == "no host answered"
    assert once_failure(_snap(HostState.ERROR, HostState.DOWN)) == \
        "no host could be read (1 down, 1 not serving a usable metrics page)"
    assert once_failure(_snap()) == "no GPU hosts found"
    assert once_failure(_snap(HostState.UP, error="Prometheus at x: refused")) == \
        "Prometheus at x: refused"


# --- not HTTP at all --------------------------------------------------------------------------


def test_a_non_http_reply_is_named_as_such(stubborn_server: Stubborn) -> None:
    srv = stubborn_server("not-http")
    with pytest.raises(ScrapeError) as info:
        scrape(parse_target(srv.target), timeout=5)
    assert str(info.value).startswith("not an HTTP metrics endpoint")
    assert "SSH-2.0" in str(info.value) and "BadStatusLine" not in str(info.value)
    assert not info.value.down
    poller = FleetPoller([parse_target(srv.target)], timeout=5)
    host = poller.poll(force=True).hosts[0]
    assert host.state is HostState.ERROR
    assert (host.error or "").startswith("not an HTTP metrics endpoint")


# --- numbers that are not readings ----------------------------------------------------------

LABELS = 'gpu="{i}",UUID="GPU-{i}",modelName="M",Hostname="n1"'


def _page(i: int, **values: str) -> str:
    labels = LABELS.format(i=i)
    return "".join(f"{name}{{{labels}}} {v}\n" for name, v in values.items())


def test_infinite_nan_and_absurd_values_are_not_available() -> None:
    page = (
        _page(0, DCGM_FI_DEV_GPU_TEMP="+Inf", DCGM_FI_DEV_GPU_UTIL="NaN",
              DCGM_FI_DEV_POWER_USAGE="-Inf", DCGM_FI_DEV_FB_USED="+Inf",
              DCGM_FI_DEV_FB_FREE="100", DCGM_FI_DEV_CLOCK_THROTTLE_REASONS="-64",
              gputui_gpu_lost="NaN")
        + _page(1, DCGM_FI_DEV_GPU_TEMP="50", DCGM_FI_DEV_CLOCK_THROTTLE_REASONS="1e30")
        + _page(2, DCGM_FI_DEV_CLOCK_THROTTLE_REASONS="+Inf")
        + _page(3, DCGM_FI_DEV_CLOCK_THROTTLE_REASONS="64.5")
        + _page(4, DCGM_FI_DEV_CLOCK_THROTTLE_REASONS="NaN")
        + _page(5, DCGM_FI_DEV_CLOCK_THROTTLE_REASONS=str(0x40 | 0x200))  # a future bit: kept
    )
    r = parse_metrics(page)
    g = {x.gpu: x for x in r.gpus}
    g0 = g["0"]
    assert (g0.temp_c, g0.util_pct, g0.power_w, g0.mem_used_bytes) == (None, None, None, None)
    assert g0.lost is False
    for i in "01234":
        assert g[i].throttle_mask is None, i
        assert g[i].state_text == "N/A" and not g[i].throttling
    assert g["5"].throttle_mask == 0x240 and g["5"].throttling
    snap = FleetSnapshot(time=datetime.now(UTC), source="targets", hosts=(
        FleetHost(target="n1:1", url=None, state=HostState.UP, reading=r),))
    cells = [c for row in host_rows(snap) for c in row.cells]
    assert not any("inf" in c.lower() or "nan" in c.lower() for c in cells)
    row0 = host_rows(snap)[0].cells
    assert row0[3:] == ("N/A", "N/A", "N/A", "N/A", "N/A", "N/A")
    kinds = {(a.kind, a.gpu) for a in snap.alerts()}
    assert kinds == {("throttling", "5")}  # no reason made up from a bad mask


# --- an exporter that goes away and comes back ------------------------------------------------


def test_down_host_keeps_its_name_and_last_seen_then_comes_back(
        start_exporter: ExporterFactory) -> None:
    exp = start_exporter("two_gpus", hostname="vm", interval=0.2)
    port = exp.port
    poller = FleetPoller([parse_target(exp.target)], interval=0.2, timeout=2.0)
    up = poller.poll(force=True).hosts[0]
    assert (up.state, up.name) == (HostState.UP, "vm")
    assert exp.stop() == 0

    snap = wait_for(lambda: (s := poller.poll()).hosts[0].state is HostState.DOWN and s, 20,
                    "the fleet to see the exporter down")
    down = snap.hosts[0]
    assert down.reading.hostname == "vm" and down.gpus == ()
    assert down.last_seen is not None and down.last_seen >= up.last_seen  # type: ignore[operator]
    row = host_rows(snap)[0]
    assert row.status == "down"
    assert row.cells[0] == f"vm ({exp.target})"
    seen = local_clock(down.last_seen)  # local time, as everywhere the user reads a time
    assert f"last seen {seen} (" in row.cells[-1]
    (alert,) = snap.alerts()
    assert alert.kind == "down" and f"last seen {seen}" in alert.text

    again = start_exporter("two_gpus", hostname="vm", interval=0.2, port=port)
    assert again.target == exp.target
    back = wait_for(lambda: (s := poller.poll()).hosts[0].state is HostState.UP and s, 30,
                    "the fleet to see the exporter back (retried without being forced)")
    host = back.hosts[0]
    assert host.failures == 0 and host.error is None and len(host.gpus) == 2
    assert host.last_seen is not None and host.last_seen > down.last_seen
