"""docs/architecture.md's query funnel, by source: pynvml's public functions only, called
through an NvmlQuery; the few called directly are the ones that cannot go through it
(opening and closing NVML, giving GPM buffers and the event set back)."""

from __future__ import annotations

import ast
from pathlib import Path

import gputui

PKG = Path(gputui.__file__).parent
BYPASS = {"nvmlInit", "nvmlShutdown", "nvmlGpmSampleFree", "nvmlEventSetFree"}


def _direct_calls(tree: ast.Module) -> list[tuple[int, str]]:
    """`pynvml.nvmlX(...)` calls: pynvml's function called here, not handed to a query."""
    return [(node.lineno, node.func.attr) for node in ast.walk(tree)
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and isinstance(node.func.value, ast.Name) and node.func.value.id == "pynvml"
            and node.func.attr.startswith("nvml")]


def test_only_the_documented_calls_bypass_the_query_funnel() -> None:
    calls = {p.relative_to(PKG).as_posix(): _direct_calls(ast.parse(p.read_text("utf-8")))
             for p in sorted(PKG.rglob("*.py"))}
    assert {name for found in calls.values() for _line, name in found} == BYPASS
    outside = [f"{path}:{line} {name}" for path, found in calls.items()
               for line, name in found if name not in BYPASS]
    assert outside == []


def test_only_pynvmls_public_names_are_used() -> None:
    private = [f"{p.relative_to(PKG).as_posix()}:{node.lineno} {ast.unparse(node)}"
               for p in sorted(PKG.rglob("*.py"))
               for node in ast.walk(ast.parse(p.read_text("utf-8")))
               if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
               and node.value.id == "pynvml" and node.attr.startswith("_")]
    assert private == []


def test_the_check_sees_a_direct_call_and_not_a_funnelled_one() -> None:
    tree = ast.parse("q(pynvml.nvmlDeviceGetName, h)\npynvml.nvmlDeviceGetName(h)\n")
    assert _direct_calls(tree) == [(2, "nvmlDeviceGetName")]
