"""A benchmark launched with keys only in the real `gputui`, in tmux, against the fake NVML."""

from __future__ import annotations

import contextlib
import importlib.util
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import psutil
import pytest

from gputui.bench import results_store
from tests.e2e.tmux import TmuxSession
from tests.fakenvml.harness import FakeNvmlLib, scenario_path

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(importlib.util.find_spec("torch") is None,
                       reason="needs torch (the bench extra)"),
]

Start = Callable[..., TmuxSession]


def _ours(data_dir: str) -> list[psutil.Process]:
    """Every process started for this test: gputui and its worker carry our data dir."""
    found = []
    for proc in psutil.process_iter():
        with contextlib.suppress(psutil.Error):
            if proc.environ().get("GPUTUI_DATA_DIR") == data_dir and \
                    proc.status() != psutil.STATUS_ZOMBIE:
                found.append(proc)
    return found


@pytest.fixture
def no_leftovers(isolated_env: dict[str, str]) -> Iterator[str]:
    data_dir = isolated_env["GPUTUI_DATA_DIR"]
    yield data_dir
    # Runs after the `tui` fixture's teardown killed the tmux server (fixtures unwind
    # in reverse): nothing of ours may be left, neither gputui nor a benchmark worker.
    deadline = time.monotonic() + 10
    left = _ours(data_dir)
    while left and time.monotonic() < deadline:
        time.sleep(0.1)
        left = _ours(data_dir)
    for proc in left:
        with contextlib.suppress(psutil.Error):
            proc.kill()
    assert not left, f"left behind: {[p.cmdline()[:4] for p in left]}"


def test_a_benchmark_started_with_keys_shows_its_result(
        no_leftovers: str, tui: Start, fake_nvml_lib: FakeNvmlLib,
        isolated_env: dict[str, str]) -> None:
    env = fake_nvml_lib.env(scenario_path("two_gpus"), base=isolated_env)
    session = tui(env, width=140, height=45)
    session.wait_for("NVIDIA A100-SXM4-80GB", timeout=30)
    session.send_keys("b")
    session.wait_for("Run a benchmark", timeout=10)
    # Catalog: cnn-train, cnn-infer, ... Then Tab through model, device, precision,
    # batch, steps, duration, warm-up, image size.
    session.send_keys("Down")
    session.wait_for("Image-classifier inference", timeout=10)
    # All in one send, as a fast typist's keys arrive: each field's text must land in that
    # field, not in the one Tab is leaving (Tab used to move focus only after the input
    # had seen the keys behind it).
    session.send_keys("Tab", "Tab", "c", "p", "u", "Tab", "Tab", "2", "Tab", "3",
                      "Tab", "Tab", "1", "Tab", "3", "2")
    session.wait_for(["device      cpu ", "batch size  2 ", "steps       3 ",
                      "warm-up     1 ", "image size  32 "], timeout=10)
    session.send_keys("Enter")
    screen = session.wait_for("✓ cnn-infer resnet18 · cpu · fp32 · batch 2", timeout=90)
    assert "Traceback" not in screen
    ids = [d.id for d in results_store.history(Path(no_leftovers) / "results").results]
    assert len(ids) == 1
    # The row in the results table (the id is in the title line too: look for the row).
    deadline = time.monotonic() + 15
    rows: list[str] = []
    while not rows and time.monotonic() < deadline:
        rows = [line for line in session.capture().splitlines()
                if ids[0] in line and " cnn-infer " in line and " ok " in line]
        time.sleep(0.1)
    assert rows, session.capture()
    session.send_keys("Escape")  # back to the monitor (focus was in a form field)
    session.wait_for("NVIDIA A100-SXM4-80GB", timeout=10)
    session.send_keys("q")
    assert session.wait_exit(timeout=20) == 0
