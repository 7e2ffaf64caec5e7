"""The seams are typed: no module asks a sampler, a GPU source, the app or a screen what
it has with getattr/hasattr (a probe hides a missing method until the day it is needed,
and tells a reader nothing about what the object is)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "gputui"
# The objects behind the seams, by the names the code gives them.
SEAM_NAMES = re.compile(r"(^|\.)(sampler|_sampler|source|src|nvml|telemetry|app|own)$")
# Where `self` is the app or a screen.
SELF_PROBE_FILES = ("ui/app.py", "ui/screens/")


def probes(rel: str, text: str) -> list[str]:
    """The probes in one module's source (`rel`: its path under gputui/)."""
    found = []
    for node in ast.walk(ast.parse(text)):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                and node.func.id in ("getattr", "hasattr") and node.args):
            continue
        target = ast.unparse(node.args[0])
        if SEAM_NAMES.search(target) or (
                target == "self" and rel.startswith(SELF_PROBE_FILES)):
            found.append(f"{rel}:{node.lineno}: {ast.unparse(node)}")
    return found


def test_no_seam_is_probed_with_getattr_or_hasattr() -> None:
    found = [p for path in sorted(PACKAGE.rglob("*.py"))
             for p in probes(path.relative_to(PACKAGE).as_posix(),
                             path.read_text(encoding="utf-8"))]
    assert found == [], "\n".join(found)


def test_the_check_sees_a_probe() -> None:
    """The rule can fail: a probe of each kind is found, and a plain getattr is not one."""
    sample = ("def f(self, sampler, p):\n"
              "    getattr(sampler, 'nvml', None)\n"
              "    hasattr(self, 'main')\n"
              "    getattr(self.app.sampler, 'interval', 0)\n"
              "    getattr(p, 'pid')\n")
    assert len(probes("ui/screens/sample.py", sample)) == 3
