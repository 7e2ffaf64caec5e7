"""pyproject lists the packages explicitly (themes/ is mapped to gputui.themes), so a new
subpackage must be added there or it silently goes missing from the wheel."""

from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _setuptools() -> dict[str, object]:
    data = tomllib.loads((ROOT / "pyproject.toml").read_text())
    return data["tool"]["setuptools"]


def test_every_gputui_subpackage_is_listed() -> None:
    listed = set(_setuptools()["packages"])  # type: ignore[call-overload]
    on_disk = {".".join(p.parent.relative_to(ROOT).parts)
               for p in (ROOT / "gputui").rglob("__init__.py")}
    missing = sorted(on_disk - listed)
    assert not missing, f"add to [tool.setuptools] packages in pyproject.toml: {missing}"


def test_themes_are_mapped_and_shipped() -> None:
    st = _setuptools()
    assert st["package-dir"] == {"gputui.themes": "themes"}  # type: ignore[comparison-overlap]
    assert "*.toml" in st["package-data"]["gputui.themes"]  # type: ignore[index]
    assert (ROOT / "themes" / "__init__.py").is_file()
    assert sorted(p.name for p in (ROOT / "themes").glob("*.toml")) == [
        "gputui-dark.toml", "gputui-high-contrast.toml", "gputui-light.toml"]
