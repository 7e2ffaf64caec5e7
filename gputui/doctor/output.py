"""The doctor's report as text, as one JSON document, and as a JUnit XML file."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from typing import Any

from gputui.doctor.model import Check, Report, Status, expected_text, value_text
from gputui.safe_text import printable

SCHEMA = 1
_LABEL = {Status.PASS: "PASS", Status.WARN: "WARN", Status.FAIL: "FAIL", Status.SKIP: "SKIP"}


def check_line(check: Check) -> str:
    """One aligned line per check: where, id, status, measured, expected, what went wrong."""
    expected = expected_text(check)
    tail = f"expected {expected}" if expected else ""
    if check.detail and check.status is not Status.PASS:
        tail = f"{tail} — {check.detail}" if tail else check.detail
    return printable(f"{check.where:<6} {check.id:<17} {_LABEL[check.status]:<5} "
                     f"{value_text(check):<34} {tail}".rstrip())


def text_report(report: Report, strict: bool) -> str:
    """The GPUs, one line per check, then `summary_text`."""
    names = ", ".join(f"{g.index}: {g.name}" for g in report.gpus)
    lines = [printable(f"GPUs {names}")] if names else []
    lines.extend(check_line(c) for c in report.checks)
    return "\n".join(lines) + "\n" + summary_text(report, strict)


def summary_text(report: Report, strict: bool) -> str:
    """Why each failing or warning check matters, and the verdict line."""
    lines = [""]
    failing = [c for c in report.checks if c.status in (Status.FAIL, Status.WARN)]
    if failing:
        lines.append("why it matters:")
        seen: set[str] = set()
        for c in failing:
            if c.id not in seen:
                seen.add(c.id)
                lines.append(f"  {c.id}: {c.why}")
        lines.append("")
    lines.append(report.verdict(strict))
    return "\n".join(lines) + "\n"


def check_to_dict(check: Check) -> dict[str, Any]:
    return {"id": check.id, "gpu": check.gpu, "status": check.status.value,
            "value": check.value, "expected": check.expected, "unit": check.unit,
            "why": check.why, "detail": check.detail, "stage": check.stage.value}


def report_to_dict(report: Report, strict: bool) -> dict[str, Any]:
    return {
        "schema": SCHEMA,
        "status": report.outcome(strict).value,
        "exit_code": report.exit_code(strict),
        "strict": strict,
        "interrupted": report.interrupted,
        "verdict": report.verdict(strict),
        "counts": {s.value: n for s, n in report.counts.items()},
        "driver_version": report.driver_version,
        "cuda_driver_version": report.cuda_driver_version,
        "gpus": [{"index": g.index, "name": g.name, "uuid": g.uuid} for g in report.gpus],
        "checks": [check_to_dict(c) for c in report.checks],
    }


def json_report(report: Report, strict: bool) -> str:
    return json.dumps(report_to_dict(report, strict), indent=2, ensure_ascii=False) + "\n"


def junit_report(report: Report, strict: bool) -> str:
    """One <testcase> per check (classname: the GPU); fail → <failure>, warn → <failure
    type="warn"> only with --strict (else a passing case that says so), skip → <skipped>."""
    failures = sum(1 for c in report.checks if _junit_fails(c, strict))
    skipped = report.counts[Status.SKIP]
    suite = ET.Element("testsuite", name="gputui doctor", tests=str(len(report.checks)),
                       failures=str(failures), errors="0", skipped=str(skipped))
    for c in report.checks:
        case = ET.SubElement(suite, "testcase", classname=c.where.replace(" ", ""),
                             name=c.id)
        message = _junit_message(c)
        if _junit_fails(c, strict):
            fail = ET.SubElement(case, "failure", message=message, type=c.status.value)
            fail.text = f"{message}\nwhy: {c.why}"
        elif c.status is Status.SKIP:
            ET.SubElement(case, "skipped", message=message)
        elif c.status is Status.WARN:
            ET.SubElement(case, "system-out").text = f"warning: {message}"
    root = ET.Element("testsuites", name="gputui doctor", tests=str(len(report.checks)),
                      failures=str(failures), skipped=str(skipped))
    root.append(suite)
    ET.indent(root)
    return '<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(
        root, encoding="unicode") + "\n"


def _junit_fails(check: Check, strict: bool) -> bool:
    return check.status is Status.FAIL or (strict and check.status is Status.WARN)


def _junit_message(check: Check) -> str:
    parts = [f"measured {value_text(check)}"]
    if check.expected is not None:
        parts.append(f"expected {expected_text(check)}")
    if check.detail:
        parts.append(check.detail)
    return printable("; ".join(parts))


