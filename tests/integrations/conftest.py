"""A fresh gputui.track reporter per test, writing into the test's own runtime dir."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from gputui import track
from gputui.telemetry.jobs import JobSource


@pytest.fixture
def reporter(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[JobSource]:
    """track.start/track.step go to a new Tracker in tmp_path; yields the monitor's
    reader of that directory."""
    run = tmp_path / "run"
    run.mkdir(mode=0o700)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(run))
    t = track.Tracker()
    monkeypatch.setattr(track, "start", t.start)
    monkeypatch.setattr(track, "step", t.step)
    source = JobSource()
    try:
        yield source
    finally:
        source.close()
        t.close()
        jobs = run / "gputui" / "jobs"
        assert not jobs.exists() or not os.listdir(jobs)  # the file went with its job
