"""Suite scores: each test's figure ÷ the reference's figure for it × 1000, and three
geometric means of those (inference, training, every test = the device score).

A reference is a set of figures for one device of one class and suite version: shipped
with gputui (bench.suite_refs) or any saved suite run (`--baseline ID|FILE`). Scores are
computed here only, so the CLI, JSON and ranking show one number. A geometric mean over a
group with a test missing is None: a mean over fewer tests is another measure. Torch-free.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from gputui.bench import record_json as rj
from gputui.bench.suite import SUITE_VERSION, TESTS, Group
from gputui.errors import UsageError

SCALE = 1000.0


@dataclass(frozen=True)
class SuiteReference:
    """Figures to score against: test id → throughput in the test's unit."""

    device: str  # the device the figures were measured on, as its owner names it
    device_class: str
    suite_version: int
    source: str  # where the figures came from (how measured, or which suite run), short
    figures: Mapping[str, float]
    note: str = ""  # the details of how they were measured (docs, `bench suite show`)

    def label(self) -> dict[str, Any]:
        """What a score keeps of its reference (the figures stay with the reference)."""
        return {"device": self.device, "device_class": self.device_class,
                "suite_version": self.suite_version, "source": self.source}


@dataclass(frozen=True)
class Scores:
    reference: Mapping[str, Any]  # SuiteReference.label()
    tests: Mapping[str, float | None]  # test id → score
    inference: float | None
    training: float | None
    device: float | None

    def to_dict(self) -> dict[str, Any]:
        return {"reference": dict(self.reference), "tests": dict(self.tests),
                "inference": self.inference, "training": self.training,
                "device": self.device}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Scores:
        return cls(reference=dict(rj.obj(d.get("reference"))),
                   tests=rj.table(d.get("tests"), rj.opt_num),
                   inference=rj.opt_num(d.get("inference")),
                   training=rj.opt_num(d.get("training")),
                   device=rj.opt_num(d.get("device")))


def geomean(values: list[float | None]) -> float | None:
    """The geometric mean; None when a value is missing (or not positive) or none given."""
    if not values or any(v is None or v <= 0 for v in values):
        return None
    return math.exp(sum(math.log(v) for v in values if v is not None) / len(values))


def check_same_suite(what: str, version: int, device_class: str,
                     other: str, other_version: int, other_class: str) -> None:
    """UsageError (one line) unless both are the same suite version and device class: their
    tests ran at different settings, and a ratio of them would mean nothing."""
    if version != other_version:
        raise UsageError(f"{what} is suite version {version} and {other} version "
                         f"{other_version}: different tests, not compared")
    if device_class != other_class:
        raise UsageError(f"{what} is the {device_class} class and {other} the {other_class} "
                         "class: different settings, not compared")


def score(figures: Mapping[str, float | None], version: int, device_class: str,
          ref: SuiteReference) -> Scores:
    """Scores of `figures` (one suite run's) against `ref` (same version and class)."""
    check_same_suite("the run", version, device_class, f"the reference ({ref.device})",
                     ref.suite_version, ref.device_class)
    if version != SUITE_VERSION:
        raise UsageError(f"the run is suite version {version}; this gputui scores version "
                         f"{SUITE_VERSION}")
    tests: dict[str, float | None] = {}
    for t in TESTS:
        mine, theirs = figures.get(t.id), ref.figures.get(t.id)
        tests[t.id] = (mine / theirs * SCALE if mine is not None and theirs
                       else None)

    def group(g: Group | None) -> float | None:
        return geomean([tests[t.id] for t in TESTS if g is None or t.group == g])

    return Scores(reference=ref.label(), tests=tests, inference=group("inference"),
                  training=group("training"), device=group(None))


@dataclass(frozen=True)
class RankRow:
    device: str
    source: str
    device_score: float | None
    this: bool = False  # the run being shown

    def to_dict(self) -> dict[str, Any]:
        return {"device": self.device, "source": self.source,
                "device_score": self.device_score, "this": self.this}


def ranking(this: SuiteReference, ref: SuiteReference,
            others: tuple[SuiteReference, ...]) -> list[RankRow]:
    """The run (`this`, its figures as a reference) beside the reference devices of its
    class, each scored against `ref`, best first; a device without a score goes last."""
    rows = [RankRow(this.device, this.source,
                    score(this.figures, this.suite_version, this.device_class, ref).device,
                    this=True)]
    seen = {ref.source}
    rows.append(RankRow(ref.device, ref.source,
                        score(ref.figures, ref.suite_version, ref.device_class, ref).device))
    for other in others:
        if other.source in seen or other.suite_version != this.suite_version or \
                other.device_class != this.device_class:
            continue
        seen.add(other.source)
        rows.append(RankRow(other.device, other.source,
                            score(other.figures, other.suite_version, other.device_class,
                                  ref).device))
    return sorted(rows, key=lambda r: (r.device_score is None, -(r.device_score or 0.0)))
