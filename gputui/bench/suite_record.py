"""A suite run's record: what each test measured, linked to its benchmark result, and the
scores it got; stored as one JSON file under <data dir>/suites/.

A record stands alone: each test keeps its figure, unit and settings, so a record carried to
another machine (`bench suite export` / `import`) or shipped as a reference still scores
and compares without its results. The results themselves (one per suite run, see
bench.suite) stay in the results store and are named by id. Torch-free.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gputui.atomic import write_atomic
from gputui.bench import record_json as rj
from gputui.bench import results_store
from gputui.bench.result import Result
from gputui.bench.suite import CLASSES, TESTS_BY_ID, SuiteTest
from gputui.bench.suite_score import Scores, SuiteReference
from gputui.bench.throttle_window import THROTTLED_FLAG_FRACTION
from gputui.errors import GputuiError, UsageError
from gputui.safe_text import printable

RECORD_KIND = "gputui-suite"
STATUSES = ("ok", "incomplete", "cancelled")


class NotASuite(ValueError):
    """A document that is not a suite record (one line: which field, or what it is)."""


@dataclass(frozen=True)
class TestOutcome:
    """One test of a suite run: its figure (None when its run failed) and where it came
    from."""

    test: str  # SuiteTest.id
    value: float | None
    unit: str
    status: str  # the benchmark result's: ok, failed, cancelled
    result_id: str | None = None
    # The suite's request for the run (device, model, sizes, bounds, params): the class's
    # fixed settings. Everything the worker added is in the linked result's settings.
    settings: Mapping[str, Any] = field(default_factory=dict)
    # Share of the timed window the GPU throttled (None: not sampled, e.g. a CPU run).
    throttled_fraction: float | None = None
    error: str | None = None

    __test__ = False  # pytest: not a test class despite the name

    @property
    def throttled(self) -> bool:
        f = self.throttled_fraction
        return f is not None and f > THROTTLED_FLAG_FRACTION

    def to_dict(self) -> dict[str, Any]:
        return {"test": self.test, "value": self.value, "unit": self.unit,
                "status": self.status, "result_id": self.result_id,
                "settings": dict(self.settings),
                "throttled_fraction": self.throttled_fraction, "error": self.error}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> TestOutcome:
        return cls(test=rj.text(d.get("test")), value=rj.opt_num(d.get("value")),
                   unit=rj.text(d.get("unit")), status=rj.text(d.get("status")),
                   result_id=rj.opt_text(d.get("result_id")),
                   settings=dict(rj.obj(d.get("settings", {}))),
                   throttled_fraction=rj.opt_num(d.get("throttled_fraction")),
                   error=rj.opt_text(d.get("error")))


@dataclass(frozen=True)
class SuiteState:
    """The GPU's state over the suite's timed windows, from its results' windows."""

    seconds: float  # timed seconds sampled
    throttled_fraction: float | None  # weighted by each window's seconds
    throttle_reasons: tuple[str, ...]
    temp_c_max: float | None
    clock_sm_mhz_min: float | None
    power_w_max: float | None

    @property
    def throttled(self) -> bool:
        f = self.throttled_fraction
        return f is not None and f > THROTTLED_FLAG_FRACTION

    def to_dict(self) -> dict[str, Any]:
        return {"seconds": self.seconds, "throttled_fraction": self.throttled_fraction,
                "throttled": self.throttled, "throttle_reasons": list(self.throttle_reasons),
                "temp_c_max": self.temp_c_max, "clock_sm_mhz_min": self.clock_sm_mhz_min,
                "power_w_max": self.power_w_max}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> SuiteState:
        return cls(seconds=rj.num(d.get("seconds")),
                   throttled_fraction=rj.opt_num(d.get("throttled_fraction")),
                   throttle_reasons=rj.seq(d.get("throttle_reasons", []), rj.text),
                   temp_c_max=rj.opt_num(d.get("temp_c_max")),
                   clock_sm_mhz_min=rj.opt_num(d.get("clock_sm_mhz_min")),
                   power_w_max=rj.opt_num(d.get("power_w_max")))

    @classmethod
    def of(cls, results: Iterable[Result]) -> SuiteState | None:
        """None when no result had a sampled window (a CPU run: there is no GPU)."""
        windows = [r.window for r in results if r.window is not None]
        if not windows:
            return None
        seconds = sum(w.seconds for w in windows)
        weighted = [(w.throttled_fraction, w.seconds) for w in windows
                    if w.throttled_fraction is not None]
        span = sum(s for _, s in weighted)
        frac = (sum(f * s for f, s in weighted) / span if span > 0
                else max((f for f, _ in weighted), default=None))
        reasons = sorted({r for w in windows for r in w.throttle_reasons})

        def extreme(values: list[float | None], pick: Any) -> float | None:
            got = [v for v in values if v is not None]
            return pick(got) if got else None

        return cls(seconds=seconds, throttled_fraction=frac, throttle_reasons=tuple(reasons),
                   temp_c_max=extreme([w.temp_c_max for w in windows], max),
                   clock_sm_mhz_min=extreme([w.clock_sm_mhz_min for w in windows], min),
                   power_w_max=extreme([w.power_w_max for w in windows], max))


@dataclass(frozen=True)
class SuiteRecord:
    id: str
    suite_version: int
    device_class: str  # bench.suite.CLASSES
    device: str  # cpu, cuda:0
    device_name: str | None
    status: str  # ok (every test has a figure), incomplete, cancelled
    started_at: str | None
    finished_at: str | None
    wall_s: float | None  # the whole suite, worker starts included
    outcomes: tuple[TestOutcome, ...]
    # Against the reference of the run (the class's shipped one, or --baseline); None when
    # there was none (the CUDA class ships no reference figures).
    scores: Scores | None = None
    state: SuiteState | None = None

    @property
    def throttled(self) -> bool:
        return self.state is not None and self.state.throttled

    def outcome(self, test_id: str) -> TestOutcome | None:
        return next((o for o in self.outcomes if o.test == test_id), None)

    def figures(self) -> dict[str, float | None]:
        return {o.test: o.value for o in self.outcomes}

    def to_dict(self) -> dict[str, Any]:
        return {"kind": RECORD_KIND, "suite_version": self.suite_version, "id": self.id,
                "device_class": self.device_class, "device": self.device,
                "device_name": self.device_name, "status": self.status,
                "started_at": self.started_at, "finished_at": self.finished_at,
                "wall_s": self.wall_s,
                "tests": [o.to_dict() for o in self.outcomes],
                "scores": self.scores.to_dict() if self.scores is not None else None,
                "state": self.state.to_dict() if self.state is not None else None}

    @classmethod
    def from_dict(cls, d: Any) -> SuiteRecord:
        """NotASuite (one line) for anything that is not a suite record."""
        if not isinstance(d, Mapping) or d.get("kind") != RECORD_KIND:
            raise NotASuite("not a gputui suite record")
        key = "?"
        try:
            key = "suite_version"
            version = rj.whole(d.get("suite_version"))
            key = "device_class"
            cls_name = rj.text(d.get("device_class"))
            if cls_name not in CLASSES:
                raise NotASuite(f"unknown device class {cls_name!r}")
            key = "status"
            status = rj.text(d.get("status"))
            if status not in STATUSES:
                raise NotASuite(f"status {status!r} is not one of {', '.join(STATUSES)}")
            key = "tests"
            outcomes = rj.seq(d.get("tests"), lambda t: TestOutcome.from_dict(rj.obj(t)))
            key = "scores"
            scores = (Scores.from_dict(rj.obj(d["scores"]))
                      if d.get("scores") is not None else None)
            key = "state"
            state = (SuiteState.from_dict(rj.obj(d["state"]))
                     if d.get("state") is not None else None)
            key = "id"
            return cls(id=rj.text(d.get("id")), suite_version=version,
                       device_class=cls_name, device=rj.text(d.get("device")),
                       device_name=rj.opt_text(d.get("device_name")), status=status,
                       started_at=rj.opt_text(d.get("started_at")),
                       finished_at=rj.opt_text(d.get("finished_at")),
                       wall_s=rj.opt_num(d.get("wall_s")), outcomes=outcomes,
                       scores=scores, state=state)
        except (rj.BadValue, TypeError, KeyError):
            raise NotASuite(f"field {key} has the wrong type") from None


def figure_of(result: Result, test: SuiteTest) -> float | None:
    """The figure a test reads from its run's result; None when the run did not give it."""
    if result.status != "ok":
        return None
    if test.metric == "prefill":
        return result.llm.prefill_tokens_per_s if result.llm is not None else None
    if test.metric == "decode":
        return result.llm.decode_tokens_per_s if result.llm is not None else None
    if test.metric == "forward":
        # attention: the best forward-only point (its headline is the best fwd+bwd one).
        fwd = [p.throughput for p in result.points
               if p.ok and p.throughput is not None and p.label.endswith(" fwd")]
        return max(fwd) if fwd else None
    return result.headline



def outcome_of(test: SuiteTest, result: Result, settings: Mapping[str, Any]) -> TestOutcome:
    """`settings`: the suite's request for the run (the result has what the worker added)."""
    w = result.window
    return TestOutcome(
        test=test.id, value=figure_of(result, test), unit=test.unit or result.unit,
        status=result.status, result_id=result.id, settings=dict(settings),
        throttled_fraction=w.throttled_fraction if w is not None else None,
        error=result.error.message if result.error is not None else None)


# --------------------------------------------------------------------------- storage


def suites_dir() -> Path:
    return results_store.data_dir() / "suites"


def dumps(record: SuiteRecord) -> str:
    return json.dumps(record.to_dict(), indent=2, allow_nan=False) + "\n"


def save(record: SuiteRecord, directory: Path | None = None) -> Path:
    path = (directory or suites_dir()) / f"{record.id}.json"
    write_atomic(path, dumps(record))
    return path


def read_json(path: Path, what: str = "suite file") -> Any:
    """A JSON document from a file the user named; UsageError (one line) when it is not."""
    where = printable(path)
    try:
        data = Path(path).read_bytes()
    except FileNotFoundError:
        raise UsageError(f"no such {what}: {where}") from None
    except IsADirectoryError:
        raise UsageError(f"{where} is a directory, not a {what}") from None
    except OSError as exc:
        raise GputuiError(f"cannot read {where}: {exc.strerror or exc}") from None
    try:
        return json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        raise UsageError(f"{where} is not a gputui suite record (not JSON)") from None


EXPORT_KIND = "gputui-suite-export"


def load_path(path: Path) -> SuiteRecord:
    """A suite record from its file, or from an export bundle (`bench suite export`)."""
    doc = read_json(path)
    if isinstance(doc, Mapping) and doc.get("kind") == EXPORT_KIND:
        doc = doc.get("suite")
    try:
        return SuiteRecord.from_dict(doc)
    except NotASuite as exc:
        raise UsageError(f"{printable(path)} is not a gputui suite record ({exc})") from None


def resolve(ref: str, directory: Path | None = None) -> Path:
    """A suite id, a unique prefix of one, or a path to a suite file."""
    directory = directory or suites_dir()
    if ref and all(c.isalnum() or c in "-_." for c in ref) and not ref.startswith("."):
        exact = directory / f"{ref}.json"
        if exact.is_file():
            return exact
        matches = sorted(directory.glob(f"{ref}*.json")) if directory.is_dir() else []
        if len(matches) == 1:
            return matches[0]
        if len(matches) > 1:
            raise UsageError(f"suite id {ref!r} is ambiguous ({len(matches)} matches); "
                             "give more characters")
    candidate = Path(ref).expanduser()
    if candidate.suffix == ".json" and candidate.exists():
        return candidate
    raise UsageError(f"no suite run with id {printable(ref)!r} (see 'gputui bench suite "
                     "list')")


def load(ref: str) -> SuiteRecord:
    return load_path(resolve(ref))


def history(directory: Path | None = None) -> tuple[list[SuiteRecord], list[str]]:
    """Every readable suite record, oldest first, and one warning per unreadable file."""
    directory = directory or suites_dir()
    records: list[SuiteRecord] = []
    warnings: list[str] = []
    if not directory.is_dir():
        return records, warnings
    for path in sorted(directory.glob("*.json")):
        if path.name.startswith("."):
            continue
        try:
            records.append(load_path(path))
        except GputuiError as exc:
            warnings.append(f"skipped {exc}")
    records.sort(key=lambda r: (r.started_at or "", r.id))
    return records, warnings


def newest() -> SuiteRecord:
    records, _ = history()
    if not records:
        raise UsageError("no saved suite runs (run one: gputui bench suite run --quick)")
    return records[-1]


def known_tests(record: SuiteRecord) -> list[tuple[SuiteTest | None, TestOutcome]]:
    """Each outcome with its test definition (None for a test this gputui does not know:
    a record of another suite version)."""
    return [(TESTS_BY_ID.get(o.test), o) for o in record.outcomes]


def as_reference(record: SuiteRecord) -> SuiteReference:
    """A saved suite run as the reference others are scored against (--baseline)."""
    return SuiteReference(
        device=record.device_name or record.device, device_class=record.device_class,
        suite_version=record.suite_version, source=f"suite run {record.id}",
        figures={o.test: o.value for o in record.outcomes if o.value is not None})
