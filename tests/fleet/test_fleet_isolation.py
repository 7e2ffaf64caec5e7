"""One target never stalls the others: huge pages, hung hosts and slow drips on loopback
servers, next to a good host that must keep its refresh (counted in reads, not seconds)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable

import pytest

from gputui.fleet.errors import ScrapeError
from gputui.fleet.model import FleetGpu, HostReading, HostState
from gputui.fleet.page import MAX_SERIES, PageParser
from gputui.fleet.poller import FleetPoller
from gputui.fleet.readings import WANTED, reading_from_series
from gputui.fleet.scrape import parse_metrics, scrape
from gputui.fleet.targets import Target, parse_target
from gputui.ui.fleet_app import FleetApp
from tests.fleet.conftest import (
    PageServer,
    StubbornServer,
    gpu_page,
    huge_page,
    wait_for,
)

Pages = Callable[[bytes], PageServer]
Stubborn = Callable[..., StubbornServer]


def test_a_huge_page_keeps_only_what_the_fleet_reads(page_server: Pages) -> None:
    srv = page_server(huge_page("big", gpu_series=False))  # ~16 MB, 200k other series
    reading = scrape(parse_target(srv.target), timeout=30)
    assert reading.hostname == "big"
    assert [(g.gpu, g.util_pct) for g in reading.gpus] == [("0", 50)]


def test_a_page_with_too_many_gpu_series_is_an_error_with_its_reason(page_server: Pages
                                                                      ) -> None:
    srv = page_server(huge_page("big", gpu_series=True))  # 200k GPU series, under 32 MiB
    with pytest.raises(ScrapeError) as info:
        scrape(parse_target(srv.target), timeout=30)
    assert not info.value.down
    assert str(info.value) == (f"more than {MAX_SERIES:,} GPU series on the page: too large "
                               "to be one host's GPUs, not read")


class _Deadline:
    """Passes `allowed` checks, then has expired."""

    def __init__(self, allowed: int) -> None:
        self.allowed = allowed

    def check(self) -> None:
        self.allowed -= 1
        if self.allowed < 0:
            raise ScrapeError("timed out: no complete answer within 1 s", down=True)


def test_parsing_is_inside_the_request_deadline() -> None:
    chunk = gpu_page("n1", gpus=8).decode()
    parser = PageParser(WANTED, deadline=_Deadline(allowed=3))
    for _ in range(3):
        parser.feed(chunk)
    with pytest.raises(ScrapeError) as info:
        parser.feed(chunk)  # the whole page arrived in time; parsing it did not finish
    assert info.value.down and "timed out" in str(info.value)
    finished = PageParser(WANTED, deadline=_Deadline(allowed=1))
    finished.feed(chunk)
    with pytest.raises(ScrapeError):
        finished.close()  # a page parsed after the deadline is no reading either


def test_a_reading_that_arrives_after_its_timeout_is_discarded() -> None:
    release = threading.Event()
    late = HostReading(hostname="late", gpus=(FleetGpu(gpu="0", uuid="GPU-0", model="M",
                                                       util_pct=99.0),))

    def slow(target: Target, timeout: float) -> HostReading:
        release.wait(30)
        return late

    now = [0.0]
    poller = FleetPoller([Target("n1:1", "http://n1:1/metrics")], interval=1.0, timeout=0.2,
                         clock=lambda: now[0], scrape_fn=slow)
    first = poller.poll().hosts[0]
    assert first.state is HostState.DOWN and "timed out" in (first.error or "")
    release.set()
    # Each poll collects a finished request; the clock stands still, so none starts anew.
    wait_for(lambda: poller.poll() and poller._states[0].inflight is None, 10,
             "the late answer to be collected")
    host = poller.poll().hosts[0]
    assert host.state is HostState.DOWN and host.reading.hostname != "late"
    assert host.gpus == () and host.reads == 0


def test_bad_targets_never_slow_the_good_host(page_server: Pages,
                                              stubborn_server: Stubborn) -> None:
    good = page_server(gpu_page("good"))
    big = page_server(huge_page("big", gpu_series=False))
    too_many = page_server(huge_page("many", gpu_series=True))
    hung = stubborn_server("silent")
    drip = stubborn_server("trickle-body", step=0.2)
    targets = [parse_target(s.target) for s in (good, big, too_many, hung, drip)]
    poller = FleetPoller(targets, interval=0.25, timeout=3.0)
    hosts = lambda: {h.target: h for h in poller.snapshot().hosts}  # noqa: E731
    poller.start(lambda: None)
    try:
        first = wait_for(lambda: (h := hosts())[hung.target].failures >= 1 and h, 60,
                         "the hung host to time out once")
        second = wait_for(lambda: (h := hosts())[hung.target].failures >= 2 and h, 60,
                          "the hung host to time out again")
        # While the hung host used up one whole timeout, the good host kept its interval:
        # a poller that waited for every host would have read it once.
        assert second[good.target].reads - first[good.target].reads >= 4
        assert second[good.target].state is HostState.UP
        assert "timed out" in (second[hung.target].error or "")
        settled = wait_for(lambda: (h := hosts())[drip.target].failures >= 1 and
                           h[big.target].reads >= 1 and h, 60, "every host to be read once")
        assert settled[drip.target].state is HostState.DOWN
        assert "timed out" in (settled[drip.target].error or "")
        assert settled[big.target].state is HostState.UP
        assert len(settled[big.target].gpus) == 1
        assert settled[too_many.target].state is HostState.ERROR
        assert "more than 20,000 GPU series" in (settled[too_many.target].error or "")
        assert good.requests >= second[good.target].reads
    finally:
        poller.close()


async def test_the_view_keeps_the_good_host_fresh_and_quits_at_once(
        page_server: Pages, stubborn_server: Stubborn) -> None:
    good = page_server(gpu_page("good"))
    too_many = page_server(huge_page("many", gpu_series=True))
    hung = stubborn_server("silent")
    # A long timeout: the hung host stays unanswered for the whole test.
    poller = FleetPoller([parse_target(s.target) for s in (good, too_many, hung)],
                         interval=0.25, timeout=120)
    app = FleetApp(poller, interval=0.25)

    async def drive() -> None:
        async with app.run_test(size=(160, 30)) as pilot:
            def good_reads() -> int:
                snap = app.snapshot
                return 0 if snap is None else next(
                    h.reads for h in snap.hosts if h.target == good.target)

            while good_reads() < 5:
                await pilot.pause(0.05)
            snap = app.snapshot
            assert snap is not None
            states = {h.target: h.state for h in snap.hosts}
            assert states[hung.target] is HostState.PENDING  # still no answer at all
            assert hung.connections == 1  # and never asked twice at once
            await pilot.press("q")

    # A deadline for the test, not a duration being measured: before, `q` took 30-50 s.
    await asyncio.wait_for(drive(), 60)
    assert not app.is_running


def test_parse_metrics_reads_a_page_in_one_piece_like_the_stream() -> None:
    page = gpu_page("n1", gpus=3).decode()
    whole = parse_metrics(page)
    parser = PageParser(WANTED)
    for i in range(0, len(page), 7):  # chunk borders inside names, labels and values
        parser.feed(page[i:i + 7])
    assert parser.close() and len(whole.gpus) == 3
    assert reading_from_series(parser.series) == whole
