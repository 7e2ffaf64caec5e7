"""`gputui bench suite export | import`: a suite run and its results carried between
machines as one JSON file."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping

from gputui.errors import UsageError
from gputui.safe_text import printable


def run_export(args: argparse.Namespace) -> int:
    from gputui.atomic import write_atomic
    from gputui.bench import results_store, suite_record

    record = suite_record.load_path(suite_record.resolve(args.id))
    results = []
    for rid in dict.fromkeys(o.result_id for o in record.outcomes if o.result_id):
        try:
            results.append(results_store.load(rid).to_dict())
        except UsageError:
            print(f"gputui: warning: result {printable(rid)} is not in this data dir; "
                  "exported without it", file=sys.stderr)
    text = json.dumps({"kind": suite_record.EXPORT_KIND, "suite": record.to_dict(),
                       "results": results}, indent=2, allow_nan=False) + "\n"
    if args.output is not None:
        write_atomic(args.output, text)
    else:
        sys.stdout.write(text)
    return 0


def run_import(args: argparse.Namespace) -> int:
    from gputui.bench import results_store, suite_record
    from gputui.bench.result import DamagedResult, Result

    doc = suite_record.read_json(args.file)
    if not isinstance(doc, Mapping) or doc.get("kind") not in (
            suite_record.EXPORT_KIND, suite_record.RECORD_KIND):
        raise UsageError(f"{printable(args.file)} is not a gputui suite export")
    record = suite_record.load_path(args.file)
    raw = doc.get("results", []) if doc.get("kind") == suite_record.EXPORT_KIND else []
    try:
        results = [Result.from_dict(r) for r in (raw if isinstance(raw, list) else [])]
    except DamagedResult as exc:
        raise UsageError(f"{printable(args.file)}: a result in it is damaged ({exc})") \
            from None
    target = suite_record.suites_dir() / f"{record.id}.json"
    if target.exists():
        raise UsageError(f"suite {record.id} is already in {printable(target.parent)}; "
                         "nothing imported")
    added = 0
    for r in results:
        if not (results_store.results_dir() / f"{r.id}.json").exists():
            results_store.save(r)
            added += 1
    suite_record.save(record)
    print(f"imported suite {record.id} ({printable(record.device_name or record.device)}, "
          f"{record.device_class}) with {added} result(s)")
    return 0
