"""The thread rules of docs/architecture.md, by source: every thread gputui starts itself
is a daemon (a hung NVML call or request never keeps the process from exiting), and no
background thread waits on the event loop (`call_from_thread`): they post messages."""

from __future__ import annotations

import ast
from pathlib import Path

PKG = Path(__file__).resolve().parents[2] / "gputui"


def _non_daemon_threads(tree: ast.Module) -> list[str]:
    """`threading.Thread(...)`/`threading.Timer(...)` made without daemon=True, and without
    `<it>.daemon = True` in the function that makes it."""
    found = []
    for func in ast.walk(tree):
        if not isinstance(func, ast.FunctionDef | ast.AsyncFunctionDef | ast.Module):
            continue
        sets_daemon = any(
            isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Attribute) and t.attr == "daemon" for t in node.targets)
            and isinstance(node.value, ast.Constant) and node.value.value is True
            for node in ast.walk(func))
        for node in ast.walk(func):
            if isinstance(node, ast.Call) and ast.unparse(node.func) in (
                    "threading.Thread", "threading.Timer", "Thread", "Timer"):
                daemon = {k.arg: k.value for k in node.keywords}.get("daemon")
                if not (isinstance(daemon, ast.Constant) and daemon.value is True) \
                        and not sets_daemon:
                    found.append(f"{node.lineno}: {ast.unparse(node)}")
    return sorted(set(found))


def test_every_thread_gputui_starts_is_a_daemon() -> None:
    trees = {p.relative_to(PKG).as_posix(): ast.parse(p.read_text("utf-8"))
             for p in sorted(PKG.rglob("*.py"))}
    threads = sum(ast.unparse(n.func) in ("threading.Thread", "threading.Timer")
                  for tree in trees.values() for n in ast.walk(tree) if isinstance(n, ast.Call))
    assert threads > 10  # the check saw gputui's threads
    offenders = {name: found for name, tree in trees.items()
                 if (found := _non_daemon_threads(tree))}
    assert offenders == {}


def test_the_check_sees_a_thread_that_is_not_a_daemon() -> None:
    tree = ast.parse("def a():\n    threading.Thread(target=f).start()\n"
                     "def b():\n    t = threading.Timer(1, f)\n    t.daemon = True\n"
                     "def c():\n    threading.Thread(target=f, daemon=True)\n")
    assert _non_daemon_threads(tree) == ["2: threading.Thread(target=f)"]


def test_no_thread_waits_on_the_event_loop() -> None:
    offenders = [p.relative_to(PKG).as_posix() for p in sorted(PKG.rglob("*.py"))
                 if "call_from_thread" in p.read_text("utf-8")]
    assert offenders == []
