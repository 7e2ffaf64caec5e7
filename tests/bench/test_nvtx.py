"""--nvtx: the ranges a benchmark marks for Nsight Systems. The real range functions need a
CUDA build, so the tests switch the ranges on for a CPU run (`nvtx.configure`'s
any_device seam) with torch.cuda.nvtx's push and pop patched to record."""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator
from typing import Any

import pytest

from gputui.errors import UsageError

pytestmark = pytest.mark.skipif(importlib.util.find_spec("torch") is None,
                                reason="needs torch (the bench extra)")


@pytest.fixture
def ranges(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """What was pushed ("+name") and popped ("-"), in order."""
    import torch

    from gputui.bench.worker import nvtx

    calls: list[str] = []
    monkeypatch.setattr(torch.cuda.nvtx, "range_push", lambda name: calls.append(f"+{name}"))
    monkeypatch.setattr(torch.cuda.nvtx, "range_pop", lambda: calls.append("-"))
    yield calls
    nvtx.configure(False, "cpu")


def run_gemm(nvtx_on: bool) -> None:
    from gputui.bench.worker import nvtx

    from .test_deepbench import run_kind

    nvtx.configure(nvtx_on, "cpu", any_device=True)
    run_kind(op="gemm", steps=2, warmup=1, params={"scale": 64}, nvtx=nvtx_on)


def test_phases_and_steps_are_ranges_when_asked(ranges: list[str]) -> None:
    run_gemm(True)
    pushed = [c[1:] for c in ranges if c.startswith("+")]
    assert len(pushed) == ranges.count("-")  # balanced
    first = pushed.index("deepbench gemm 1760,16,1760,n,n")
    assert pushed[first:first + 6] == ["deepbench gemm 1760,16,1760,n,n", "warmup",
                                       "warmup step 0", "timed loop", "step 0", "step 1"]
    # Nested, not just listed: the shape's range closes after its timed loop's.
    depth, deepest = 0, 0
    for c in ranges:
        depth += 1 if c.startswith("+") else -1
        deepest = max(deepest, depth)
        assert depth >= 0
    assert depth == 0 and deepest == 3  # shape > timed loop > step


def test_no_range_without_the_flag(ranges: list[str]) -> None:
    run_gemm(False)
    assert ranges == []


def test_ranges_are_cuda_only_by_default() -> None:
    from gputui.bench.worker import nvtx

    nvtx.configure(True, "cpu")
    assert not nvtx.enabled()
    nvtx.configure(True, "cuda")
    assert nvtx.enabled()
    nvtx.configure(False, "cuda")
    assert not nvtx.enabled()


def test_the_flags_reach_the_request(gputui: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    from gputui.bench import request

    seen: dict[str, Any] = {}

    def capture(name: str, **settings: Any) -> Any:
        seen.update(settings)
        raise UsageError("stop here")

    monkeypatch.setattr(request, "make_request", capture)
    proc = gputui("bench", "run", "deepbench", "--device", "cpu", "--nvtx", "--op", "conv",
                  "--set", "infer", "--shapes", "full")
    assert proc.returncode == 2 and seen["nvtx"] is True
    assert (seen["op"], seen["problem_set"], seen["shape_set"]) == ("conv", "infer", "full")
    assert request.RunRequest("matmul").nvtx is False  # off by default
