"""DESIGN.md's import rules: pynvml only in the NVML module, torch only on the worker side of
bench/, textual only in ui/, and the monitor never pays for torch."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parents[2] / "gputui"

# Modules of bench/ that the parent process (CLI, runner, TUI) imports: torch-free.
BENCH_PARENT_SIDE = {"catalog.py", "events.py", "runner.py", "results.py", "__init__.py"}


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module.split(".")[0])
    return names


def _sources() -> list[Path]:
    return sorted(PKG.rglob("*.py"))


def test_pynvml_only_in_nvml_module() -> None:
    offenders = [p for p in _sources() if "pynvml" in _imports(p)
                 and p.relative_to(PKG).as_posix() != "telemetry/nvml.py"]
    assert offenders == []


def test_torch_only_on_the_worker_side_of_bench() -> None:
    offenders = []
    for p in _sources():
        rel = p.relative_to(PKG)
        uses = _imports(p) & {"torch", "torchvision"}
        if not uses:
            continue
        if rel.parts[0] != "bench" or rel.name in BENCH_PARENT_SIDE:
            offenders.append(rel.as_posix())
    assert offenders == []


def test_textual_only_in_ui() -> None:
    offenders = [p.relative_to(PKG).as_posix() for p in _sources()
                 if "textual" in _imports(p) and p.relative_to(PKG).parts[0] != "ui"]
    assert offenders == []


def test_telemetry_imports_neither_torch_nor_textual() -> None:
    for p in (PKG / "telemetry").rglob("*.py"):
        assert not _imports(p) & {"torch", "torchvision", "textual"}, p


PROBE = """
import sys, json, io, contextlib
from gputui.cli import main
out = io.StringIO()
with contextlib.redirect_stdout(out):
    try:
        code = main({argv!r})
    except SystemExit as e:
        code = e.code
{extra}
print(json.dumps({{"code": code, "torch": "torch" in sys.modules,
                  "textual": "textual" in sys.modules}}))
"""


def _probe(argv: list[str], extra: str = "") -> dict[str, object]:
    proc = subprocess.run([sys.executable, "-c", PROBE.format(argv=argv, extra=extra)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("argv", [["--help"], ["snapshot", "--json"], ["bench", "--help"]])
def test_cli_paths_do_not_import_torch(argv: list[str]) -> None:
    result = _probe(argv)
    assert result["torch"] is False


def test_snapshot_does_not_import_textual() -> None:
    assert _probe(["snapshot", "--json"])["textual"] is False


def test_tui_modules_do_not_import_torch() -> None:
    extra = "import gputui.ui.app, gputui.bench.runner, gputui.bench.catalog"
    assert _probe(["--version"], extra=extra)["torch"] is False
