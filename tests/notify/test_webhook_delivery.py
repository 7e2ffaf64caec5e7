"""Webhook delivery under hostile and flaky endpoints: a redirect is a failed delivery that
names its target's host and sends nothing there; only transient answers are retried; one
deadline bounds a whole POST, however slowly the answer drips; a failure is said while
gputui runs, at most once a minute per sink."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest

from gputui.notify.events import EventTracker
from gputui.notify.notifier import Notifier, summary_lines
from gputui.notify.sinks import DeliveryError
from gputui.notify.webhook import WebhookSink, retry_after_s
from tests.notify.conftest import TLS_DIR, Dripper, Receiver, Silent, TlsReceiver
from tests.notify.test_sinks import EVENT, SECRET


def quick(url: str, *, deadline_s: float = 5.0, attempts: int = 3) -> WebhookSink:
    return WebhookSink(url, deadline_s=deadline_s, attempts=attempts, backoff_s=0.01)


@pytest.mark.parametrize("status", [301, 302, 303, 307, 308])
def test_a_redirect_is_not_followed_and_names_its_target(receiver: Receiver,
                                                          status: int) -> None:
    redirector = Receiver(status)
    try:
        # The answer points at another server (another port): nothing may reach it.
        redirector.location = receiver.url(f"/stolen/{SECRET}")
        lines: list[str] = []
        notifier = Notifier(EventTracker(), [quick(
            redirector.url(f"/services/{SECRET}", creds="user:hunter2@"))],
            report=lines.append)
        notifier.publish([EVENT])
        stats = notifier.close(drain_s=30)
    finally:
        redirector.close()
    assert (stats[0].delivered, stats[0].failed) == (0, 1)
    assert len(redirector.bodies) == 1  # tried once: a redirect is not transient
    assert receiver.bodies == [] and receiver.headers == []  # no body, no Authorization
    words = f"HTTP {status} redirect to 127.0.0.1:{receiver.port}, not followed"
    assert stats[0].last_error == words
    assert lines[0].startswith(f"webhook 127.0.0.1:{redirector.port}: event not delivered "
                               f"({words})")
    for line in [*lines, *summary_lines(stats, notifier.sent)]:
        assert SECRET not in line and "hunter2" not in line and "stolen" not in line


def test_a_redirect_to_another_scheme_is_named_by_its_scheme(receiver: Receiver) -> None:
    receiver.status = 307
    receiver.location = "file:///etc/passwd"
    with pytest.raises(DeliveryError, match=r"^HTTP 307 redirect to a file: URL, not "
                       r"followed$"):
        quick(receiver.url()).send(EVENT, threading.Event())
    assert len(receiver.bodies) == 1


@pytest.mark.parametrize("status", [408, 429, 500, 502, 503, 504])
def test_a_transient_answer_is_retried(receiver: Receiver, status: int) -> None:
    receiver.status = status
    with pytest.raises(DeliveryError, match=rf"^HTTP {status}$"):
        quick(receiver.url()).send(EVENT, threading.Event())
    assert len(receiver.bodies) == 3  # the first try and two retries


@pytest.mark.parametrize("status", [400, 401, 403, 404, 410, 413, 501])
def test_a_refusal_is_tried_once(receiver: Receiver, status: int) -> None:
    receiver.status = status
    with pytest.raises(DeliveryError, match=rf"^HTTP {status}$"):
        quick(receiver.url()).send(EVENT, threading.Event())
    assert len(receiver.bodies) == 1


class RecordedWaits(threading.Event):
    """A stop event that is never set, whose waits return at once and are kept."""

    def __init__(self) -> None:
        super().__init__()
        self.waits: list[float | None] = []

    def wait(self, timeout: float | None = None) -> bool:
        self.waits.append(timeout)
        return False


def test_a_retry_after_is_waited_for_before_the_next_try(receiver: Receiver) -> None:
    receiver.script = [429]  # then 200
    receiver.retry_after = "30"
    stop = RecordedWaits()
    quick(receiver.url()).send(EVENT, stop)  # backoff 0.01 s: the header rules
    assert len(receiver.bodies) == 2
    assert stop.waits == [30.0]


def test_a_retry_after_too_long_gives_the_event_up_and_says_why(receiver: Receiver) -> None:
    receiver.status = 503
    receiver.retry_after = "3600"
    with pytest.raises(DeliveryError, match=r"^HTTP 503, asked to retry after 3600 s$"):
        quick(receiver.url()).send(EVENT, threading.Event())
    assert len(receiver.bodies) == 1  # not asked again within the hour it asked for


def test_retry_after_reads_seconds_and_http_dates() -> None:
    assert retry_after_s("120") == 120.0
    assert retry_after_s("Wed, 21 Oct 2015 07:28:00 GMT", now=1445412450.0) == 30.0
    assert retry_after_s("Wed, 21 Oct 2015 07:28:00 GMT", now=1445412500.0) == 0.0  # past
    assert retry_after_s("soon") is None and retry_after_s("-5") is None
    assert retry_after_s(None) is None


def test_a_retry_after_of_non_ascii_digits_is_ignored_not_an_error(receiver: Receiver) -> None:
    receiver.status = 429
    receiver.retry_after = "²"  # isdigit() says yes; float() refuses it
    with pytest.raises(DeliveryError, match=r"^HTTP 429$"):
        quick(receiver.url()).send(EVENT, threading.Event())
    assert len(receiver.bodies) == 3  # retried as any 429 without a usable Retry-After


def test_a_huge_retry_after_is_said_as_a_finite_wait(receiver: Receiver) -> None:
    receiver.status = 429
    receiver.retry_after = "1" * 400  # float() of it is inf
    with pytest.raises(DeliveryError, match=r"^HTTP 429, asked to retry after 1000000000 s$"):
        quick(receiver.url()).send(EVENT, threading.Event())
    assert len(receiver.bodies) == 1


@pytest.fixture
def local_time_5h_west(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("TZ", "EST5")  # POSIX form: needs no tz database
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


@pytest.mark.usefixtures("local_time_5h_west")
def test_a_retry_after_date_in_minus_0000_is_utc_not_local_time() -> None:
    # RFC 5322's "-0000" is UTC; email.utils reads it as a naive datetime.
    assert retry_after_s("Wed, 21 Oct 2015 07:28:00 -0000", now=1445412450.0) == 30.0
    assert retry_after_s("Wed, 21 Oct 2015 07:28:00 GMT", now=1445412450.0) == 30.0


def test_a_retry_that_succeeds_delivers_once(receiver: Receiver) -> None:
    receiver.script = [503, 502]
    quick(receiver.url()).send(EVENT, threading.Event())
    assert len(receiver.bodies) == 3


def test_a_dripping_answer_ends_at_the_deadline_and_the_next_event_goes_out(
        dripper: Dripper) -> None:
    # The first answer comes one byte per 0.2 s (about 16 s in all): each read returns
    # in time, so only a deadline on the whole POST gives up on it.
    lines: list[str] = []
    said = threading.Event()

    def report(line: str) -> None:
        lines.append(line)
        said.set()

    notifier = Notifier(EventTracker(), [quick(dripper.url(), deadline_s=0.6, attempts=1)],
                        report=report)
    notifier.publish([EVENT, EVENT])
    # The line comes while gputui runs, not at exit.
    assert said.wait(30)
    assert lines == [f"webhook 127.0.0.1:{dripper.port}: event not delivered (no complete "
                     "answer within 0.6 s); further failures are said at most once every "
                     "60 s"]
    assert notifier.wait_idle(30)
    stats = notifier.close(drain_s=0)
    assert (stats[0].delivered, stats[0].failed) == (1, 1)
    assert dripper.requests == 2


def test_closing_ends_a_post_in_flight_at_once(silent: Silent) -> None:
    notifier = Notifier(EventTracker(), [quick(silent.url(), deadline_s=600, attempts=1)])
    notifier.publish([EVENT])
    assert silent.accepted.wait(10)
    started = time.monotonic()
    stats = notifier.close(drain_s=0)
    # The worker gave up the POST (its connection shut) rather than wait 600 s: it has
    # ended, and the event is counted as not delivered.
    worker = f"gputui-notify-webhook 127.0.0.1:{silent.port}"
    assert [t for t in threading.enumerate() if t.name == worker] == []
    assert time.monotonic() - started < 60  # a hang guard, not a timing claim
    assert stats[0].undelivered == 1


def test_failure_lines_are_said_at_most_once_a_minute_per_sink(receiver: Receiver) -> None:
    receiver.status = 404
    now = [0.0]
    lines: list[str] = []
    notifier = Notifier(EventTracker(), [quick(receiver.url())], report=lines.append,
                        clock=lambda: now[0])

    def fail_one(at: float) -> None:
        now[0] = at
        n = len(receiver.bodies)
        notifier.publish([EVENT])
        receiver.wait_for(n + 1)
        assert notifier.wait_idle(30)

    fail_one(0.0)  # said at once
    fail_one(10.0)  # counted, not said
    fail_one(59.0)  # counted, not said
    fail_one(61.0)  # a minute since the line: said, with what was not said before
    fail_one(70.0)
    assert lines == [
        f"webhook 127.0.0.1:{receiver.port}: event not delivered (HTTP 404); further "
        "failures are said at most once every 60 s",
        f"webhook 127.0.0.1:{receiver.port}: 3 events not delivered (HTTP 404)",
    ]
    stats = notifier.close(drain_s=0)
    assert stats[0].failed == 5
    assert summary_lines(stats, notifier.sent) == [
        f"notify: webhook 127.0.0.1:{receiver.port}: 5 of 5 events not delivered "
        "(last error: HTTP 404)"]


def test_failures_not_yet_said_are_said_when_the_minute_is_over(receiver: Receiver) -> None:
    # No further event comes: the worker says what it held back once the interval ends.
    receiver.status = 404
    lines: list[str] = []
    second = threading.Event()

    def report(line: str) -> None:
        lines.append(line)
        if len(lines) == 2:
            second.set()

    notifier = Notifier(EventTracker(), [quick(receiver.url())], report=report,
                        report_every_s=0.3)
    notifier.publish([EVENT, EVENT, EVENT])
    assert second.wait(30)
    notifier.close(drain_s=0)
    assert lines[1] == f"webhook 127.0.0.1:{receiver.port}: 2 events not delivered (HTTP 404)"


def test_a_plain_http_proxy_from_the_environment_is_used(
        receiver: Receiver, monkeypatch: pytest.MonkeyPatch) -> None:
    # The receiver plays the proxy: it is asked for the whole URL of another host.
    monkeypatch.setenv("http_proxy", f"http://proxyuser:proxypw@127.0.0.1:{receiver.port}")
    monkeypatch.setenv("no_proxy", "localhost")
    quick("http://hooks.example:8080/services/x").send(EVENT, threading.Event())
    assert receiver.paths == ["http://hooks.example:8080/services/x"]
    assert receiver.headers[0]["Host"] == "hooks.example:8080"
    assert receiver.headers[0]["Proxy-Authorization"] == "Basic cHJveHl1c2VyOnByb3h5cHc="
    assert receiver.bodies == [EVENT.to_dict()]


def test_no_proxy_is_honoured(receiver: Receiver, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("http_proxy", "http://127.0.0.1:9")  # nothing listens there
    monkeypatch.setenv("no_proxy", "127.0.0.1")
    quick(receiver.url("/direct")).send(EVENT, threading.Event())
    assert receiver.paths == ["/direct"]


@pytest.fixture
def tls_receiver() -> Iterator[TlsReceiver]:
    r = TlsReceiver(200)
    yield r
    r.close()


def test_https_is_delivered_with_the_certificate_checked(
        tls_receiver: TlsReceiver, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SSL_CERT_FILE", str(TLS_DIR / "cert.pem"))  # trust the test's CA
    quick(tls_receiver.url(f"/services/{SECRET}", creds="user:hunter2@")).send(
        EVENT, threading.Event())
    assert tls_receiver.bodies == [EVENT.to_dict()]
    assert tls_receiver.paths == [f"/services/{SECRET}"]
    assert tls_receiver.headers[0]["Host"] == f"127.0.0.1:{tls_receiver.port}"
    assert tls_receiver.headers[0]["Authorization"] == "Basic dXNlcjpodW50ZXIy"


def test_a_certificate_that_does_not_verify_is_tried_once(
        tls_receiver: TlsReceiver, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SSL_CERT_FILE", str(TLS_DIR / "no-such-ca.pem"))
    with pytest.raises(DeliveryError, match=r"^TLS: self-signed certificate$"):
        quick(tls_receiver.url()).send(EVENT, threading.Event())
    assert tls_receiver.connections == 1 and tls_receiver.bodies == []


def test_a_tls_handshake_that_never_comes_ends_at_the_deadline(silent: Silent) -> None:
    with pytest.raises(DeliveryError, match=r"^no complete answer within 0\.3 s$"):
        quick(f"https://127.0.0.1:{silent.port}/hook", deadline_s=0.3, attempts=1).send(
            EVENT, threading.Event())
