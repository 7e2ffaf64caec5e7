"""How to add the benchmark dependencies, worded for the way gputui was installed.

`pip install 'gputui[bench]'` is right only for an install from a package index: from a
source checkout it would fetch a different gputui. pip records how a distribution was
installed in its `direct_url.json` (PEP 610); no record means an index install.
"""

from __future__ import annotations

import json
from importlib import metadata
from pathlib import Path
from urllib.parse import unquote, urlparse

TORCH = "pip install torch torchvision"


def bench_install_hint(dist_name: str = "gputui") -> str:
    """The command that adds torch and torchvision for this installation."""
    try:
        dist = metadata.distribution(dist_name)
    except metadata.PackageNotFoundError:
        return TORCH  # run from a source tree without installing: the extra does not apply
    try:
        raw = dist.read_text("direct_url.json")
    except OSError:
        raw = None
    if raw is None:
        # An egg-info left in a source checkout (found first when run from it) is not an
        # index install either: the checkout's own extra is what the user wants.
        base = Path(str(dist.locate_file("")))
        if (base / "pyproject.toml").is_file() and (base / dist_name).is_dir():
            return f"pip install -e '{base}[bench]'"
        return f"pip install '{dist_name}[bench]'"
    try:
        info = json.loads(raw)
    except ValueError:
        return TORCH
    if not isinstance(info, dict):
        return TORCH
    dir_info = info.get("dir_info")
    url = info.get("url")
    if isinstance(dir_info, dict) and dir_info.get("editable") and isinstance(url, str):
        path = unquote(urlparse(url).path) if url.startswith("file:") else url
        return f"pip install -e '{path}[bench]'"
    # A local directory, an archive or a VCS checkout: the extra's own packages.
    return TORCH
