"""Colour themes from TOML files: the shipped ones plus the user's own.

Sources, in order (a later theme with the same name replaces an earlier one, so a
user can restyle `gputui-dark` by dropping a file with that name in their dir):

1. the themes shipped in the package `gputui.themes` (repo: `themes/*.toml`);
2. `<user config dir>/themes/*.toml` — platformdirs' `user_config_dir("gputui")`,
   or `$GPUTUI_CONFIG_DIR` when set (tests use this);
3. any `extra_dirs` the caller passes.

A file that cannot be used (bad TOML, a missing or mistyped key, a colour Textual
cannot parse) is skipped with one warning naming the file; the others still load.
"""

from __future__ import annotations

import importlib
import os
import tomllib
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from textual.color import Color, ColorParseError
from textual.theme import Theme

if TYPE_CHECKING:
    from textual.app import App

DEFAULT_THEME = "gputui-dark"
SHIPPED_THEMES = ("gputui-dark", "gputui-light", "gputui-high-contrast")
ENV_THEME = "GPUTUI_THEME"
ENV_CONFIG_DIR = "GPUTUI_CONFIG_DIR"

REQUIRED_KEYS = ("name", "primary")
COLOUR_KEYS = ("primary", "secondary", "accent", "warning", "error", "success",
               "foreground", "background", "surface", "panel", "boost")
KNOWN_KEYS = frozenset({*COLOUR_KEYS, "name", "dark", "luminosity_spread", "text_alpha",
                        "variables", "ansi"})


class ThemeFileError(ValueError):
    """Why one theme file was skipped (str() is the reason, without the file name)."""


def user_themes_dir(env: Mapping[str, str] | None = None) -> Path:
    env = os.environ if env is None else env
    base = env.get(ENV_CONFIG_DIR)
    if base:
        return Path(base) / "themes"
    import platformdirs

    return Path(platformdirs.user_config_dir("gputui")) / "themes"


def theme_from_dict(data: Mapping[str, Any], *, try_it: bool = True
                    ) -> tuple[Theme, list[str]]:
    """Build a Theme from a parsed TOML table. Returns (theme, notes about ignored keys).

    Raises ThemeFileError when the table cannot make a working theme. `try_it=False`
    skips generating its colours (the shipped themes: the tests generate those).
    """
    missing = [k for k in REQUIRED_KEYS if k not in data]
    if missing:
        raise ThemeFileError(f"missing required key{'s' if len(missing) > 1 else ''}: "
                             + ", ".join(missing))
    notes = [f"unknown key {k!r} ignored" for k in data if k not in KNOWN_KEYS]
    name = data["name"]
    if not isinstance(name, str) or not name.strip():
        raise ThemeFileError("'name' must be a non-empty string")
    if any(c.isspace() for c in name):
        raise ThemeFileError(f"'name' must not contain spaces: {name!r}")
    kwargs: dict[str, Any] = {"name": name}
    for key in COLOUR_KEYS:
        if key not in data:
            continue
        value = data[key]
        if not isinstance(value, str):
            raise ThemeFileError(f"{key!r} must be a colour string, not {type(value).__name__}")
        try:
            Color.parse(value)
        except ColorParseError:
            raise ThemeFileError(f"{key!r} is not a colour: {value!r}") from None
        kwargs[key] = value
    for key in ("dark", "ansi"):
        if key in data:
            if not isinstance(data[key], bool):
                raise ThemeFileError(f"{key!r} must be true or false")
            kwargs[key] = data[key]
    for key in ("luminosity_spread", "text_alpha"):
        if key in data:
            value = data[key]
            if isinstance(value, bool) or not isinstance(value, int | float) \
                    or not 0.0 <= value <= 1.0:
                raise ThemeFileError(f"{key!r} must be a number from 0 to 1")
            kwargs[key] = float(value)
    variables = data.get("variables", {})
    if not isinstance(variables, Mapping) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in variables.items()):
        raise ThemeFileError("[variables] must map names to strings")
    kwargs["variables"] = dict(variables)
    theme = Theme(**kwargs)
    if not try_it:
        return theme, notes
    try:
        # What Textual does when the theme is applied: fail here, not in the running app.
        theme.to_color_system().generate()
    except Exception as exc:
        raise ThemeFileError(f"Textual cannot use it: {exc}") from None
    return theme, notes


def load_theme_file(path: Path, label: str | None = None) -> tuple[Theme | None, list[str]]:
    """One file → (theme or None, warnings). Warnings name the file."""
    label = label or str(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        return None, [f"theme file {label}: cannot read it ({exc.strerror or exc}); skipped"]
    except UnicodeDecodeError:
        return None, [f"theme file {label}: not UTF-8 text; skipped"]
    return _from_text(text, label)


def _shipped_files() -> tuple[list[tuple[str, Path]], list[str]]:
    # The package's folder, not importlib.resources: that module alone took ~7 ms of the
    # monitor's start (the themes are plain files in a namespace package).
    try:
        folders = [Path(p) for p in importlib.import_module("gputui.themes").__path__]
        files = sorted((f for d in folders for f in d.glob("*.toml") if f.is_file()),
                       key=lambda f: f.name)
    except (ModuleNotFoundError, OSError) as exc:
        return [], [f"the shipped themes are missing from this installation ({exc})"]
    return [(f"gputui.themes/{f.name}", f) for f in files], []


def _dir_files(directory: Path) -> list[Path]:
    try:
        return sorted(p for p in directory.glob("*.toml") if p.is_file())
    except OSError:
        return []


def load_themes(extra_dirs: list[Path] | None = None,
                env: Mapping[str, str] | None = None) -> tuple[list[Theme], list[str]]:
    """All usable themes (shipped first) and one warning per file that was skipped."""
    themes: dict[str, Theme] = {}
    warnings: list[str] = []
    shipped, problems = _shipped_files()
    warnings += problems
    for label, entry in shipped:
        try:
            text = entry.read_text(encoding="utf-8")
        except OSError as exc:
            warnings.append(f"theme file {label}: cannot read it ({exc}); skipped")
            continue
        # Not tried here (the tests do): generating three themes' colours took ~1 ms.
        theme, notes = _from_text(text, label, try_it=False)
        warnings += notes
        if theme is not None:
            themes[theme.name] = theme
    dirs: list[Path] = [user_themes_dir(env), *(Path(d) for d in extra_dirs or ())]
    for directory in dirs:
        for path in _dir_files(directory):
            theme, notes = load_theme_file(path)
            warnings += notes
            if theme is not None:
                themes.pop(theme.name, None)  # re-insert: keeps "later wins" visible in order
                themes[theme.name] = theme
    return list(themes.values()), warnings


def _from_text(text: str, label: str, try_it: bool = True) -> tuple[Theme | None, list[str]]:
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        return None, [f"theme file {label}: not valid TOML ({exc}); skipped"]
    try:
        theme, notes = theme_from_dict(data, try_it=try_it)
    except ThemeFileError as exc:
        return None, [f"theme file {label}: {exc}; skipped"]
    return theme, [f"theme file {label}: {note}" for note in notes]


def install_themes(app: App[Any], requested: str | None) -> tuple[list[str], list[str]]:
    """Register every usable theme with `app` and set the one asked for (`requested`:
    --theme, else $GPUTUI_THEME, else the default; Textual's own if the shipped themes
    are missing). Returns the themes' names in order, and the warnings to show."""
    themes, warnings = load_themes()
    for theme in themes:
        app.register_theme(theme)
    name, warning = resolve_theme(pick_theme(requested, os.environ), app.available_themes)
    if warning:
        warnings.append(warning)
    app.theme = name if name in app.available_themes else "textual-dark"
    return [t.name for t in themes], warnings


def pick_theme(cli_value: str | None, env: Mapping[str, str]) -> str | None:
    """The theme the user asked for: --theme beats $GPUTUI_THEME; None = not asked."""
    for value in (cli_value, env.get(ENV_THEME)):
        if value is not None and value.strip():
            return value.strip()
    return None


def resolve_theme(requested: str | None, available: Iterable[str]) -> tuple[str, str | None]:
    """(theme to use, warning or None). An unknown name falls back to the default."""
    names = list(available)
    if requested is None:
        return DEFAULT_THEME, None
    if requested in names:
        return requested, None
    return DEFAULT_THEME, (f"unknown theme {requested!r} (available: {', '.join(sorted(names))}); "
                           f"using {DEFAULT_THEME}")


def require_theme(name: str | None, extra_dirs: list[Path] | None = None) -> None:
    """`--theme NAME` names a theme that loads, or the command stops before the terminal is
    taken over: one line listing the themes there are (UsageError, exit 2)."""
    if name is None:
        return
    from gputui.errors import UsageError

    themes, _warnings = load_themes(extra_dirs)
    names = sorted(t.name for t in themes)
    if name.strip() not in names:
        raise UsageError(f"unknown theme {name!r} (themes: {', '.join(names) or 'none'})")
