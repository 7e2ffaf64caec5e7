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

# The worker side of bench/: the only modules that may import torch. Everything else in
# gputui/ is parent side (CLI, runner, queue, TUI) and must load without torch.
BENCH_WORKER_SIDE = {"worker.py", "pipe.py", "cancel.py", "failures.py", "environment.py",
                     "context.py", "measure.py", "timing.py", "workloads.py", "energy.py",
                     "memory.py", "distributed.py", "profiling.py", "gpu_window.py",
                     "lm_models.py"}
BENCH_WORKER_DIRS = {"kinds"}


def _worker_side(rel: Path) -> bool:
    return rel.parts[0] == "bench" and (rel.name in BENCH_WORKER_SIDE
                                        or rel.parts[1] in BENCH_WORKER_DIRS)


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


def _in_nvml_package(rel: Path) -> bool:
    return rel.parts[:2] == ("telemetry", "nvml")


def test_pynvml_only_in_nvml_package() -> None:
    nvml_modules = [p for p in _sources() if _in_nvml_package(p.relative_to(PKG))]
    assert nvml_modules, "gputui/telemetry/nvml/ is where NVML is read: it cannot be empty"
    offenders = [p for p in _sources() if "pynvml" in _imports(p)
                 and not _in_nvml_package(p.relative_to(PKG))]
    assert offenders == []


def test_torch_only_on_the_worker_side_of_bench() -> None:
    offenders = []
    for p in _sources():
        rel = p.relative_to(PKG)
        uses = _imports(p) & {"torch", "torchvision"}
        if not uses:
            continue
        if not _worker_side(rel):
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


PARENT_PROBE = """
import importlib, json, sys
bad = {"torch", "torchvision", "pynvml"}
culprits = {}
for name in MODULES:
    before = bad & set(sys.modules)
    importlib.import_module(name)
    for lib in (bad & set(sys.modules)) - before:
        culprits[lib] = name
print(json.dumps({"imported": len(MODULES), "culprits": culprits}))
"""


def _parent_side_modules() -> list[str]:
    names = []
    for p in _sources():
        rel = p.relative_to(PKG)
        if _worker_side(rel) or _in_nvml_package(rel) or rel.as_posix() == "__main__.py":
            continue
        parts = [*rel.parts[:-1], rel.stem] if rel.stem != "__init__" else [*rel.parts[:-1]]
        names.append(".".join(["gputui", *parts]))
    return names


def test_every_parent_side_module_loads_without_torch_or_pynvml() -> None:
    """Import every parent-side module in a fresh interpreter: none may pull in torch,
    torchvision, or pynvml (only the telemetry/nvml/ package may, and nothing imports it eagerly).
    The first module whose import loads one is named."""
    modules = _parent_side_modules()
    assert "gputui.ui.bench_session" in modules and "gputui.bench.run_queue" in modules
    code = f"MODULES = {modules!r}\n" + PARENT_PROBE
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    assert report["imported"] == len(modules)
    assert report["culprits"] == {}
