"""Scraping one target: its page fetched and parsed as it streams in, within one deadline.

Blocking; the poller runs it on a thread of its own. The deadline covers the whole of
it — connection, headers, body and parsing — so a reading that would arrive late is an
error ("timed out"), never a value.
"""

from __future__ import annotations

from gputui.fleet.errors import ScrapeError
from gputui.fleet.fetch import DEFAULT_TIMEOUT_S, Deadline, open_page
from gputui.fleet.model import HostReading
from gputui.fleet.page import MAX_SERIES, PageParser, decoder
from gputui.fleet.readings import WANTED, reading_from_series
from gputui.fleet.targets import Target


def _reading(parser: PageParser) -> HostReading:
    if not parser.series:
        what = "no DCGM_FI_DEV_* or gputui_* metrics on the page" if parser.seen_metrics \
            else "empty metrics page"
        raise ScrapeError(what, down=False)
    return reading_from_series(parser.series)


def parse_metrics(text: str, *, max_series: int = MAX_SERIES) -> HostReading:
    """One whole metrics page → a HostReading. ScrapeError (down=False) if it is not one."""
    parser = PageParser(WANTED, max_series=max_series)
    parser.feed(text)
    parser.close()
    return _reading(parser)


def scrape(target: Target, timeout: float = DEFAULT_TIMEOUT_S, *,
           max_series: int = MAX_SERIES) -> HostReading:
    deadline = Deadline(timeout)
    try:
        with open_page(target.url, deadline, target.auth) as page:
            parser = PageParser(WANTED, deadline=deadline, max_series=max_series)
            text = decoder(page.charset)
            for chunk in page.chunks():
                parser.feed(text.decode(chunk))
            parser.feed(text.decode(b"", final=True))
            parser.close()
        reading = _reading(parser)
        deadline.check()  # building the reading counts too
        return reading
    finally:
        deadline.cancel()
