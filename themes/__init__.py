"""gputui's shipped colour themes (TOML), installed as the package `gputui.themes`.

The directory sits at the repository root (where people look for themes) and is
mapped into the package by pyproject's `package-dir`; read the files with
`importlib.resources.files("gputui.themes")`, never by path.
"""
