"""The monitor's side of the hand-off rules (docs/architecture.md), by source:
the UI never imports the NVML module, and the monitor's modules never block on the
event loop with `call_from_thread` (background threads post messages instead)."""

from __future__ import annotations

import ast
from pathlib import Path

UI = Path(__file__).resolve().parents[2] / "gputui" / "ui"
# The monitor's modules (the benchmark screens are checked by their own tests).
MONITOR = [UI / "app.py", UI / "sampler_opener.py", UI / "process_signal.py", UI / "run.py",
           UI / "layout.py", UI / "messages.py", UI / "terminal_watch.py",
           UI / "screens" / "monitor.py", UI / "screens" / "alerts.py",
           *sorted((UI / "widgets").glob("*.py"))]


def _imports(path: Path) -> set[str]:
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            out.add(node.module)
    return out


def test_no_ui_module_imports_the_nvml_module() -> None:
    files = sorted(UI.rglob("*.py"))
    assert len(files) > 10
    offenders = [p.name for p in files if "gputui.telemetry.nvml" in _imports(p)]
    assert offenders == []


def test_the_monitor_never_blocks_on_the_event_loop() -> None:
    assert all(p.is_file() for p in MONITOR)
    offenders = [p.name for p in MONITOR if "call_from_thread" in p.read_text("utf-8")]
    assert offenders == []


def test_cli_and_commands_import_no_cycle() -> None:
    # The subcommands take their argparse types from commands/argtypes.py, not cli.py.
    commands = sorted((UI.parent / "commands").glob("*.py"))
    assert len(commands) > 5
    offenders = [p.name for p in commands if "gputui.cli" in _imports(p)]
    assert offenders == []


def test_only_the_adapter_touches_textual_or_rich_internals() -> None:
    """No monkeypatching, no private modules: what is not public API is in one module
    (gputui/ui/textual_adapter.py), whose version bound pyproject.toml carries."""
    offenders = []
    for path in sorted(UI.rglob("*.py")):
        if path.name == "textual_adapter.py":
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module and \
                    node.module.split(".")[0] in ("textual", "rich") and \
                    any(part.startswith("_") for part in node.module.split(".")):
                offenders.append(f"{path.name}: imports {node.module}")
            if isinstance(node, ast.Assign) and any(
                    isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name)
                    and t.value.id in ("textual", "rich") for t in node.targets):
                offenders.append(f"{path.name}: assigns into {ast.unparse(node.targets[0])}")
    assert offenders == []


def test_pyproject_bounds_textual_to_what_the_adapter_is_tested_with() -> None:
    import tomllib

    from gputui.ui.textual_adapter import TESTED_VERSIONS, supported, textual_version

    pyproject = tomllib.loads((UI.parents[1] / "pyproject.toml").read_text("utf-8"))
    (line,) = [d for d in pyproject["project"]["dependencies"] if d.startswith("textual>")]
    low, high = line.removeprefix("textual>=").split(",<")
    bounds = (tuple(int(x) for x in low.split(".")[:2]), tuple(int(x) for x in high.split(".")[:2]))
    assert all(bounds[0] <= v < bounds[1] for v in TESTED_VERSIONS), (line, TESTED_VERSIONS)
    assert supported() and textual_version() in TESTED_VERSIONS  # the installed one
