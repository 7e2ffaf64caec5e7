"""matmul and membw bounded by time, with the shape/size flags, on the CPU."""

from __future__ import annotations

import pytest

from gputui.bench import catalog, run_spec
from gputui.errors import UsageError
from tests.cli import CliRunner

from .worker_helpers import check_ok, run_worker


def test_matmul_points_last_the_requested_duration() -> None:
    run = run_worker({"benchmark": "matmul", "device": "cpu", "duration_s": 0.3,
                      "warmup": 1, "threads": 1, "shapes": [[96, 64, 32]]})
    doc = check_ok(run)
    pts = doc["points"]
    assert [p["label"] for p in pts] == ["fp32", "bf16"]  # one shape: labelled by dtype
    for p in pts:
        assert p["timed_s"] >= 0.3
        assert p["iterations"] > 0 and p["shape"] == [96, 64, 32]
        # TFLOP/s is FLOPs of the iterations over the timed seconds.
        assert p["throughput"] == pytest.approx(
            p["iterations"] * 2 * 96 * 64 * 32 / 1e12 / p["timed_s"], rel=1e-6)
    assert doc["samples"] is None  # a probe has steps, not samples
    assert doc["settings"]["bound"] == "0.3 s of timed work per point"
    assert doc["steps"] == sum(p["iterations"] for p in pts)


def test_matmul_sweep_reports_the_best_shape() -> None:
    run = run_worker({"benchmark": "matmul", "device": "cpu", "sweep": True, "steps": 2,
                      "warmup": 0, "threads": 1})
    doc = check_ok(run)
    fp32 = [p for p in doc["points"] if p["dtype"] == "fp32"]
    assert [p["shape"] for p in fp32] == [[128, 128, 128], [256, 256, 256], [512, 512, 512]]
    best = max(fp32, key=lambda p: p["throughput"])
    assert doc["extra"]["best_shape"]["fp32"] == best["shape"]
    assert doc["extra"]["tflops"]["fp32"] == best["throughput"] == doc["throughput"]["value"]


def test_membw_bytes_and_duration() -> None:
    run = run_worker({"benchmark": "membw", "device": "cpu", "duration_s": 0.3, "warmup": 1,
                      "params": {"array_bytes": 8 << 20}})
    doc = check_ok(run)
    assert doc["settings"]["array_bytes"] == 8 << 20
    for p in doc["points"]:
        assert p["timed_s"] >= 0.3 and p["iterations"] > 0
    assert doc["samples"] is None


def test_probe_defaults_on_cuda_are_duration_bounded() -> None:
    for name in ("matmul", "membw"):
        d = catalog.get(name).defaults("cuda")
        assert d["duration_s"] >= 2.0 and "steps" not in d


@pytest.mark.parametrize(("spec", "message"), [
    ({"benchmark": "matmul", "shapes": [[1, 2]]}, "M×N×K"),
    ({"benchmark": "matmul", "shapes": [[8, 8, 8]], "sweep": True}, "not both"),
    ({"benchmark": "membw", "shapes": [[8, 8, 8]]}, "applies to matmul"),
])
def test_bad_shapes_are_usage_errors(spec: dict, message: str) -> None:
    with pytest.raises(UsageError, match=message):
        run_spec.validate_spec(spec)


def test_bad_shape_on_the_command_line(cli: CliRunner) -> None:
    proc = cli("bench", "run", "matmul", "--shape", "8x8")
    assert proc.returncode == 2
    assert proc.stderr.startswith("gputui: ") and "MxNxK" in proc.stderr
    assert len(proc.stderr.splitlines()) == 1
