from __future__ import annotations

import tomllib
from importlib import resources
from pathlib import Path

import pytest
from textual.color import Color
from textual.theme import Theme

from gputui.ui.themes import (
    DEFAULT_THEME,
    SHIPPED_THEMES,
    load_themes,
    pick_theme,
    resolve_theme,
    theme_from_dict,
    user_themes_dir,
)

REPO_THEMES = Path(__file__).resolve().parents[2] / "themes"


@pytest.fixture
def config_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty user config dir, so the developer's own themes never leak into tests."""
    cfg = tmp_path / "config"
    monkeypatch.setenv("GPUTUI_CONFIG_DIR", str(cfg))
    (cfg / "themes").mkdir(parents=True)
    return cfg / "themes"


def _luminance(c: Color) -> float:
    def lin(v: int) -> float:
        s = v / 255
        return s / 12.92 if s <= 0.04045 else ((s + 0.055) / 1.055) ** 2.4

    return 0.2126 * lin(c.r) + 0.7152 * lin(c.g) + 0.0722 * lin(c.b)


def contrast(a: str, b: str) -> float:
    la, lb = sorted((_luminance(Color.parse(a)), _luminance(Color.parse(b))), reverse=True)
    return (la + 0.05) / (lb + 0.05)


def test_shipped_themes_load_without_warnings(config_dir: Path) -> None:
    themes, warnings = load_themes()
    assert warnings == []
    names = [t.name for t in themes]
    assert names == sorted(SHIPPED_THEMES)
    assert DEFAULT_THEME in names
    assert all(isinstance(t, Theme) for t in themes)


def test_shipped_themes_are_in_the_package_resources() -> None:
    files = {e.name for e in resources.files("gputui.themes").iterdir()}
    assert {f"{n}.toml" for n in SHIPPED_THEMES} <= files
    # And they are the repo's files, not copies that could drift.
    for name in SHIPPED_THEMES:
        shipped = resources.files("gputui.themes").joinpath(f"{name}.toml").read_text()
        assert shipped == (REPO_THEMES / f"{name}.toml").read_text()


@pytest.mark.parametrize("name", SHIPPED_THEMES)
def test_shipped_theme_is_complete_and_readable(name: str) -> None:
    data = tomllib.loads((REPO_THEMES / f"{name}.toml").read_text())
    assert data["name"] == name
    for key in ("primary", "secondary", "accent", "warning", "error", "success", "foreground",
                "background", "surface", "panel", "boost", "dark", "variables"):
        assert key in data, key
    theme, notes = theme_from_dict(data)
    assert notes == []
    # Text and state colours must read well on the background (WCAG AA: 4.5:1).
    for key in ("foreground", "warning", "error", "success", "primary"):
        assert contrast(data[key], data["background"]) >= 4.5, (name, key)
    assert theme.dark == (name != "gputui-light")


def test_high_contrast_does_not_rely_on_red_and_green() -> None:
    data = tomllib.loads((REPO_THEMES / "gputui-high-contrast.toml").read_text())
    assert data["background"].upper() == "#000000" and data["foreground"].upper() == "#FFFFFF"
    for key in ("error", "warning", "success"):
        assert contrast(data[key], "#000000") >= 7.0, key  # AAA
    hues = {key: Color.parse(data[key]).hsl.h * 360 for key in ("error", "warning", "success")}
    # No pure-red error, no green success: orange, yellow and blue instead.
    assert 20 <= hues["error"] <= 45
    assert 45 <= hues["warning"] <= 65
    assert 180 <= hues["success"] <= 240
    # The three states also differ in brightness (for anyone who sees no hue at all).
    lum = sorted(_luminance(Color.parse(data[k])) for k in ("error", "warning", "success"))
    assert lum[1] - lum[0] > 0.05 and lum[2] - lum[1] > 0.05


def test_user_themes_load_and_override(config_dir: Path) -> None:
    (config_dir / "mine.toml").write_text('name = "mine"\nprimary = "#112233"\n')
    (config_dir / "dark.toml").write_text(
        f'name = "{DEFAULT_THEME}"\nprimary = "#ff0000"\ndark = true\n')
    themes, warnings = load_themes()
    assert warnings == []
    by_name = {t.name: t for t in themes}
    assert by_name["mine"].primary == "#112233"
    assert by_name[DEFAULT_THEME].primary == "#ff0000"  # the user's file wins


def test_extra_dirs_and_warnings_name_the_file(config_dir: Path, tmp_path: Path) -> None:
    extra = tmp_path / "extra"
    extra.mkdir()
    (extra / "good.toml").write_text('name = "good"\nprimary = "blue"\n[variables]\n'
                                     '"footer-key-foreground" = "#ffffff"\n')
    (extra / "bad-toml.toml").write_text('name = "oops\n')
    (extra / "no-primary.toml").write_text('name = "np"\n')
    (extra / "bad-colour.toml").write_text('name = "bc"\nprimary = "#12"\n')
    (extra / "bad-type.toml").write_text('name = "bt"\nprimary = "#123456"\ndark = "yes"\n')
    (extra / "typo.toml").write_text('name = "typo"\nprimary = "#123456"\nprimery = "#1"\n')
    (extra / "ignored.txt").write_text("not a theme")
    themes, warnings = load_themes(extra_dirs=[extra])
    names = {t.name for t in themes}
    assert {"good", "typo"} <= names and not {"np", "bc", "bt"} & names
    by_file = {w.split(":")[0]: w for w in warnings}
    assert len(warnings) == 5, warnings
    assert "not valid TOML" in by_file[f"theme file {extra / 'bad-toml.toml'}"]
    assert "missing required key: primary" in by_file[f"theme file {extra / 'no-primary.toml'}"]
    assert "'primary' is not a colour: '#12'" in by_file[f"theme file {extra / 'bad-colour.toml'}"]
    assert "'dark' must be true or false" in by_file[f"theme file {extra / 'bad-type.toml'}"]
    assert "unknown key 'primery' ignored" in by_file[f"theme file {extra / 'typo.toml'}"]
    assert all(w.endswith("; skipped") for f, w in by_file.items() if "typo" not in f)
    assert all("\n" not in w for w in warnings)


@pytest.mark.parametrize(("data", "why"), [
    ({"name": "", "primary": "#fff"}, "non-empty"),
    ({"name": "a b", "primary": "#fff"}, "spaces"),
    ({"name": "x", "primary": 3}, "must be a colour string"),
    ({"name": "x", "primary": "#fff", "text_alpha": 2}, "from 0 to 1"),
    ({"name": "x", "primary": "#fff", "variables": {"a": 1}}, "[variables]"),
    ({"primary": "#fff"}, "missing required key: name"),
])
def test_invalid_theme_tables(data: dict[str, object], why: str) -> None:
    from gputui.ui.themes import ThemeFileError

    with pytest.raises(ThemeFileError, match=None) as err:
        theme_from_dict(data)
    assert why in str(err.value)


def test_user_dir_defaults_to_platformdirs(monkeypatch: pytest.MonkeyPatch) -> None:
    import platformdirs

    assert user_themes_dir({}) == Path(platformdirs.user_config_dir("gputui")) / "themes"
    assert user_themes_dir({"GPUTUI_CONFIG_DIR": "/x"}) == Path("/x/themes")


def test_missing_user_dir_is_fine(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GPUTUI_CONFIG_DIR", str(tmp_path / "does-not-exist"))
    themes, warnings = load_themes(extra_dirs=[tmp_path / "nor-this"])
    assert warnings == [] and len(themes) == len(SHIPPED_THEMES)


def test_pick_theme_cli_beats_env() -> None:
    assert pick_theme("gputui-light", {"GPUTUI_THEME": "gputui-high-contrast"}) == "gputui-light"
    assert pick_theme(None, {"GPUTUI_THEME": "gputui-high-contrast"}) == "gputui-high-contrast"
    assert pick_theme(None, {"GPUTUI_THEME": "  "}) is None
    assert pick_theme(None, {}) is None
    assert pick_theme("", {"GPUTUI_THEME": "x"}) == "x"


def test_resolve_theme() -> None:
    names = ["gputui-dark", "gputui-light", "textual-dark"]
    assert resolve_theme(None, names) == (DEFAULT_THEME, None)
    assert resolve_theme("textual-dark", names) == ("textual-dark", None)
    name, warning = resolve_theme("nope", names)
    assert name == DEFAULT_THEME and warning is not None and "unknown theme 'nope'" in warning


def test_themes_register_with_a_textual_app(config_dir: Path) -> None:
    from textual.app import App

    themes, _ = load_themes()
    # The shipped themes at least: an empty list would make the loop below prove nothing.
    assert {"gputui-dark", "gputui-light", "gputui-high-contrast"} <= {t.name for t in themes}
    app: App[None] = App()
    for t in themes:
        app.register_theme(t)
    for t in themes:
        app.theme = t.name
        assert app.current_theme.name == t.name
