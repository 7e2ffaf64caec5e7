"""`gputui bench suite show | compare | list`: how a suite run reads (bench.suite_record),
its scores against a reference (bench.suite_score) and the ranking."""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING, Any

from gputui.errors import GputuiError
from gputui.safe_text import no_markup, printable

if TYPE_CHECKING:
    from rich.console import Console

    from gputui.bench.suite_record import SuiteRecord, TestOutcome
    from gputui.bench.suite_score import RankRow, Scores, SuiteReference


def _console() -> Console:
    from rich.console import Console

    return Console(highlight=False)


# --------------------------------------------------------------------------- references


def _baseline(ref: str) -> SuiteReference:
    from gputui.bench import suite_record

    return suite_record.as_reference(suite_record.load(ref))


def reference_for(record_class: str, version: int,
                  baseline: str | None) -> SuiteReference | None:
    """--baseline's run, else the class's shipped reference, else None."""
    from gputui.bench import suite_refs

    if baseline is not None:
        return _baseline(baseline)
    return suite_refs.default_for(record_class, version)


def _scores(record: SuiteRecord, baseline: str | None) -> tuple[Scores | None,
                                                                 SuiteReference | None]:
    """The scores to show: against --baseline when given, else those the run recorded;
    and the reference they are against (None when it is not at hand)."""
    from gputui.bench import suite_refs
    from gputui.bench.suite_score import score

    if baseline is not None:
        ref = _baseline(baseline)
        return score(record.figures(), record.suite_version, record.device_class, ref), ref
    if record.scores is not None:
        ref = suite_refs.by_label(record.scores.reference)
        if ref is None:
            ref = _stored_run_reference(record.scores.reference.get("source"))
        return record.scores, ref
    ref = suite_refs.default_for(record.device_class, record.suite_version)
    if ref is None:
        return None, None
    return score(record.figures(), record.suite_version, record.device_class, ref), ref


def _stored_run_reference(source: object) -> SuiteReference | None:
    """The saved run a record was scored against ("suite run ID"), if still here."""
    if not isinstance(source, str) or not source.startswith("suite run "):
        return None
    try:
        return _baseline(source.removeprefix("suite run "))
    except GputuiError:
        return None


def ranking_rows(record: SuiteRecord, ref: SuiteReference | None) -> list[RankRow]:
    from gputui.bench import suite_record, suite_refs
    from gputui.bench.suite_score import RankRow, ranking

    this = suite_record.as_reference(record)
    if ref is None:
        return [RankRow(this.device, this.source, None, this=True)]
    rows = ranking(this, ref, suite_refs.SHIPPED)
    return [RankRow(r.device, "this run", r.device_score, True) if r.this else r
            for r in rows]


# --------------------------------------------------------------------------- show


def title(test_id: str) -> str:
    from gputui.bench.suite import TESTS_BY_ID

    t = TESTS_BY_ID.get(test_id)
    return t.title if t is not None else test_id


def value_text(o: TestOutcome) -> str:
    from gputui.bench.fmt import fmt_num

    if o.value is None:
        return f"no figure ({o.status}{': ' + printable(o.error) if o.error else ''})"
    return f"{fmt_num(o.value)} {printable(o.unit)}"


def _fmt_score(v: float | None) -> str:
    return f"{v:,.0f}" if v is not None else "N/A"


def _throttle_mark(fraction: float | None) -> str:
    from gputui.bench.throttle_window import THROTTLED_FLAG_FRACTION, THROTTLED_MARK

    if fraction is None or fraction <= THROTTLED_FLAG_FRACTION:
        return ""
    return f"{THROTTLED_MARK} {fraction * 100:.0f} %"


def _record_json(record: SuiteRecord, scores: Scores | None,
                 ranking: list[RankRow]) -> dict[str, Any]:
    out = record.to_dict()
    out["scores"] = scores.to_dict() if scores is not None else None
    out["ranking"] = [r.to_dict() for r in ranking]
    return out


def run_show(args: argparse.Namespace) -> int:
    from gputui.bench import suite_record

    record = suite_record.load(args.id) if args.id else suite_record.newest()
    scores, ref = _scores(record, args.baseline)
    rows = ranking_rows(record, ref)
    if args.json:
        print(json.dumps(_record_json(record, scores, rows), indent=2))
        return 0
    print_record(_console(), record, scores, ref, rows)
    return 0


def print_record(console: Console, record: SuiteRecord, scores: Scores | None,
                  ref: SuiteReference | None, ranking: list[RankRow]) -> None:
    from rich.table import Table

    from gputui.bench.fmt import when
    from gputui.bench.suite_record import known_tests

    device = record.device_name or record.device
    console.print(f"[bold]suite v{record.suite_version}[/] {record.device_class} class on "
                  f"{no_markup(device)}  ({no_markup(record.id)}, "
                  f"{no_markup(when(record.started_at))}, "
                  f"{f'{record.wall_s:.0f} s' if record.wall_s is not None else 'N/A'}, "
                  f"{record.status})", soft_wrap=True)
    table = Table(title="tests")
    for name, justify in (("group", "left"), ("test", "left"), ("benchmark", "left"),
                          ("throughput", "right"), ("score", "right"), ("", "left")):
        # Figures, scores and marks are never cut; the names wrap.
        table.add_column(name, justify=justify,  # type: ignore[arg-type]
                         no_wrap=name in ("throughput", "score", ""))
    for test, o in known_tests(record):
        settings = o.settings
        bench = " ".join(str(x) for x in (settings.get("benchmark"), settings.get("model"))
                         if x)
        s = scores.tests.get(o.test) if scores is not None else None
        table.add_row(test.group if test else "?", no_markup(title(o.test)),
                      no_markup(bench), no_markup(value_text(o)), _fmt_score(s),
                      _throttle_mark(o.throttled_fraction))
    console.print(table)
    mark = f"  [red]{_throttle_mark(record.state.throttled_fraction)}[/]" \
        if record.state is not None and record.state.throttled else ""
    if scores is not None:
        console.print(f"scores: inference {_fmt_score(scores.inference)}, training "
                      f"{_fmt_score(scores.training)}, [bold]device "
                      f"{_fmt_score(scores.device)}[/]{mark}", soft_wrap=True)
        r = scores.reference
        console.print(f"[dim]against {no_markup(r.get('device'))} = 1000 "
                      f"({no_markup(r.get('source'))})[/]", soft_wrap=True)
    else:
        console.print(f"scores: N/A — gputui ships no reference figures for the "
                      f"{record.device_class} class yet; give --baseline ID|FILE (a saved "
                      "suite run of this class)", soft_wrap=True)
    console.print(f"GPU state: {_state_words(record)}", soft_wrap=True)
    if ref is not None and len(ranking) > 1:
        rank = Table(title=f"ranking ({record.device_class} class, suite "
                     f"v{record.suite_version})")
        rank.add_column("#", justify="right")
        rank.add_column("device")
        rank.add_column("device score", justify="right")
        rank.add_column("figures from")
        for i, row in enumerate(ranking, 1):
            style = "bold cyan" if row.this else ""
            rank.add_row(str(i), no_markup(row.device), _fmt_score(row.device_score),
                         no_markup(row.source), style=style)
        console.print(rank)


def _state_words(record: SuiteRecord) -> str:
    st = record.state
    if st is None:
        return ("not sampled (a CPU run)" if record.device.startswith("cpu")
                else "not sampled (no NVML readings during the timed loops)")
    parts = []
    if st.throttled_fraction is not None:
        why = f" ({', '.join(st.throttle_reasons)})" if st.throttle_reasons else ""
        parts.append(f"throttled {st.throttled_fraction * 100:.0f} % of the timed windows"
                     f"{why}" if st.throttled_fraction else "never throttled")
    if st.clock_sm_mhz_min is not None:
        parts.append(f"SM clock min {st.clock_sm_mhz_min:,.0f} MHz")
    if st.temp_c_max is not None:
        parts.append(f"max {st.temp_c_max:.0f} °C")
    if st.power_w_max is not None:
        parts.append(f"max {st.power_w_max:.0f} W")
    parts.append(f"over {st.seconds:.1f} s of timed loops")
    return ", ".join(parts)


# --------------------------------------------------------------------------- compare


def run_compare(args: argparse.Namespace) -> int:
    from rich.table import Table

    from gputui.bench import suite_record
    from gputui.bench.fmt import fmt_num, fmt_ratio
    from gputui.bench.suite_score import check_same_suite, score

    a, b = suite_record.load(args.a), suite_record.load(args.b)
    check_same_suite(f"A ({a.id})", a.suite_version, a.device_class, f"B ({b.id})",
                     b.suite_version, b.device_class)
    ref = reference_for(a.device_class, a.suite_version, args.baseline) or \
        suite_record.as_reference(a)
    sa = score(a.figures(), a.suite_version, a.device_class, ref)
    sb = score(b.figures(), b.suite_version, b.device_class, ref)
    rows = []
    for oa in a.outcomes:
        ob = b.outcome(oa.test)
        vb = ob.value if ob is not None else None
        ratio = vb / oa.value if vb is not None and oa.value else None
        rows.append({"test": oa.test, "unit": oa.unit, "a": oa.value, "b": vb,
                     "ratio": ratio, "a_score": sa.tests.get(oa.test),
                     "b_score": sb.tests.get(oa.test)})
    out = {"suite_version": a.suite_version, "device_class": a.device_class,
           "a": {"id": a.id, "device": a.device_name or a.device,
                 "scores": sa.to_dict()},
           "b": {"id": b.id, "device": b.device_name or b.device,
                 "scores": sb.to_dict()},
           "tests": rows,
           # B/A of the geometric means, the same for any reference.
           "ratio": {g: (getattr(sb, g) / getattr(sa, g)
                         if getattr(sa, g) and getattr(sb, g) else None)
                     for g in ("inference", "training", "device")}}
    if args.json:
        print(json.dumps(out, indent=2))
        return 0
    console = _console()
    table = Table(title=f"suite v{a.suite_version} {a.device_class}: "
                  f"A = {no_markup(a.id)} ({no_markup(a.device_name or a.device)})   "
                  f"B = {no_markup(b.id)} ({no_markup(b.device_name or b.device)})")
    for name in ("test", "A", "B", "B/A", "A score", "B score"):
        table.add_column(name, justify="left" if name == "test" else "right")
    for row in rows:
        table.add_row(no_markup(title(row["test"])),
                      f"{fmt_num(row['a'])} {no_markup(row['unit'])}",
                      f"{fmt_num(row['b'])} {no_markup(row['unit'])}",
                      fmt_ratio(row["ratio"]), _fmt_score(row["a_score"]),
                      _fmt_score(row["b_score"]))
    for g in ("inference", "training", "device"):
        table.add_row(f"[bold]{g} score[/]", "", "", fmt_ratio(out["ratio"][g]),
                      _fmt_score(getattr(sa, g)), _fmt_score(getattr(sb, g)))
    console.print(table)
    console.print(f"[dim]scores against {no_markup(ref.device)} = 1000 "
                  f"({no_markup(ref.source)})[/]", soft_wrap=True)
    for name, r in (("A", a), ("B", b)):
        if r.throttled and r.state is not None:
            console.print(f"[red]{name} {_throttle_mark(r.state.throttled_fraction)} of "
                          "its timed windows: its scores say as much about cooling or the "
                          "power cap[/]")
    return 0


# --------------------------------------------------------------------------- list


def run_list(args: argparse.Namespace) -> int:
    from rich.table import Table

    from gputui.bench import suite_record
    records, warnings = suite_record.history()
    for w in warnings:
        print(f"gputui: warning: {printable(w)}", file=sys.stderr)
    if args.json:
        print(json.dumps([_summary(r) for r in records], indent=2))
        return 0
    console = _console()
    if not records:
        console.print(f"no saved suite runs in {no_markup(suite_record.suites_dir())}")
        return 0
    from rich import box

    # Narrow enough for 80 columns: the id is typed back and never cut, the device name
    # wraps; inference and training scores are in `show` and --json.
    table = Table(title=f"suite runs ({no_markup(suite_record.suites_dir())})",
                  box=box.SIMPLE_HEAD)
    table.add_column("id", no_wrap=True)
    table.add_column("suite", no_wrap=True)
    table.add_column("device score", no_wrap=True, justify="right")
    table.add_column("device")
    for r in records:
        status = "" if r.status == "ok" else f" {r.status}"
        table.add_row(no_markup(r.id), f"v{r.suite_version} {r.device_class}{status}",
                      _fmt_score(r.scores.device if r.scores else None),
                      no_markup(r.device_name or r.device))
    console.print(table)
    return 0


def _summary(r: SuiteRecord) -> dict[str, Any]:
    s = r.scores
    return {"id": r.id, "started_at": r.started_at, "suite_version": r.suite_version,
            "device_class": r.device_class, "device": r.device,
            "device_name": r.device_name, "status": r.status,
            "inference": s.inference if s else None, "training": s.training if s else None,
            "device_score": s.device if s else None}


