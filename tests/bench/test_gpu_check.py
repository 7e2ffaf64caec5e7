"""benchmarks/gpu_check.py is run by a maintainer on an NVIDIA machine; here, without CUDA,
it must say so in one line and exit 1 (not a traceback, not a table of zeros)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "gpu_check.py"


def test_without_cuda_exits_1_with_one_line() -> None:
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": ""}
    p = subprocess.run([sys.executable, str(SCRIPT)], capture_output=True, text=True,
                       env=env, timeout=180, check=False)
    assert p.returncode == 1
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1, p.stderr
    # "no CUDA GPU is visible to torch", or "torch is not installed" where it is not.
    assert lines[0].startswith("gpu_check: ")
    assert lines[0].endswith("; run this on an NVIDIA machine")
    assert p.stdout == ""


def test_gpm_check_without_cuda_exits_1_with_one_line() -> None:
    """benchmarks/gpm_check.py shares gpu_check's probe and its one-line refusal."""
    script = SCRIPT.with_name("gpm_check.py")
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": ""}
    p = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                       env=env, timeout=180, check=False)
    assert p.returncode == 1
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1, p.stderr
    assert lines[0].startswith("gpu_check: ")
    assert p.stdout == ""


def test_default_run_is_planned_to_fit_one_eight_minute_command() -> None:
    """A lent GPU gives one command of at most 8 minutes: the default plan fits it, prints
    its time first, runs the LLM rows (never yet run on CUDA) first, and needs no GPU."""
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": ""}
    p = subprocess.run([sys.executable, str(SCRIPT), "--plan"], capture_output=True,
                       text=True, env=env, timeout=60, check=False)
    assert p.returncode == 0, p.stderr
    head, *runs = p.stderr.strip().splitlines()
    m = re.search(r"about ([\d.]+) min; budget (\d+) s", head)
    assert m is not None, head
    assert float(m.group(1)) <= 8.0 and int(m.group(2)) <= 480
    assert [r.split()[0] for r in runs[:4]] == ["lm-infer", "lm-infer", "lm-train", "lm-train"]
    assert len(runs) == 12  # six workloads, gputui and bare, one round
    # The planned total is the sum of the runs listed (plus the snapshot check).
    listed = sum(float(r.split("~")[1].removesuffix(" s")) for r in runs)
    assert listed / 60 <= float(m.group(1)) <= (listed + 60) / 60
    # Three rounds are on request, and the plan says what they cost.
    p3 = subprocess.run([sys.executable, str(SCRIPT), "--plan", "--rounds", "3"],
                        capture_output=True, text=True, env=env, timeout=60, check=False)
    m3 = re.search(r"about ([\d.]+) min", p3.stderr)
    assert m3 is not None and float(m3.group(1)) > 2.5 * float(m.group(1)) - 1
