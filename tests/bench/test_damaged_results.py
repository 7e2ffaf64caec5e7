"""Damaged and hostile result files: each one is skipped with one warning naming it, the
rest keep working, and no string from a file reaches the terminal as escapes or markup."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gputui.bench import results_store
from tests.cli import CliRunner

from .test_results import make_doc

DAMAGE = {
    "not-utf8": b'{"benchmark": "cnn-train", "model": "\xff\xfe"}',
    "settings-5": json.dumps({**make_doc("x"), "settings": 5}).encode(),
    "infinity": b'{"benchmark": "cnn-train", "throughput": {"median": Infinity}}',
    "nan": b'{"benchmark": "cnn-train", "avg_power_w": NaN}',
    "points-str": json.dumps({**make_doc("x"), "points": "many"}).encode(),
    "bad-status": json.dumps({**make_doc("x"), "status": 7}).encode(),
    "truncated": b'{"benchmark": "cnn-train", "throughput": ',
}


@pytest.fixture(autouse=True)
def data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("GPUTUI_DATA_DIR", str(tmp_path))
    return tmp_path


@pytest.fixture
def gputui(cli: CliRunner, monkeypatch: pytest.MonkeyPatch) -> CliRunner:
    """The CLI in-process, wide enough that rich's tables show whole cells."""
    monkeypatch.setenv("COLUMNS", "400")
    return cli


def save_damaged(data_dir: Path, name: str) -> Path:
    path = data_dir / "results" / f"20250101-000000-000-{name}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(DAMAGE[name])
    return path


@pytest.mark.parametrize("name", sorted(DAMAGE))
def test_every_command_survives_a_damaged_file(data_dir: Path, name: str,
                                               gputui: CliRunner) -> None:
    a = make_doc("20250102-000000-000-aaaaaa", throughput=100.0)
    b = make_doc("20250103-000000-000-bbbbbb", throughput=125.0)
    results_store.save(a)
    results_store.save(b)
    bad = save_damaged(data_dir, name)

    for argv in (["history"], ["history", "--json"], ["export"],
                 ["export", "--format", "markdown"]):
        proc = gputui("bench", *argv)
        assert proc.returncode == 0, (argv, proc.stderr)
        assert "Traceback" not in proc.stderr
        warnings = [ln for ln in proc.stderr.splitlines() if ln.startswith("gputui: warning")]
        assert len(warnings) == 1 and str(bad) in warnings[0], proc.stderr
        assert a["id"] in proc.stdout and b["id"] in proc.stdout
    proc = gputui("bench", "history", "--json")
    assert [r["id"] for r in json.loads(proc.stdout)] == [a["id"], b["id"]]

    for argv in (["show", b["id"]], ["show", b["id"], "--json"],
                 ["compare", a["id"], b["id"]], ["compare", a["id"], b["id"], "--json"]):
        proc = gputui("bench", *argv)
        assert proc.returncode == 0, (argv, proc.stderr)
        assert proc.stderr == ""

    bad_id = bad.stem
    for argv in (["show", bad_id], ["show", bad_id, "--json"], ["compare", a["id"], bad_id],
                 ["compare", bad_id, b["id"], "--json"]):
        proc = gputui("bench", *argv)
        assert proc.returncode == 1, (argv, proc.stderr)
        assert proc.stderr.count("\n") == 1 and proc.stderr.startswith("gputui: ")
        assert str(bad) in proc.stderr and "Traceback" not in proc.stderr
        assert proc.stdout == ""


def test_old_schema_1_files_load_with_their_headline(data_dir: Path, gputui: CliRunner) -> None:
    doc = make_doc("20250101-000000-000-schema", throughput=80.0)
    doc.pop("schema", None)
    doc["throughput"] = {"median": 75.0, "mean": 80.0, "p10": 70.0, "p90": 85.0,
                         "unit": "images/s"}
    path = data_dir / "results" / "20250101-000000-000-schema.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(doc))
    loaded = results_store.load("20250101-000000-000-schema")
    assert loaded.throughput is not None
    assert loaded.throughput.value == 80.0  # schema 1's mean was samples ÷ timed seconds
    assert loaded.throughput.median == 75.0
    proc = gputui("bench", "show", "20250101-000000-000-schema", "--json")
    shown = json.loads(proc.stdout)
    assert shown["schema"] == 2 and shown["throughput"]["value"] == 80.0
    assert shown["throughput"]["mean"] == 80.0  # the schema-1 name stays
    proc = gputui("bench", "show", "20250101-000000-000-schema")
    assert proc.returncode == 0 and "80.00 images/s" in proc.stdout


HOSTILE = "\x1b]0;pwned\x07\x1b[2J[link=file:///etc/passwd]click[/link][bold]X"


def test_hostile_strings_are_shown_escaped_never_as_markup(data_dir: Path,
                                                           gputui: CliRunner) -> None:
    a = make_doc("20250102-000000-000-aaaaaa", model=HOSTILE, device_name=HOSTILE,
                 settings={"note": HOSTILE}, error={"kind": "crash", "message": HOSTILE})
    b = make_doc("20250103-000000-000-bbbbbb")
    results_store.save(a)
    results_store.save(b)
    for argv in (["show", a["id"]], ["history"], ["compare", a["id"], b["id"]],
                 ["export", "--format", "markdown"]):
        proc = gputui("bench", *argv)
        assert proc.returncode == 0, (argv, proc.stderr)
        assert "\x1b" not in proc.stdout and "\x07" not in proc.stdout
        assert "\\x1b" in proc.stdout  # shown, as a visible escape
    proc = gputui("bench", "show", a["id"])
    flat = "".join(proc.stdout.split())
    # The markup is text: the brackets are there to read, not turned into a link.
    assert "[link=file:///etc/passwd]click[/link]" in flat
