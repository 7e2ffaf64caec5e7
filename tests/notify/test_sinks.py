"""Delivering events: webhooks that answer, fail or hang; a command; the counts and the one
line that says what was not delivered; a webhook URL's secret never shown."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from gputui.notify.command import CommandSink
from gputui.notify.events import Event, EventTracker
from gputui.notify.notifier import Notifier, summary_lines
from gputui.notify.sinks import DeliveryError, url_host
from gputui.notify.webhook import WebhookSink
from tests.factories import T0
from tests.notify.conftest import Receiver, Silent

EVENT = Event(event="started", kind="throttle", gpu=0, uuid="GPU-0", host="trainbox",
              time=T0, started=T0, text="GPU 0: SW power cap, SM clock 1410→1200 MHz",
              reasons=("sw_power_cap",), values={"clock_sm_mhz": 1200})
SECRET = "T0000/B0000/XXXXsecrettokenXXXX"


def quick(url: str, **kw: float) -> WebhookSink:
    """A webhook sink with short waits (the defaults: 5 s timeout, 1 s then 2 s back-off)."""
    return WebhookSink(url, deadline_s=kw.get("deadline_s", 0.5),
                       backoff_s=kw.get("backoff_s", 0.01))


def test_webhook_posts_the_events_json(receiver: Receiver) -> None:
    quick(receiver.url("/services/x")).send(EVENT, threading.Event())
    assert receiver.bodies == [EVENT.to_dict()]
    assert receiver.paths == ["/services/x"]
    assert receiver.headers[0]["Content-Type"] == "application/json"
    # Slack and Mattermost show `text` as the message.
    assert receiver.bodies[0]["text"] == EVENT.text


def test_webhook_retries_a_server_error_then_gives_up(failing: Receiver) -> None:
    with pytest.raises(DeliveryError, match=r"^HTTP 500$"):
        quick(failing.url()).send(EVENT, threading.Event())
    assert len(failing.bodies) == 3  # the first try and two retries


def test_webhook_does_not_retry_a_refusal(receiver: Receiver) -> None:
    receiver.status = 404
    with pytest.raises(DeliveryError, match=r"^HTTP 404$"):
        quick(receiver.url()).send(EVENT, threading.Event())
    assert len(receiver.bodies) == 1


def test_webhook_that_never_answers_times_out(silent: Silent) -> None:
    with pytest.raises(DeliveryError, match=r"^no complete answer within 0\.2 s$"):
        WebhookSink(silent.url(), deadline_s=0.2, attempts=1).send(EVENT, threading.Event())


def test_a_url_is_shown_by_its_host_only(failing: Receiver) -> None:
    url = f"http://user:hunter2@127.0.0.1:{failing.port}/services/{SECRET}?token=abc"
    lines: list[str] = []
    notifier = Notifier(EventTracker(), [quick(url)], report=lines.append)
    notifier.publish([EVENT])
    stats = notifier.close(drain_s=30)
    lines += summary_lines(stats, notifier.sent)
    assert url_host(url) == f"127.0.0.1:{failing.port}"
    # The credentials went as HTTP basic auth, not into the request line.
    assert failing.headers[0]["Authorization"] == "Basic dXNlcjpodW50ZXIy"
    assert failing.paths[0] == f"/services/{SECRET}?token=abc"
    assert lines == [
        f"webhook 127.0.0.1:{failing.port}: event not delivered (HTTP 500); further failures "
        "are said at most once every 60 s",
        f"notify: webhook 127.0.0.1:{failing.port}: 1 of 1 event not delivered "
        "(last error: HTTP 500)",
    ]
    for line in lines:
        assert SECRET not in line and "hunter2" not in line and "token" not in line


def test_a_hanging_webhook_delays_nothing_and_is_counted(receiver: Receiver,
                                                         silent: Silent) -> None:
    lines: list[str] = []
    hanging = WebhookSink(silent.url(), deadline_s=60, attempts=1)
    notifier = Notifier(EventTracker(), [hanging, quick(receiver.url())], report=lines.append)
    notifier.publish([EVENT, EVENT])  # returns at once although nothing answers
    assert silent.accepted.wait(10)
    # The other sink delivered both while the first still waits for its answer.
    assert len(receiver.wait_for(2)) == 2
    stats = notifier.close(drain_s=0.2)
    assert [(s.delivered, s.undelivered) for s in stats] == [(0, 2), (2, 0)]
    assert summary_lines(stats, notifier.sent) == [
        f"notify: webhook 127.0.0.1:{silent.port}: 2 of 2 events not delivered "
        "(last error: still being sent at exit)"]


def test_a_full_queue_counts_what_it_could_not_take(silent: Silent) -> None:
    lines: list[str] = []
    notifier = Notifier(EventTracker(), [WebhookSink(silent.url(), deadline_s=60, attempts=1)],
                        report=lines.append, queue_size=2)
    notifier.publish([EVENT] * 10)
    stats = notifier.close(drain_s=0)
    assert stats[0].undelivered == 10 and stats[0].delivered == 0
    assert lines == [f"webhook 127.0.0.1:{silent.port}: event not delivered (queue full, the "
                     "sink is not keeping up); further failures are said at most once every "
                     "60 s"]


def test_command_gets_the_json_and_the_environment(tmp_path: Path) -> None:
    out = tmp_path / "got"
    cmd = (f'cat > {out}.json; printf "%s|%s|%s|%s|%s" "$GPUTUI_EVENT" "$GPUTUI_KIND" '
           f'"$GPUTUI_GPU" "$GPUTUI_HOST" "$GPUTUI_TEXT" > {out}.env')
    CommandSink(cmd).send(EVENT, threading.Event())
    assert Path(f"{out}.json").read_text() == EVENT.to_json() + "\n"
    assert Path(f"{out}.env").read_text() == (
        "started|throttle|0|trainbox|GPU 0: SW power cap, SM clock 1410→1200 MHz")


def test_a_failing_command_is_one_line() -> None:
    with pytest.raises(DeliveryError, match=r"^exit status 3: second line$"):
        CommandSink("echo first >&2; echo second line >&2; exit 3").send(EVENT,
                                                                        threading.Event())


def test_a_command_that_hangs_is_killed(tmp_path: Path) -> None:
    pidfile = tmp_path / "pid"
    with pytest.raises(DeliveryError, match=r"^still running after 0\.5 s, killed$"):
        CommandSink(f"sleep 60 & echo $! > {pidfile}; wait", timeout_s=0.5).send(
            EVENT, threading.Event())
    # What it started went with it (its own process group).
    pid = int(pidfile.read_text())
    assert _gone_within(pid, 10.0)


def _gone_within(pid: int, seconds: float) -> bool:
    """The process ended (or is a zombie) within `seconds`: SIGKILL is delivered
    asynchronously, so a loaded machine may show it alive for a moment after the kill."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            if Path(f"/proc/{pid}/stat").read_text().split()[2] == "Z":
                return True
        except OSError:
            return True
        time.sleep(0.05)
    return False


def test_a_malformed_url_path_is_not_quoted_in_the_error() -> None:
    # http.client refuses a path with a space, quoting it in its message.
    with pytest.raises(DeliveryError) as err:
        WebhookSink("http://127.0.0.1:9/services/T0/B0/XX secret", attempts=1).send(
            EVENT, threading.Event())
    assert "secret" not in str(err.value) and "/services" not in str(err.value)
