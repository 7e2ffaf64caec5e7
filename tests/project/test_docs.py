"""The documentation says what the code does: the README's commands are the ones CI runs,
its picture is the monitor as the snapshot test renders it, links resolve, the documented
CSV columns are the real ones, and no doc talks in issue numbers."""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import pytest

from gputui.commands.watch import CSV_COLUMNS

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
PICTURE = DOCS / "img" / "monitor.svg"
PICTURE_SOURCE = ROOT / "tests" / "ui" / "snapshots" / "main_dark_120x40.svg"
CI_MARKER = "# --- the README's test command, verbatim ---"


def _doc_files() -> list[Path]:
    return [README, ROOT / "CHANGELOG.md", *sorted(DOCS.glob("*.md"))]


def _sh_blocks(text: str) -> list[str]:
    return [b.strip() for b in re.findall(r"```sh\n(.*?)```", text, flags=re.S)]


def test_the_readme_is_an_overview() -> None:
    assert len(README.read_text(encoding="utf-8").splitlines()) <= 200


def test_ci_runs_the_readme_test_command_verbatim() -> None:
    blocks = _sh_blocks(README.read_text(encoding="utf-8"))
    assert "python3 -m venv .venv && .venv/bin/pip install . && .venv/bin/gputui" in blocks
    test_cmd = [b for b in blocks if "pytest" in b]
    assert len(test_cmd) == 1
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    assert ci[ci.index(CI_MARKER) + 1] == test_cmd[0]


def test_the_readme_picture_is_the_rendered_monitor() -> None:
    if os.environ.get("GPUTUI_UPDATE_SNAPSHOTS") == "1":
        shutil.copyfile(PICTURE_SOURCE, PICTURE)
    assert PICTURE.read_bytes() == PICTURE_SOURCE.read_bytes(), (
        f"{PICTURE} differs from {PICTURE_SOURCE.name}: rerun with GPUTUI_UPDATE_SNAPSHOTS=1")
    assert "docs/img/monitor.svg" in README.read_text(encoding="utf-8")


@pytest.mark.parametrize("doc", _doc_files(), ids=lambda p: p.name)
def test_relative_links_resolve(doc: Path) -> None:
    text = doc.read_text(encoding="utf-8")
    broken = []
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        if re.match(r"[a-z]+:", target):
            continue
        path, _, anchor = target.partition("#")
        dest = (doc.parent / path).resolve() if path else doc
        if not dest.exists():
            broken.append(target)
        elif anchor and dest.suffix == ".md" and anchor not in _anchors(dest):
            broken.append(target)
    assert broken == []


def _anchors(md: Path) -> set[str]:
    """GitHub's heading anchors: lower case, punctuation dropped, spaces to hyphens."""
    out = set()
    for line in md.read_text(encoding="utf-8").splitlines():
        if line.startswith("#"):
            title = line.lstrip("#").strip().lower()
            out.add(re.sub(r"[^\w\- ]", "", title).replace(" ", "-"))
    return out


def test_the_documented_watch_columns_are_the_real_ones() -> None:
    text = (DOCS / "json-schema.md").read_text(encoding="utf-8")
    block = text.split("The CSV columns are stable", 1)[1].split("```")[1]
    assert [c.strip() for c in block.replace("\n", " ").split(",")] == CSV_COLUMNS


@pytest.mark.parametrize("doc", _doc_files(), ids=lambda p: p.name)
def test_no_issue_numbers_or_session_talk(doc: Path) -> None:
    text = doc.read_text(encoding="utf-8")
    assert re.findall(r"(?<![\w&])#\d+\b|\b[Ss]ession \d", text) == []
