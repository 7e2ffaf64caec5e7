"""What the UI's collaborators get from the app is handed to them, never read off it by
name: a BenchSession runs with nothing but the callables it is made with."""

from __future__ import annotations

import ast
import os
import queue
import sys
import time
from pathlib import Path
from typing import Any

from gputui.bench.request import RunRequest
from gputui.telemetry.frame import Frame
from gputui.ui.bench_messages import RunEvent, RunFinished
from gputui.ui.bench_session import BenchSession

REPO = Path(__file__).resolve().parents[2]
UI = REPO / "gputui" / "ui"
FAKE = REPO / "tests" / "bench" / "fake_worker.py"


def _is_app(node: ast.expr) -> bool:
    return (isinstance(node, ast.Name) and node.id == "app") or (
        isinstance(node, ast.Attribute) and node.attr == "app")


def test_no_ui_module_reads_or_sets_the_apps_attributes_by_name() -> None:
    offenders = []
    for path in sorted(UI.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and \
                    node.func.id in ("getattr", "setattr", "hasattr") and node.args and \
                    _is_app(node.args[0]):
                offenders.append(f"{path.relative_to(UI)}:{node.lineno}")
    assert offenders == []


def test_a_bench_session_runs_with_only_what_it_was_handed(data_dir: Path) -> None:
    posted: queue.Queue[object] = queue.Queue()
    toasts: list[tuple[str, dict[str, Any]]] = []
    asked: list[str] = []
    sampler = object()  # what the app would hand over: passed to the run as it is

    def latest_frame() -> Frame | None:
        asked.append("frame")
        return None

    def the_sampler() -> Any:
        asked.append("sampler")
        return sampler

    session = BenchSession(post=posted.put, notify=lambda text, **kw: toasts.append((text, kw)),
                           latest_frame=latest_frame, sampler=the_sampler)
    session.worker_cmd = [sys.executable, str(FAKE)]
    session.env = {**os.environ, "FAKE_WORKER_MODE": "ok", "PYTHONPATH": str(REPO)}
    assert session.submit(RunRequest(benchmark="matmul", device="cpu")) == 0
    assert session.runs.run_options.sampler is sampler

    # The app's part: hand the posted messages back on "the loop" (here, this thread).
    deadline = time.monotonic() + 60
    while session.last is None:
        assert time.monotonic() < deadline, "the run never finished"
        message = posted.get(timeout=60)
        if isinstance(message, RunEvent):
            session.apply_event(message)
        elif isinstance(message, RunFinished):
            session.apply_finished(message)

    assert session.last.status == "ok" and session.last.saved
    assert [kw["title"] for _, kw in toasts] == ["Benchmark done"]
    assert toasts[0][0].startswith("matmul")
    assert "frame" in asked  # the throttle attribution read the frame it was handed
    session.shutdown(0.1)
