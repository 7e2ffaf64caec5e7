"""deploy/prometheus/gputui-alerts.yml: valid rules (`promtool check rules`), their unit
tests pass (`promtool test rules`), and they ask only for metrics and labels `gputui
export` serves. Needs promtool (Debian package `prometheus`); skipped only where it is
absent, and CI refuses to run without it."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from gputui.fleet import metric_names as mn

RULES_DIR = Path(__file__).resolve().parents[2] / "deploy" / "prometheus"
RULES = RULES_DIR / "gputui-alerts.yml"
RULE_TESTS = RULES_DIR / "gputui-alerts.test.yml"
PROMTOOL = shutil.which("promtool") or (
    "/usr/bin/promtool" if Path("/usr/bin/promtool").is_file() else None)
needs_promtool = pytest.mark.skipif(PROMTOOL is None, reason="promtool is not installed")


def promtool(*args: str) -> subprocess.CompletedProcess[str]:
    assert PROMTOOL is not None
    return subprocess.run([PROMTOOL, *args], cwd=RULES_DIR, capture_output=True, text=True,
                          timeout=120)


@needs_promtool
def test_promtool_checks_the_rules() -> None:
    proc = promtool("check", "rules", RULES.name)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "SUCCESS: 10 rules found" in proc.stdout


@needs_promtool
def test_promtool_runs_the_rules_unit_tests() -> None:
    proc = promtool("test", "rules", RULE_TESTS.name)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "SUCCESS" in proc.stdout


def _served_names() -> set[str]:
    names = {"up"}  # Prometheus' own, per scrape target
    for v in vars(mn).values():
        if isinstance(v, mn.DcgmField):  # counters too: samples under DCGM's own name
            names.add(v.name)
        elif isinstance(v, str) and v.startswith("gputui_"):
            names.add(v)
    for counter in (mn.THROTTLE_SECONDS, mn.THROTTLE_EPISODES, mn.XID_EVENTS):
        names.add(f"{counter}_total")
    return names


def test_the_rules_ask_for_what_the_exporter_serves() -> None:
    text = RULES.read_text(encoding="utf-8")
    exprs = " ".join(re.findall(r"expr: \|?\n?((?:.*\n)+?)\s+(?:for|labels):", text))
    used = set(re.findall(r"\b(DCGM_FI_[A-Z0-9_]+|gputui_[a-z_]+|up)\b", exprs))
    assert used and used <= _served_names(), used - _served_names()
    labels = set(re.findall(r"\$labels\.(\w+)", text))
    assert labels <= {*mn.GPU_LABELS, "reason", "xid", "instance"}, labels
