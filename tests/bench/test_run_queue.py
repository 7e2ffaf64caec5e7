"""The headless run queue the CLI and the TUI drive: order, saving rules, partial totals,
and `bench run` surviving a dropped terminal (SIGHUP)."""

from __future__ import annotations

import json
import os
import pty
import signal
import subprocess
import sys
import threading
import time
from dataclasses import replace
from pathlib import Path

import pytest

from gputui.bench import results_store
from gputui.bench.request import make_request
from gputui.bench.run_queue import Finished, Planned, RunOptions, RunQueue

FAKE = Path(__file__).with_name("fake_worker.py")
REPO = Path(__file__).resolve().parents[2]
WAIT_S = 120.0


@pytest.fixture(autouse=True)
def data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("GPUTUI_DATA_DIR", str(tmp_path))
    return tmp_path


def fake_queue(mode: str, finished: list[Finished], **kw: object) -> RunQueue:
    env = {**os.environ, "FAKE_WORKER_MODE": mode, "PYTHONPATH": str(REPO)}
    return RunQueue(on_finished=finished.append, grace_s=0.2,
                    run_options=RunOptions(worker_cmd=[sys.executable, str(FAKE)], env=env),
                    **kw)


def planned(**kw: object) -> Planned:
    return Planned(make_request("cnn-infer", device="cpu"), "cnn-infer", **kw)  # type: ignore[arg-type]


def test_runs_one_after_another_and_each_is_saved(data_dir: Path) -> None:
    finished: list[Finished] = []
    queue = fake_queue("ok", finished)
    first, second = planned(), planned()
    assert queue.submit(first) == 0  # runs now
    assert queue.submit(second) in (0, 1)  # next (or now, if the first already ended)
    assert queue.wait(WAIT_S)
    assert [f.planned.id for f in finished] == [first.id, second.id]
    for f in finished:
        assert f.path == data_dir / "results" / f"{f.planned.id}.json"
        assert results_store.load(f.planned.id) == f.result
    assert queue.current is None and queue.pending == []


def test_output_copy_is_written_beside_the_saved_result(data_dir: Path) -> None:
    finished: list[Finished] = []
    queue = fake_queue("ok", finished)
    out = data_dir / "copy.json"
    queue.submit(planned(output=out))
    assert queue.wait(WAIT_S)
    (f,) = finished
    assert f.path is not None
    assert json.loads(out.read_text()) == json.loads(f.path.read_text())


def test_invalid_settings_are_not_saved(data_dir: Path) -> None:
    finished: list[Finished] = []
    queue = RunQueue(on_finished=finished.append)
    # The real worker rejects fp16 on the CPU before anything runs (no torch needed:
    # the spec check happens before the device is touched only when torch is absent,
    # so this uses a device the catalog accepts and the worker refuses).
    bad = Planned(replace(make_request("cnn-infer", device="cpu"), precision="fp16"), "bad")
    queue.submit(bad)
    assert queue.wait(WAIT_S)
    (f,) = finished
    assert f.invalid and f.path is None
    assert not (data_dir / "results").exists() or list((data_dir / "results").iterdir()) == []


def test_a_killed_worker_saves_the_whole_timed_loops_samples(data_dir: Path) -> None:
    # Five progress windows of 2 samples, then a hang the time limit ends with SIGKILL:
    # the saved total is the loop's 10 samples, not the last window's 2.
    finished: list[Finished] = []
    queue = fake_queue("windows_then_hang", finished)
    queue.submit(planned(timeout_s=1.5))
    assert queue.wait(WAIT_S)
    (f,) = finished
    r = results_store.load(f.planned.id)
    assert r.status == "failed" and r.error is not None and r.error.kind == "timeout"
    assert r.samples == 10 and r.steps == 5
    assert r.throughput is not None and r.throughput.value == pytest.approx(10 / 0.5)


def test_cancel_saves_the_partial_result(data_dir: Path) -> None:
    finished: list[Finished] = []
    started = threading.Event()
    queue = fake_queue("term_partial", finished,
                       on_event=lambda _p, ev: started.set() if ev.kind == "progress" else None)
    p = planned()
    queue.submit(p)
    queue.submit(planned())  # waits behind it
    assert started.wait(WAIT_S)
    assert queue.remove(0) is not None  # the queued one goes
    assert queue.cancel()
    assert queue.wait(WAIT_S)
    assert [f.planned.id for f in finished] == [p.id]
    assert results_store.load(p.id).status == "cancelled"


# ------------------------------------------------------------------ SIGHUP (SSH dropped)

CLI_WITH_FAKE_WORKER = (
    "import json, sys; import gputui.bench.runner as r; from gputui.cli import main; "
    "r.worker_command = lambda spec_json: [sys.executable, {fake!r}, '--spec-json', "
    "spec_json]; sys.exit(main(sys.argv[1:]))"
)


def test_sighup_cancels_saves_and_exits_129(data_dir: Path) -> None:
    """The terminal goes away (its master end closes) and SIGHUP arrives: the run is
    cancelled and saved, and writes to the dead terminal do not turn into exit 1."""
    master, slave = pty.openpty()
    env = {**os.environ, "FAKE_WORKER_MODE": "term_partial", "PYTHONPATH": str(REPO),
           "GPUTUI_DATA_DIR": str(data_dir)}
    proc = subprocess.Popen(
        [sys.executable, "-c", CLI_WITH_FAKE_WORKER.format(fake=str(FAKE)), "bench", "run",
         "cnn-infer", "--device", "cpu"],
        stdin=slave, stdout=slave, stderr=slave, env=env, start_new_session=True)
    os.close(slave)
    try:
        seen = b""
        deadline = time.monotonic() + WAIT_S
        while b"images/s" not in seen and time.monotonic() < deadline:
            seen += os.read(master, 4096)  # the progress bar shows a rate: it is running
        assert b"images/s" in seen, seen
        os.close(master)  # the SSH connection drops: writes to the terminal now fail
        proc.send_signal(signal.SIGHUP)
        rc = proc.wait(WAIT_S)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert rc == 129
    (saved,) = results_store.history().results
    assert saved.status == "cancelled" and saved.steps is not None and saved.steps >= 1
