from __future__ import annotations

import ast
from pathlib import Path

import pytest

from gputui.telemetry import units

NVML_PACKAGE = Path(units.__file__).parent / "nvml"


def test_nvml_units_convert_exactly() -> None:
    assert units.mw_to_w(250_123) == pytest.approx(250.123)
    assert units.mj_to_j(123_456_789) == pytest.approx(123_456.789)
    assert units.kbps_to_bps(1000) == 1_024_000
    assert units.mw_to_w(None) is None and units.mj_to_j(None) is None
    assert units.kbps_to_bps(None) is None
    assert units.us_to_ns(3) == 3000 and units.ms_to_s(250) == 0.25


def test_the_nvml_package_leaves_unit_conversions_to_units() -> None:
    """NVML's units become gputui's in telemetry/units.py only: no code under nvml/
    scales a number by a thousand or 1024 (or more) itself."""
    scaled = []
    for path in sorted(NVML_PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text("utf-8"))):
            if isinstance(node, ast.BinOp) and isinstance(
                    node.op, ast.Mult | ast.Div | ast.FloorDiv | ast.Mod | ast.Pow):
                for side in (node.left, node.right):
                    if isinstance(side, ast.Constant) and type(side.value) in (int, float) \
                            and abs(side.value) >= 1000:
                        scaled.append(f"{path.name}:{node.lineno}: {ast.unparse(node)}")
    assert len(list(NVML_PACKAGE.rglob("*.py"))) > 5
    assert scaled == []


def test_cuda_version_is_major_dot_minor() -> None:
    assert units.cuda_version_str(12040) == "12.4"
    assert units.cuda_version_str(11080) == "11.8"
    assert units.cuda_version_str(None) is None


def test_unknown_values_read_na_never_zero() -> None:
    for fmt in (units.fmt_bytes, units.fmt_pct, units.fmt_w, units.fmt_temp, units.fmt_mhz,
                units.fmt_j, units.fmt_rate):
        assert fmt(None) == "N/A"


def test_people_formats_carry_units() -> None:
    assert units.fmt_bytes(80 * 2**30) == "80.0GiB"
    assert units.fmt_bytes(512 * 2**20, unit="MiB") == "512MiB"
    assert units.fmt_w(249.6) == "250W"
    assert units.fmt_temp(87) == "87°C"
    assert units.fmt_rate(2 * 2**20) == "2MiB/s"
    assert units.fmt_j(1500.0) == "1.5kJ"


@pytest.mark.parametrize(("seconds", "text"), [(5, "5s"), (192, "3m12s"), (3720, "1h02m"),
                                               (90000, "1d01h")])
def test_durations(seconds: float, text: str) -> None:
    assert units.fmt_duration(seconds) == text
