"""The import rules of docs/architecture.md: pynvml only in the NVML package, torch only on
the worker side of bench/, textual only in ui/, and the monitor never pays for torch."""

from __future__ import annotations

import ast
import itertools
import json
import subprocess
import sys
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parents[2] / "gputui"

# The worker side of bench/ is one folder: the only place that may import torch. Everything
# else in gputui/ is parent side (CLI, runner, queue, TUI) and must load without torch.
WORKER_PACKAGE = ("bench", "worker")


def _worker_side(rel: Path) -> bool:
    return rel.parts[:2] == WORKER_PACKAGE


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


def _imported_modules(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
            names.update(f"{node.module}.{a.name}" for a in node.names)
    return names


def test_parent_side_never_imports_the_worker_package() -> None:
    """The child is started by name (`python -m gputui.bench.worker`), never imported."""
    offenders = [p.relative_to(PKG).as_posix() for p in _sources()
                 if not _worker_side(p.relative_to(PKG))
                 and any(m == "gputui.bench.worker" or m.startswith("gputui.bench.worker.")
                         for m in _imported_modules(p))]
    assert offenders == []


def _module_name(path: Path, root: Path = PKG.parent) -> str:
    rel = path.relative_to(root).with_suffix("")
    parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
    return ".".join(parts)


def _cycle(graph: dict[str, set[str]]) -> list[str]:
    """One import cycle in `graph` (module → modules it imports), or [] when there is none."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(name: str) -> list[str]:
        state[name] = 1
        path.append(name)
        for dep in sorted(graph[name]):
            if state.get(dep) == 1:
                return [*path[path.index(dep):], dep]
            if dep not in state and (found := visit(dep)):
                return found
        path.pop()
        state[name] = 2
        return []

    for name in sorted(graph):
        if name not in state and (found := visit(name)):
            return found
    return []


def _module_imports(path: Path, modules: set[str], root: Path = PKG.parent) -> dict[str, int]:
    """The modules of `modules` that `path` imports, each with the line of its first import:
    at module level, inside a function or under TYPE_CHECKING alike. `from a import b`
    imports the module a.b where there is one, else a; relative imports are resolved.
    (Importing a.b also runs a's __init__; that edge is not counted: a package that lists
    its own modules would otherwise be a cycle with each of them.)"""
    name = _module_name(path, root)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: dict[str, int] = {}
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = package.rsplit(".", node.level - 1)[0] if node.level else ""
            module = ".".join(p for p in (base, node.module or "") if p)
            targets = [f"{module}.{a.name}" if f"{module}.{a.name}" in modules else module
                       for a in node.names]
        else:
            continue
        for target in targets:
            if target in modules:
                found.setdefault(target, node.lineno)
    found.pop(name, None)
    return found


def _package_graph() -> tuple[dict[str, dict[str, int]], dict[str, Path]]:
    """Every module of gputui/ → the gputui modules it imports, each with its line."""
    paths = {_module_name(p): p for p in _sources()}
    return {name: _module_imports(path, set(paths)) for name, path in paths.items()}, paths


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The cycles of `graph`, one at a time: each one found has its closing edge taken out
    before the next search, so two cycles through one module are both listed."""
    graph = {name: set(deps) for name, deps in graph.items()}
    found = []
    while cycle := _cycle(graph):
        found.append(cycle)
        graph[cycle[-2]].discard(cycle[-1])
    return found


def test_no_import_cycle_in_the_package() -> None:
    """No cycle among all of gputui's modules. Every import counts, also one inside a
    function or under TYPE_CHECKING: a cycle hidden that way is still two modules that
    cannot be understood one without the other."""
    graph, paths = _package_graph()
    assert {"gputui.bench.catalog", "gputui.telemetry.alerts", "gputui.ui.app"} <= set(graph)
    cycles = [" → ".join(f"{a} ({paths[a].relative_to(PKG.parent)}:{graph[a][b]})"
                         for a, b in itertools.pairwise(cycle)) + f" → {cycle[-1]}"
              for cycle in _cycles({name: set(deps) for name, deps in graph.items()})]
    assert cycles == []


def _part(module: str) -> str:
    """The part of gputui a module belongs to: its top-level subpackage (gputui.telemetry,
    gputui.ui ...), or itself for a top-level module (gputui.config, gputui.cli)."""
    return ".".join(module.split(".")[:2])


def test_the_parts_of_the_package_import_one_another_one_way() -> None:
    """The layers of docs/architecture.md: a subpackage or top-level module never imports
    one that imports it back, through any of their modules (config.py reads [notify], so
    notify/ never reads config.py; commands/ start the UI, so ui/ never imports commands/)."""
    graph, _ = _package_graph()
    parts: dict[str, set[str]] = {_part(name): set() for name in graph}
    edges: dict[tuple[str, str], str] = {}
    for name, deps in graph.items():
        for dep, line in deps.items():
            if _part(dep) != _part(name):
                parts[_part(name)].add(_part(dep))
                edges.setdefault((_part(name), _part(dep)), f"{name}:{line} imports {dep}")
    assert {"gputui.commands", "gputui.config", "gputui.notify", "gputui.ui"} <= set(parts)
    cycles = [" ; ".join(edges[a, b] for a, b in itertools.pairwise(cycle))
              for cycle in _cycles(parts)]
    assert cycles == []


def test_the_cycle_finder_finds_a_cycle() -> None:
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) == []
    assert _cycles({"a": {"b", "c"}, "b": {"a"}, "c": {"a"}}) == [["a", "b", "a"],
                                                                  ["a", "c", "a"]]


def test_the_import_graph_counts_every_kind_of_import(tmp_path: Path) -> None:
    """Function-level, TYPE_CHECKING, relative and `from package import module` imports
    are all edges of the graph the cycle tests search."""
    pkg = tmp_path / "gputui" / "x"
    pkg.mkdir(parents=True)
    source = pkg / "a.py"
    source.write_text("from typing import TYPE_CHECKING\n"
                      "if TYPE_CHECKING:\n    from gputui.x.b import B\n"
                      "def f():\n    from . import c\n"
                      "from gputui.x import d\n"
                      "import gputui.x.e\n"
                      "from gputui.x import a\n")
    modules = {f"gputui.x.{m}" for m in "abcde"} | {"gputui.x"}
    found = _module_imports(source, modules, root=tmp_path)
    assert found == {"gputui.x.b": 3, "gputui.x.c": 5, "gputui.x.d": 6, "gputui.x.e": 7}


def test_no_module_imports_a_private_name_of_another() -> None:
    """What one module keeps private (`_name`) no other imports: a rule two modules share
    is public where it belongs."""
    offenders = [f"{p.relative_to(PKG).as_posix()}:{node.lineno} {a.name}"
                 for p in _sources() for node in ast.walk(ast.parse(p.read_text("utf-8")))
                 if isinstance(node, ast.ImportFrom) and (node.level or
                                                          (node.module or "").startswith("gputui"))
                 for a in node.names if a.name.startswith("_") and not a.name.startswith("__")]
    assert offenders == []


def test_track_imports_only_the_standard_library() -> None:
    """gputui.track runs inside the user's training job: the standard library only, and
    platformdirs inside the function that first needs it (not at import)."""
    tree = ast.parse((PKG / "track.py").read_text(encoding="utf-8"))
    top_level = {node for node in tree.body if isinstance(node, ast.Import | ast.ImportFrom)}
    imported = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported += [(a.name.split(".")[0], node in top_level) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.module != "__future__":
            imported.append((node.module.split(".")[0], node in top_level))
    assert ("platformdirs", False) in imported and ("os", True) in imported
    others = [(name, at_top) for name, at_top in imported
              if name not in sys.stdlib_module_names and name != "platformdirs"]
    assert others == [] and ("platformdirs", True) not in imported


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
from gputui.cli import COMMANDS
print(json.dumps({{"code": code, "torch": "torch" in sys.modules,
                  "textual": "textual" in sys.modules,
                  "commands": sorted(c for c in COMMANDS
                                     if f"gputui.commands.{{c}}" in sys.modules)}}))
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
    # Only the subcommand named on the command line has its module imported.
    assert result["commands"] == [a for a in argv if not a.startswith("-")]


HEAVY_PROBE = """
import json, sys
from gputui.cli import COMMANDS, build_parser
build_parser(list(COMMANDS))  # every subcommand's module, with its arguments
print(json.dumps({"commands": sorted(c for c in COMMANDS if f"gputui.commands.{c}" in sys.modules),
                  "heavy": sorted(m for m in HEAVY if m in sys.modules)}))
"""


def test_the_command_line_imports_nothing_heavy_at_module_level() -> None:
    """cli.py and every subcommand's module, parsers built: the heavy libraries load in a
    command's `run`, never for `--help` or a parse."""
    heavy = ("torch", "textual", "pynvml", "psutil", "prometheus_client", "rich",
             "platformdirs")
    proc = subprocess.run([sys.executable, "-c", f"HEAVY = {heavy!r}\n" + HEAVY_PROBE],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    loaded = json.loads(proc.stdout.strip().splitlines()[-1])
    assert len(loaded["commands"]) >= 7
    assert loaded["heavy"] == []


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


MONITOR_PROBE = """
import json, sys
from gputui.cli import build_parser
build_parser([]).parse_args([])
import gputui.commands.tui, gputui.config, gputui.ui.app, gputui.telemetry.sampler_opener
import gputui.telemetry.nvml
print(json.dumps(sorted(sys.modules)))
"""


def test_the_monitor_does_not_import_what_its_first_frame_does_not_need() -> None:
    # Every module is start-up time before the first frame: the other commands, recordings,
    # the doctor's health reads, the notification sinks and the compact rows (most
    # terminals show panels) load when they are used.
    proc = subprocess.run([sys.executable, "-c", MONITOR_PROBE], capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    loaded = set(json.loads(proc.stdout.strip().splitlines()[-1]))
    assert {"gputui.ui.app", "gputui.telemetry.nvml.source"} <= loaded  # the monitor's own
    unneeded = {f"gputui.commands.{c}" for c in
                ("snapshot", "watch", "replay", "bench", "export", "fleet", "doctor")}
    unneeded |= {"gputui.telemetry.record", "gputui.telemetry.recording_index",
                 "gputui.telemetry.schema", "gputui.telemetry.health",
                 "gputui.telemetry.nvml.health_reads", "gputui.notify.sinks",
                 "gputui.notify.events", "gputui.ui.widgets.gpu_row"}
    assert sorted(loaded & unneeded) == []
