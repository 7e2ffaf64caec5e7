"""What `gputui doctor` produces: checks with a status, and a report with a verdict.

One check is one fact about one GPU (or the whole box when `gpu` is None): what was
measured, what was expected, its unit, and one line on why it matters. The text
output, the JSON document, the JUnit file and the TUI all show these same values,
formatted by `value_text` / `expected_text`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum


class Status(StrEnum):
    PASS = "pass"
    WARN = "warn"
    FAIL = "fail"
    SKIP = "skip"


class Stage(StrEnum):
    CONFIG = "configuration"
    HEALTH = "health"
    EVENTS = "events"
    PERFORMANCE = "performance"


Value = str | int | float | bool | None


@dataclass(frozen=True, slots=True)
class Check:
    id: str
    gpu: int | None  # None: the whole machine
    status: Status
    value: Value  # what was measured
    expected: Value  # what a healthy, well-configured GPU shows
    unit: str | None
    why: str  # one line: why it matters
    detail: str | None = None  # what went wrong, or why it was skipped
    stage: Stage = Stage.CONFIG

    @property
    def where(self) -> str:
        return "box" if self.gpu is None else f"GPU {self.gpu}"


def value_text(check: Check) -> str:
    """The measured value as people read it: the same in the CLI and the TUI."""
    return _with_unit(check.value, check.unit)


def expected_text(check: Check) -> str:
    return _with_unit(check.expected, check.unit) if check.expected is not None else ""


def _with_unit(value: Value, unit: str | None) -> str:
    if value is None:
        return "N/A"
    if isinstance(value, bool):
        text = "yes" if value else "no"
    elif isinstance(value, float):
        text = f"{value:g}"
    else:
        text = str(value)
    if not unit or isinstance(value, bool):
        return text
    if unit in _PREFIX_UNITS:
        return f"{_PREFIX_UNITS[unit]}{text}"
    return f"{text} {unit}"


# Units people write before the number: PCIe "gen 4", "x16".
_PREFIX_UNITS = {"gen": "gen ", "lanes": "x"}


@dataclass(frozen=True, slots=True)
class GpuIdent:
    index: int
    name: str
    uuid: str


@dataclass(frozen=True, slots=True)
class Report:
    checks: tuple[Check, ...]
    gpus: tuple[GpuIdent, ...] = ()
    driver_version: str | None = None
    cuda_driver_version: str | None = None
    interrupted: bool = False
    counts: dict[Status, int] = field(init=False, compare=False)

    def __post_init__(self) -> None:
        counts = {s: 0 for s in Status}
        for c in self.checks:
            counts[c.status] += 1
        object.__setattr__(self, "counts", counts)

    def outcome(self, strict: bool) -> Status:
        """FAIL if any check failed (or warned, with `strict`), else WARN or PASS."""
        if self.counts[Status.FAIL] or (strict and self.counts[Status.WARN]):
            return Status.FAIL
        return Status.WARN if self.counts[Status.WARN] else Status.PASS

    def exit_code(self, strict: bool) -> int:
        if self.interrupted:
            return 130
        return 1 if self.outcome(strict) is Status.FAIL else 0

    def verdict(self, strict: bool) -> str:
        c = self.counts
        n = len(self.gpus)
        head = {Status.PASS: "PASS", Status.WARN: "PASS with warnings",
                Status.FAIL: "FAIL"}[self.outcome(strict)]
        if self.interrupted:
            head = "INTERRUPTED"
        strict_note = " (--strict: warnings fail)" if strict and c[Status.WARN] else ""
        # Interrupted before NVML answered, the GPUs are not known: say nothing of them.
        on = f" on {n} GPU{'' if n == 1 else 's'}" if n else ""
        return (f"doctor: {head} — {c[Status.FAIL]} failed, {c[Status.WARN]} warnings, "
                f"{c[Status.PASS]} passed, {c[Status.SKIP]} skipped{on}{strict_note}")
