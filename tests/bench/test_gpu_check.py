"""benchmarks/gpu_check.py is run by a maintainer on an NVIDIA machine; here, without CUDA,
it must say so in one line and exit 1 (not a traceback, not a table of zeros)."""

from __future__ import annotations

import os
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
