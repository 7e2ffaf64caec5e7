"""The UI's side of the hand-off rules (docs/architecture.md), by source: the UI never
imports the NVML module, reads of the sampler only what is fixed once it is made, never
blocks on the event loop with `call_from_thread` (background threads post messages
instead), and touches nothing private of Textual or Rich outside its one adapter."""

from __future__ import annotations

import ast
import functools
import importlib
import inspect
import sys
import textwrap
from pathlib import Path

import pytest

UI = Path(__file__).resolve().parents[2] / "gputui" / "ui"
TELEMETRY = UI.parent / "telemetry"
# The monitor's feed: how its sampler is opened, handed over and read (no Textual there).
FEED = [TELEMETRY / "feed.py", TELEMETRY / "sampler_opener.py"]
# The monitor's modules (the benchmark screens are checked by their own tests).
MONITOR = [UI / "app.py", *FEED, UI / "process_signal.py", UI / "run.py",
           UI / "layout.py", UI / "messages.py", UI / "terminal_watch.py",
           UI / "replay_control.py", UI / "keys.py",
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


# What the UI may do with the sampler it owns: run it, subscribe to it, and read what is
# fixed once it is made. Its readings (latest snapshot, trackers, alerts, jobs, its NVML
# source) reach the UI in frames only.
SAMPLER_CONTROLS = {"subscribe", "unsubscribe", "subscribe_frames", "unsubscribe_frames", "start",
                    "stop", "close", "tick", "enable_alerts", "want_detail_fields"}
SAMPLER_FIXED = {"interval", "source", "nvml_error"}


def test_the_textual_version_is_the_installed_one(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """Read from the .dist-info beside the package (cheap, before the first frame), or
    from importlib.metadata where that is not there: the same answer."""
    from importlib.metadata import version

    import textual

    from gputui.ui import textual_adapter

    installed = tuple(int(x) for x in version("textual").split(".")[:2])
    textual_adapter.textual_version.cache_clear()
    assert textual_adapter.textual_version() == installed
    elsewhere = tmp_path / "textual" / "__init__.py"  # no .dist-info beside it
    monkeypatch.setattr(textual, "__file__", str(elsewhere))
    textual_adapter.textual_version.cache_clear()
    assert textual_adapter.textual_version() == installed
    (tmp_path / "textual-1.0.0.dist-info").mkdir()
    textual_adapter.textual_version.cache_clear()
    assert textual_adapter.textual_version() == (1, 0)
    textual_adapter.textual_version.cache_clear()


def _sampler_uses(tree: ast.Module) -> list[str]:
    """`x.name` where x is a sampler (`sampler`, `self.sampler`, `self._sampler` ...)."""
    return [f"{node.lineno}: {ast.unparse(node)}" for node in ast.walk(tree)
            if isinstance(node, ast.Attribute)
            and ((isinstance(node.value, ast.Name) and node.value.id == "sampler")
                 or (isinstance(node.value, ast.Attribute)
                     and node.value.attr in ("sampler", "_sampler")))
            and node.attr not in SAMPLER_CONTROLS | SAMPLER_FIXED]


def test_the_ui_reads_no_state_the_sampler_thread_changes() -> None:
    """The UI's modules and its feed's (which opens, hands over and subscribes to the
    sampler for it)."""
    uses = {p.relative_to(UI.parent).as_posix(): _sampler_uses(ast.parse(p.read_text("utf-8")))
            for p in [*sorted(UI.rglob("*.py")), *FEED]}
    assert uses["ui/app.py"] == [] and "telemetry/sampler_opener.py" in uses
    assert uses["telemetry/feed.py"] == []
    assert {name: found for name, found in uses.items() if found} == {}
    planted = ast.parse("self.sampler.latest\nsampler.nvml\nsampler.interval\n"
                        "self._sampler.latest\n")
    assert _sampler_uses(planted) == ["1: self.sampler.latest", "2: sampler.nvml",
                                      "4: self._sampler.latest"]


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
            if isinstance(node, ast.Import) and any(
                    a.name.split(".")[0] in ("textual", "rich")
                    and any(part.startswith("_") for part in a.name.split("."))
                    for a in node.names):
                offenders.append(f"{path.name}: imports {ast.unparse(node)}")
            if isinstance(node, ast.Assign) and any(
                    isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name)
                    and t.value.id in ("textual", "rich") for t in node.targets):
                offenders.append(f"{path.name}: assigns into {ast.unparse(node.targets[0])}")
    assert offenders == []


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _textual_or_rich(cls: type) -> bool:
    return cls.__module__.split(".")[0] in ("textual", "rich")


@functools.cache
def _parsed(path: str) -> ast.Module:
    return ast.parse(Path(path).read_text(encoding="utf-8"))


@functools.cache
def _private_names_of(base: type) -> frozenset[str]:
    """The private names one Textual or Rich class defines or sets on self."""
    names = {n for n in vars(base) if _private(n)}
    source = inspect.getsourcefile(base)
    for node in ast.walk(_parsed(source)) if source else ():
        if isinstance(node, ast.ClassDef) and node.name == base.__name__:
            names.update(sub.attr for sub in ast.walk(node)
                         if isinstance(sub, ast.Attribute) and _private(sub.attr)
                         and isinstance(sub.value, ast.Name) and sub.value.id == "self")
    return frozenset(names)


def _their_private_names(cls: type) -> frozenset[str]:
    """The private names Textual's or Rich's classes in `cls`'s MRO define or set on self."""
    return frozenset().union(*map(_private_names_of, filter(_textual_or_rich, cls.__mro__)))


def _private_uses(tree: ast.Module, namespace: dict[str, object]) -> list[str]:
    """Where `tree` (a module whose globals are `namespace`) reaches into what is private:
    `x._name` on anything but self/cls or a standard-library module (os._exit), getattr
    and its kin with a private name, and a subclass of a Textual or Rich class using a name
    that class keeps private (reading it, or overwriting it with one of its own)."""
    stdlib_modules = {a.asname or a.name for node in ast.walk(tree)
                      if isinstance(node, ast.Import) for a in node.names
                      if a.name.split(".")[0] in sys.stdlib_module_names}
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and _private(node.attr) and not (
                isinstance(node.value, ast.Name)
                and node.value.id in {"self", "cls", *stdlib_modules}):
            found.append(f"{node.lineno}: {ast.unparse(node)}")
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and \
                node.func.id in ("getattr", "setattr", "hasattr", "delattr") and \
                len(node.args) > 1 and isinstance(node.args[1], ast.Constant) and \
                isinstance(node.args[1].value, str) and _private(node.args[1].value):
            found.append(f"{node.lineno}: {ast.unparse(node)}")
        elif isinstance(node, ast.ClassDef):
            cls = namespace.get(node.name)
            if not isinstance(cls, type) or not any(map(_textual_or_rich, cls.__mro__)):
                continue
            theirs = _their_private_names(cls)
            for sub in ast.walk(node):
                if isinstance(sub, ast.Attribute) and isinstance(sub.value, ast.Name) and \
                        sub.value.id == "self" and sub.attr in theirs:
                    found.append(f"{sub.lineno}: {node.name}: self.{sub.attr}")
            for stmt in node.body:
                if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef) and \
                        stmt.name in theirs:
                    found.append(f"{stmt.lineno}: {node.name} defines {stmt.name}")
    return sorted(found, key=lambda where: int(where.split(":")[0]))


def _modules_using_textual_or_rich() -> list[Path]:
    return [p for p in sorted(UI.parent.rglob("*.py"))
            if {m.split(".")[0] for m in _imports(p)} & {"textual", "rich"}]


def test_only_the_adapter_reads_private_names_of_textual_or_rich_objects() -> None:
    """`app._driver`, a DataTable's `_cell_render_cache`, a widget's `self._nodes`: a name
    Textual or Rich keep private is used in gputui/ui/textual_adapter.py only, which is
    tested with the Textual versions pyproject.toml allows."""
    paths = _modules_using_textual_or_rich()
    assert UI / "app.py" in paths and UI.parent / "commands" / "bench_view.py" in paths
    offenders = []
    for path in paths:
        if path.name == "textual_adapter.py":
            continue
        name = ".".join(path.relative_to(UI.parents[1]).with_suffix("").parts)
        module = importlib.import_module(name)
        tree = ast.parse(path.read_text(encoding="utf-8"))
        offenders += [f"{path.relative_to(UI.parents[1])}:{where}"
                      for where in _private_uses(tree, vars(module))]
    assert offenders == []


def test_the_private_name_check_finds_each_kind() -> None:
    from textual.widget import Widget

    source = textwrap.dedent("""
        import os
        class Panel(Widget):
            def _attach(self, thing):
                return self._nodes
        def driver(app, table):
            os._exit(0)
            return app._driver, getattr(table, "_cell_render_cache", None)
        """)
    tree = ast.parse(source)
    namespace: dict[str, object] = {"Widget": Widget}
    exec(compile(tree, "<panel>", "exec"), namespace)  # the snippet above
    assert _private_uses(tree, namespace) == [
        "4: Panel defines _attach", "5: Panel: self._nodes", "8: app._driver",
        "8: getattr(table, '_cell_render_cache', None)"]


def test_pyproject_bounds_textual_to_what_the_adapter_is_tested_with() -> None:
    import tomllib

    from gputui.ui.textual_adapter import TESTED_VERSIONS, supported, textual_version

    pyproject = tomllib.loads((UI.parents[1] / "pyproject.toml").read_text("utf-8"))
    (line,) = [d for d in pyproject["project"]["dependencies"] if d.startswith("textual>")]
    low, high = line.removeprefix("textual>=").split(",<")
    bounds = (tuple(int(x) for x in low.split(".")[:2]), tuple(int(x) for x in high.split(".")[:2]))
    assert all(bounds[0] <= v < bounds[1] for v in TESTED_VERSIONS), (line, TESTED_VERSIONS)
    assert supported() and textual_version() in TESTED_VERSIONS  # the installed one


def test_the_adapter_imports_where_textuals_private_modules_are_gone() -> None:
    """A Textual that moved its private modules still runs the monitor: the adapter
    reaches them only when asked, on a version it knows, and says False there."""
    import subprocess

    code = ("import sys, textual.app\n"  # Textual's own use of it is loaded; then gone
            "sys.modules['textual._styles_cache'] = None\n"
            "from gputui.ui import textual_adapter\n"
            "print(textual_adapter.forget_removed_widgets())")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=UI.parents[1], timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "False"
